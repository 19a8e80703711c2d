// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "PostgresFanout",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "postgres-fanout", targets: ["postgres-fanout"])
    ],
    dependencies: [
        // The library, from this repository.
        .package(name: "AsyncMulticast", path: "../.."),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        // Already in the dependency graph of the two above: naming them costs no extra build.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // The fan-out itself and the HTTP server of one instance.
        .target(
            name: "PostgresFanout",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // One server instance: `swift run postgres-fanout --name a --port 8081`.
        .executableTarget(
            name: "postgres-fanout",
            dependencies: ["PostgresFanout"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "PostgresFanoutTests",
            dependencies: [
                "PostgresFanout",
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
