// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "AsyncMulticast",
    // Mutex, typed-throws AsyncSequence (`Failure`, `next(isolation:)`) need these OS versions.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "AsyncMulticast", targets: ["AsyncMulticast"]),
        .executable(name: "multicast-demo", targets: ["multicast-demo"]),
    ],
    // Deliberately empty: users of the library resolve nothing else.
    dependencies: [],
    targets: [
        .target(
            name: "AsyncMulticast",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "multicast-demo",
            dependencies: ["AsyncMulticast"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "AsyncMulticastTests",
            dependencies: ["AsyncMulticast"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
