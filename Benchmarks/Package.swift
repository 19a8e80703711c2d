// swift-tools-version: 6.1
//
// Benchmarks for AsyncMulticast. This is a separate, nested package on purpose:
// users of the library resolve nothing from here (the library itself has zero
// dependencies). Run it from this folder:
//
//     swift package benchmark                 # package-benchmark suite
//     swift run -c release compare            # side-by-side ratio table
//     swift test                              # overload check (AsyncAlgorithms + AsyncMulticast)
//
import PackageDescription

let swift6: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    // Files see only the members of modules they import themselves: keeps
    // AsyncAlgorithms' and AsyncMulticast's `share` apart in MulticastScenarios.
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "AsyncMulticastBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        // The library under test, one folder up.
        .package(name: "AsyncMulticast", path: ".."),
        // package-benchmark (its current URL and identity; the old
        // ordo-one/package-benchmark identity makes the plugin print a deprecation
        // warning). On Swift 6.3 its default traits also pull in a Swift runtime
        // interposer (only needed for ARC metrics, which this suite does not use);
        // naming only the malloc interposer trait keeps the malloc metrics and
        // drops that dependency.
        .package(
            url: "https://github.com/ordo-one/benchmark",
            exact: "1.38.1",
            traits: ["MallocInterposer"]
        ),
        // The comparison point: swift-async-algorithms' share().
        .package(url: "https://github.com/apple/swift-async-algorithms", exact: "1.1.4"),
        // The command line of `compare`.
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        // The synchronous anchor of the cost-per-delivery comparison: Combine's
        // open-source re-implementation, PassthroughSubject with N sinks.
        .package(url: "https://github.com/OpenCombine/OpenCombine", exact: "0.14.0"),
    ],
    targets: [
        // glibc mallinfo2() for the idle-subscriber memory scenario (malloc.h is not in the Glibc module).
        .target(name: "CHeapStats"),
        // Scenario code shared by the package-benchmark suite and `compare`:
        // the hand-rolled broadcaster, the sources and the scenario runners.
        .target(
            name: "MulticastScenarios",
            dependencies: [
                "CHeapStats",
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            swiftSettings: swift6
        ),
        // package-benchmark suite (discovered under Benchmarks/<Name>/).
        .executableTarget(
            name: "MulticastBenchmarks",
            dependencies: [
                "MulticastScenarios",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/MulticastBenchmarks",
            swiftSettings: swift6,
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // Side-by-side comparison in one process: `swift run -c release compare [--smoke|--full]`.
        .executableTarget(
            name: "compare",
            dependencies: [
                "MulticastScenarios",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swift6
        ),
        // One cost-per-delivery cell (implementation, N, M) in a process with a synchronous
        // main, for `compare --instructions` to run under valgrind (callgrind).
        .executableTarget(
            name: "delivery-cell",
            dependencies: ["MulticastScenarios"],
            swiftSettings: swift6
        ),
        // The instruction gate's thresholds file: parsing, checking, rewriting.
        .testTarget(
            name: "ThresholdTests",
            dependencies: ["MulticastScenarios"],
            swiftSettings: swift6
        ),
        // The harness's own helpers (compare's heap jitter).
        .testTarget(
            name: "HarnessTests",
            dependencies: ["MulticastScenarios"],
            swiftSettings: swift6
        ),
        // Compile-time overload check with both AsyncAlgorithms and AsyncMulticast imported.
        .testTarget(
            name: "OverloadTests",
            dependencies: [
                .product(name: "AsyncMulticast", package: "AsyncMulticast"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
            ],
            swiftSettings: swift6
        ),
    ]
)
