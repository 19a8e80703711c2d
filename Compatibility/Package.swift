// swift-tools-version: 6.0
import PackageDescription

// Tests the library the way users combine it with libraries they already use: a test clock
// from swift-clocks driving the keep-alive and replay-expiry windows, swift-async-algorithms
// operators before and after `share()`, and an OpenCombine publisher bridged into a shared
// source and back. Holds the adapters that need another library: `MulticastMetrics` reports
// subscribers, evictions, missed elements and backlogs through swift-metrics. A package of
// its own, so that the library itself keeps depending on nothing.
let package = Package(
    name: "Compatibility",
    // The library's own floor (Mutex, typed-throws AsyncSequence).
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CombineBridge", targets: ["CombineBridge"]),
        .library(name: "MulticastMetrics", targets: ["MulticastMetrics"]),
    ],
    dependencies: [
        // The library, from this repository. Named, because a path dependency is otherwise
        // known by its folder's name, which is whatever the clone was called.
        .package(name: "AsyncMulticast", path: ".."),
        .package(url: "https://github.com/pointfreeco/swift-clocks.git", from: "1.1.1"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", from: "1.1.4"),
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // What a user writes to move values between Combine and Swift Concurrency: kept in a
        // target of its own so that the tests exercise it as a dependent module would.
        .target(
            name: "CombineBridge",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Subscribers, evictions by reason, missed elements and backlog high-water marks, as
        // swift-metrics gauges, counters and recorders (a server's /metrics, say).
        .target(
            name: "MulticastMetrics",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "CompatibilityTests",
            dependencies: [
                "CombineBridge",
                "MulticastMetrics",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
