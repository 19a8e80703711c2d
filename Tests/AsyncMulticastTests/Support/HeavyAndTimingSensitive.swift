// The parent suite of the tests that must not run next to each other.

import Testing

/// Tests that load both cores (stress, 10,000 subscribers) and tests that check that a call
/// "returns at once" live in sub-suites of this one, so that they never run at the same time.
@Suite("Heavy and timing-sensitive", .serialized)
enum HeavyAndTimingSensitive {}
