// Helpers shared by the test files: hang guards, polling waits, instrumented sources and a
// seeded random generator. Nothing here sleeps to establish an order: every wait is for a
// condition, and the deadlines are only there so that a bug fails a test instead of hanging it.

import Testing
@testable import AsyncMulticast

// MARK: - Synchronous sequences as async ones

/// A synchronous sequence exposed as a (never suspending) `AsyncSequence`.
struct AsyncSeqOf<S: Sequence & Sendable>: AsyncSequence, Sendable where S.Element: Sendable {
    typealias Element = S.Element
    typealias Failure = Never
    let base: S

    struct AsyncIterator: AsyncIteratorProtocol {
        var it: S.Iterator
        mutating func next() async -> S.Element? { self.it.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(it: self.base.makeIterator()) }
}

extension Sequence where Self: Sendable, Element: Sendable {
    var async: AsyncSeqOf<Self> { AsyncSeqOf(base: self) }
}

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

// MARK: - Instrumented sources

/// What an instrumented source observed: iterations started and ended, `next()` calls,
/// overlapping `next()` calls, and how each iteration ended.
final class Probe: Sendable {
    struct Stats: Sendable {
        var iterators = 0
        var liveIterators = 0
        var maxLiveIterators = 0
        var pulls = 0
        var activePulls = 0
        var maxActivePulls = 0
        /// `makeAsyncIterator()` was called while an earlier iteration was still inside `next()`.
        var iteratorMadeDuringPull = false
        var cancelledPulls = 0
    }

    let stats = Lock(Stats())

    var iterators: Int { self.stats.withLock { $0.iterators } }
    var liveIterators: Int { self.stats.withLock { $0.liveIterators } }
    var pulls: Int { self.stats.withLock { $0.pulls } }
    var maxActivePulls: Int { self.stats.withLock { $0.maxActivePulls } }
    var snapshot: Stats { self.stats.withLock { $0 } }

    fileprivate func iteratorMade() {
        self.stats.withLock {
            if $0.activePulls > 0 { $0.iteratorMadeDuringPull = true }
            $0.iterators += 1
            $0.liveIterators += 1
            $0.maxLiveIterators = max($0.maxLiveIterators, $0.liveIterators)
        }
    }

    fileprivate func iteratorReleased() { self.stats.withLock { $0.liveIterators -= 1 } }

    fileprivate func pullStarted() {
        self.stats.withLock {
            $0.pulls += 1
            $0.activePulls += 1
            $0.maxActivePulls = max($0.maxActivePulls, $0.activePulls)
        }
    }

    fileprivate func pullEnded(cancelled: Bool) {
        self.stats.withLock {
            $0.activePulls -= 1
            if cancelled { $0.cancelledPulls += 1 }
        }
    }
}

/// Counts the base's iterators and `next()` calls (including overlapping ones) in a `Probe`.
/// Keeps the base's typed `Failure`.
struct Instrumented<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element: Sendable {
    typealias Element = Base.Element
    typealias Failure = Base.Failure

    let base: Base
    let probe: Probe

    init(_ base: Base, probe: Probe) {
        self.base = base
        self.probe = probe
    }

    /// Tells the probe when the iterator (the last copy of it) is released.
    final class Token: Sendable {
        let probe: Probe
        init(_ probe: Probe) { self.probe = probe }
        deinit { self.probe.iteratorReleased() }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Base.Element
        typealias Failure = Base.Failure
        var base: Base.AsyncIterator
        let token: Token

        mutating func next(isolation actor: isolated (any Actor)?) async throws(Base.Failure) -> Base.Element? {
            self.token.probe.pullStarted()
            do {
                let element = try await self.base.next(isolation: actor)
                self.token.probe.pullEnded(cancelled: element == nil && Task.isCancelled)
                return element
            } catch {
                self.token.probe.pullEnded(cancelled: false)
                throw error
            }
        }

        mutating func next() async throws(Base.Failure) -> Base.Element? {
            try await self.next(isolation: nil)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        self.probe.iteratorMade()
        return AsyncIterator(base: self.base.makeAsyncIterator(), token: Token(self.probe))
    }
}

/// Every iteration counts 0, 1, 2, … (up to `limit`, if any). Each `next()` first yields to
/// other tasks (so overlapping pulls would be visible) and returns `nil` once cancelled.
struct Counter: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    var limit: Int? = nil

    struct AsyncIterator: AsyncIteratorProtocol {
        var value = 0
        let limit: Int?

        mutating func next() async -> Int? {
            await Task.yield()
            if Task.isCancelled { return nil }
            if let limit = self.limit, self.value >= limit { return nil }
            defer { self.value += 1 }
            return self.value
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(limit: self.limit) }
}

/// The typed error of the test sources and subjects: `.boom`, or `.other(n)` where a test
/// needs several distinct errors.
enum TestError: Error, Equatable {
    case boom
    case other(Int)
}

/// Yields `elements`, then throws `failure` (typed: `Failure == TestError`) or finishes.
struct Scripted: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = TestError
    let elements: [Int]
    let failure: TestError?

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Failure = TestError
        var index = 0
        let elements: [Int]
        let failure: TestError?

        mutating func next(isolation actor: isolated (any Actor)?) async throws(TestError) -> Int? {
            if self.index < self.elements.count {
                defer { self.index += 1 }
                return self.elements[self.index]
            }
            if let failure = self.failure { throw failure }
            return nil
        }

        mutating func next() async throws(TestError) -> Int? {
            try await self.next(isolation: nil)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(elements: self.elements, failure: self.failure)
    }
}

/// A push-driven typed-throwing source: an `AsyncThrowingStream`-like channel whose
/// `Failure` is `TestError`, fed with `yield`, `finish` and `fail` by the test.
struct PushSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = TestError
    private let stream: AsyncStream<Result<Int, TestError>>
    private let continuation: AsyncStream<Result<Int, TestError>>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: Result<Int, TestError>.self)
    }

    func yield(_ value: Int) { self.continuation.yield(.success(value)) }
    func fail(_ error: TestError) {
        self.continuation.yield(.failure(error))
        self.continuation.finish()
    }
    func finish() { self.continuation.finish() }

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Failure = TestError
        var base: AsyncStream<Result<Int, TestError>>.Iterator

        mutating func next(isolation actor: isolated (any Actor)?) async throws(TestError) -> Int? {
            guard let result = await self.base.next(isolation: actor) else { return nil }
            return try result.get()
        }

        mutating func next() async throws(TestError) -> Int? {
            try await self.next(isolation: nil)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: self.stream.makeAsyncIterator()) }
}

/// A class-typed element, to watch with weak references.
final class Payload: Sendable {
    let value: Int
    init(_ value: Int) { self.value = value }
}

// MARK: - Termination reports of an AsyncStream upstream

/// Records an `AsyncStream`'s `onTermination` reasons and lets a test wait for one.
final class TerminationRecorder: Sendable {
    private let reasons = Lock<[String]>([])

    var all: [String] { self.reasons.withLock { $0 } }

    func attach(to continuation: AsyncStream<Int>.Continuation) {
        continuation.onTermination = { reason in
            let text: String
            switch reason {
            case .finished: text = "finished"
            case .cancelled: text = "cancelled"
            @unknown default: text = "unknown"
            }
            self.reasons.withLock { $0.append(text) }
        }
    }

    func waitForTermination(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
        try await waitUntil("onTermination", sourceLocation: sourceLocation) { !self.all.isEmpty }
        return self.all
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

/// The first iteration yields 0 and then blocks in `next()` until `latch` is released, even if
/// cancelled, and then yields 1; later iterations yield 100, 101, …
struct SlowToCancel: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let latch: Latch
    let iterations = Lock(0)

    struct AsyncIterator: AsyncIteratorProtocol {
        let latch: Latch
        let first: Bool
        var value: Int

        mutating func next() async -> Int? {
            if self.first && self.value == 1 { await self.latch.wait() }
            defer { self.value += 1 }
            return self.value
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        let first = self.iterations.withLock { count -> Bool in
            defer { count += 1 }
            return count == 0
        }
        return AsyncIterator(latch: self.latch, first: first, value: first ? 0 : 100)
    }
}
