// The parent suite of the tests that must not run next to each other.

import Testing

/// Tests that load both cores (stress, 10,000 subscribers, the model test's CPU-bound
/// shards), tests that check that a call "returns at once", and tests that block a thread
/// (`BlockingGate`) live in sub-suites of this one, so that they never run at the same time.
///
/// The rest of the suite runs beside them, hundreds of tests at once on a cooperative pool
/// of one thread per core: a test that computes for long yields every few milliseconds
/// (`await Task.yield()`), so that each round trip of the tests beside it stays short.
@Suite("Heavy and timing-sensitive", .serialized)
enum HeavyAndTimingSensitive {}
