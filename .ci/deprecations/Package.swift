// swift-tools-version: 6.0
// A package that uses every deprecated spelling of the library (0.1.0's names), so that
// .ci/deprecation-check.sh can check each still compiles, with a deprecation warning that
// names its replacement (the fix-it), and behaves as the new spelling does. It depends on
// the repository by path: what is checked is the working tree.
import PackageDescription

let package = Package(
    name: "DeprecatedSpellings",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [.package(name: "AsyncMulticast", path: "../..")],
    targets: [
        .executableTarget(
            name: "DeprecatedSpellings",
            dependencies: [.product(name: "AsyncMulticast", package: "AsyncMulticast")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
