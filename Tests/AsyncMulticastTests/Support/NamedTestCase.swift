// The cases a parameterized test runs over (faces, paths, completions), named in test reports
// and failure messages by their raw value.

import Testing

/// An enumeration of the cases a parameterized test runs over, each named by its raw value:
/// `enum Face: String, NamedTestCase { case share, replay }`, then `arguments: Face.allCases`.
protocol NamedTestCase: RawRepresentable<String>, CaseIterable, Sendable, CustomStringConvertible,
    CustomTestStringConvertible
{}

extension NamedTestCase {
    var description: String { self.rawValue }
    var testDescription: String { self.rawValue }
}
