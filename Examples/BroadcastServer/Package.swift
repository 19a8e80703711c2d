// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "BroadcastServer",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "BroadcastServer", targets: ["BroadcastServer"]),
        // Chat rooms over WebSocket, one AsyncSubjectTopics key per room (README: "Chat rooms").
        .executable(name: "chat-rooms", targets: ["ChatRoomsServer"]),
    ],
    dependencies: [
        // The library, from this repository. Named, because a path dependency is otherwise
        // known by its folder's name, which is whatever the clone was called.
        .package(name: "AsyncMulticast", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // GET /ws, the chat room over WebSocket (its tests speak the protocol over plain sockets).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // Already in Hummingbird's dependency graph: naming them costs no extra build.
        .package(url: "https://github.com/apple/swift-log.git", from: "1.14.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // GET /metrics: the library's MulticastMetrics adapter, in Prometheus's text format.
        .package(name: "Compatibility", path: "../../Compatibility"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .target(
            name: "Broadcast",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MulticastMetrics", package: "Compatibility"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "BroadcastServer",
            dependencies: ["Broadcast"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "ChatRooms",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "ChatRoomsServer",
            dependencies: ["ChatRooms"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "BroadcastServerTests",
            dependencies: [
                "Broadcast",
                "ChatRooms",
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
