// Helpers shared by the test files: hang guards, polling waits, instrumented sources and a
// seeded random generator. Nothing here sleeps to establish an order: every wait is for a
// condition, and the deadlines are only there so that a bug fails a test instead of hanging it.

import Testing
@testable import AsyncMulticast

// MARK: - Peeking into the storage

extension MulticastStorage {
    /// Subscribers currently suspended in `next()`. Read by reflection so the library does not
    /// need a test-only accessor; `waitingCountIsReadable` checks that this keeps working.
    var waitingCount: Int {
        self.state.withLock { state in
            guard let waiters = Mirror(reflecting: state.machine).descendant("waiters") else {
                return -1
            }
            return Mirror(reflecting: waiters).children.count
        }
    }

    var bufferedCount: Int { self.state.withLock { $0.machine.bufferedCount } }
    var upstreamState: Machine.Upstream { self.state.withLock { $0.machine.upstream } }
}

extension AsyncShareSequence {
    /// Waits until `count` subscribers are suspended in `next()`.
    func waitForWaiting(
        _ count: Int, seconds: Double = 50, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await waitUntil("\(count) waiting subscribers", seconds: seconds, sourceLocation: sourceLocation) {
            self.storage.waitingCount == count
        }
    }

    /// Creates `count` iterators first, so that every subscriber is registered before any
    /// of them reads, then runs `body` on each in its own task, all released together.
    /// Returns the results in completion order.
    func iterateTogether<Result: Sendable>(
        _ count: Int, _ body: @escaping @Sendable (inout SharedIterator<Element, Failure>) async -> Result
    ) async -> [Result] {
        let start = Latch()
        return await withTaskGroup(of: Result.self) { group in
            for _ in 0..<count {
                var iterator = self.makeAsyncIterator()
                group.addTask {
                    await start.wait()
                    return await body(&iterator)
                }
            }
            start.release()
            var results: [Result] = []
            for await result in group { results.append(result) }
            return results
        }
    }

    /// Waits until exactly `count` subscribers are registered.
    func waitForSubscribers(
        _ count: Int, seconds: Double = 50, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await waitUntil("\(count) subscribers", seconds: seconds, sourceLocation: sourceLocation) {
            self.subscriberCount == count
        }
    }
}

// MARK: - A subscriber driven from other tasks

/// Holds an iterator so that its `next()` calls can run in tasks the test starts one at a
/// time (`Task { await sub.next() }`), while the test does something else meanwhile.
/// Calls never overlap: each task is awaited before the next one starts, which also orders
/// the accesses for ThreadSanitizer.
final class Sub<Element: Sendable, Failure: Error>: @unchecked Sendable {
    private var iterator: SharedIterator<Element, Failure>?

    init(_ iterator: consuming SharedIterator<Element, Failure>) {
        self.iterator = iterator
    }

    func next() async throws(Failure) -> Element? {
        try await self.iterator!.next()
    }

    /// Releases the iterator (the subscriber leaves).
    func release() { self.iterator = nil }
}

extension Sub where Failure == Never {
    /// Starts one `next()` in a new task.
    func startNext() -> Task<Element?, Never> {
        Task { await self.next() }
    }
}

// MARK: - Seeded randomness

/// A 64-bit linear congruential generator (Knuth's MMIX constants): reproducible runs.
struct LCG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

    mutating func next() -> UInt64 {
        self.state = self.state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return self.state ^ (self.state >> 29)
    }
}

/// Whether `values` are consecutive integers: an in-order run, nothing missed, nothing repeated.
func isConsecutive(_ values: [Int]) -> Bool {
    zip(values, values.dropFirst()).allSatisfy { $1 == $0 + 1 }
}

/// Whether `values` strictly increase.
func isStrictlyIncreasing(_ values: [Int]) -> Bool {
    zip(values, values.dropFirst()).allSatisfy { $1 > $0 }
}

// MARK: - Serialization of heavy and timing-sensitive tests

/// Tests that load both cores (stress, 10,000 subscribers) and tests that check that a call
/// "returns at once" live in sub-suites of this one, so that they never run at the same time.
@Suite("Heavy and timing-sensitive", .serialized)
enum HeavyAndTimingSensitive {}
