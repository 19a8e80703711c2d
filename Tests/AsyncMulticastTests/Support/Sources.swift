// The upstreams the tests share: synchronous sequences made async, counters, scripted and
// push-fed sources with a typed failure, sources the test feeds or answers by hand, and an
// instrumented wrapper that observes any base. Also how an `AsyncStream` upstream reports
// that it ended.

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

// MARK: - Counting, scripted and push-fed sources

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

// MARK: - Sources the test feeds or answers by hand

/// A base sequence the test controls: every `makeAsyncIterator()` opens a new *iteration*
/// (numbered 0, 1, …) backed by its own `AsyncStream`, which the test feeds with
/// ``FedSource/Control/yield(_:to:)``. Counts iterators and `next()` calls; reports starts and
/// terminations through signals.
struct FedSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let control = Control()

    func makeAsyncIterator() -> Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        self.control.register(continuation)
        return Iterator(base: stream.makeAsyncIterator(), control: self.control)
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        var base: AsyncStream<Int>.Iterator
        let control: Control

        mutating func next() async -> Int? {
            self.control.countNext()
            return await self.base.next()
        }
    }

    /// What the test feeds a `FedSource` with, and what it learns from it.
    final class Control: Sendable {
        private struct State: Sendable {
            var iterations: [AsyncStream<Int>.Continuation] = []
            var nextCalls = 0
            var ends: [Int: StreamEnd] = [:]
        }
        private let state = Lock(State())
        /// Sends the iteration's index when `makeAsyncIterator()` is called.
        let started = Signal<Int>()
        /// Sends the iteration's index and how it ended when its stream terminates.
        let ended = Signal<(iteration: Int, end: StreamEnd)>()

        fileprivate func register(_ continuation: AsyncStream<Int>.Continuation) {
            let index = self.state.withLock { state -> Int in
                state.iterations.append(continuation)
                return state.iterations.count - 1
            }
            let ended = self.ended
            let state = self.state
            continuation.onTermination = { termination in
                let end = StreamEnd(termination)
                state.withLock { $0.ends[index] = end }
                ended.send((index, end))
            }
            self.started.send(index)
        }

        fileprivate func countNext() {
            self.state.withLock { $0.nextCalls += 1 }
        }

        /// Number of `makeAsyncIterator()` calls so far.
        var iteratorCount: Int { self.state.withLock { $0.iterations.count } }
        /// Number of `next()` calls on all iterators so far.
        var nextCalls: Int { self.state.withLock { $0.nextCalls } }
        /// How iteration `index` ended, if it did.
        func end(of index: Int) -> StreamEnd? { self.state.withLock { $0.ends[index] } }

        /// Feeds `values` to the latest iteration (or to `iteration`).
        func yield(_ values: Int..., to iteration: Int? = nil) {
            let continuation = self.state.withLock { state in
                state.iterations[iteration ?? state.iterations.count - 1]
            }
            for value in values { continuation.yield(value) }
        }

        /// Finishes the latest iteration (or `iteration`).
        func finish(_ iteration: Int? = nil) {
            let continuation = self.state.withLock { state in
                state.iterations[iteration ?? state.iterations.count - 1]
            }
            continuation.finish()
        }

        /// Waits until iteration `index` has been started.
        @discardableResult
        func waitForStart(of index: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
            let started = await self.started.next("start of iteration \(index)", sourceLocation: sourceLocation)
            #expect(started == index, "iteration \(index) should start next", sourceLocation: sourceLocation)
            return started == index
        }

        /// Waits until some iteration ends and returns which and how.
        func waitForEnd(sourceLocation: SourceLocation = #_sourceLocation) async -> (iteration: Int, end: StreamEnd)? {
            await self.ended.next("end of an iteration", sourceLocation: sourceLocation)
        }
    }
}

/// A base whose `next()` ignores cancellation (the patient upstream): each pull waits until the
/// test answers it with ``StubbornSource/Control/answer(_:)``. Shows whether a restart waits for
/// a cancelled iteration that is slow to notice, and what a `send(contentsOf:)` asks of a
/// sequence that ignores cancellation: records, per pull, whether its task was cancelled when
/// it began or while it waited, and which actor it ran on.
struct StubbornSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let control = Control()

    func makeAsyncIterator() -> Iterator {
        self.control.iteratorMade()
        return Iterator(control: self.control)
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        let control: Control

        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            var id: ObjectIdentifier?
            if let actor { id = ObjectIdentifier(actor) }
            return await self.control.pull(on: id)
        }

        mutating func next() async -> Int? { await self.next(isolation: nil) }
    }

    /// What the test answers a `StubbornSource`'s pulls with, and what it saw of them.
    final class Control: Sendable {
        struct Pull: Sendable {
            var cancelledAtEntry: Bool
            var cancelledWhileWaiting = false
            var actor: ObjectIdentifier?
            var sawCancellation: Bool { self.cancelledAtEntry || self.cancelledWhileWaiting }
        }
        private struct State: Sendable {
            var iterators = 0
            var pulls: [Pull] = []
            var pending: [CheckedContinuation<Int?, Never>] = []
        }
        private let state = Lock(State())
        /// Sends each pull's index (0, 1, …) when it starts waiting.
        let pulled = Signal<Int>()

        fileprivate func iteratorMade() {
            self.state.withLock { $0.iterators += 1 }
        }

        fileprivate func pull(on actor: ObjectIdentifier?) async -> Int? {
            let cancelled = Task.isCancelled
            let index = self.state.withLock { state in
                state.pulls.append(Pull(cancelledAtEntry: cancelled, actor: actor))
                return state.pulls.count - 1
            }
            return await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
                    self.state.withLock { $0.pending.append(continuation) }
                    self.pulled.send(index)
                }
            } onCancel: {
                self.state.withLock { $0.pulls[index].cancelledWhileWaiting = true }
            }
        }

        var iteratorCount: Int { self.state.withLock { $0.iterators } }
        /// Every pull so far, in order.
        var pulls: [Pull] { self.state.withLock { $0.pulls } }
        /// Pulls waiting for an answer.
        var waiting: Int { self.state.withLock { $0.pending.count } }

        /// Answers the oldest waiting pull.
        func answer(_ value: Int?) {
            let continuation = self.state.withLock { state in
                state.pending.isEmpty ? nil : state.pending.removeFirst()
            }
            continuation?.resume(returning: value)
        }

        /// Waits for pull `index` to start waiting.
        func waitForPull(_ index: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
            let started = await self.pulled.next("pull \(index)", sourceLocation: sourceLocation)
            #expect(started == index, sourceLocation: sourceLocation)
        }
    }
}

/// A restartable push source: every `makeAsyncIterator()` opens a channel of its own
/// (iteration 0, 1, 2, …) that the test feeds with `yield(_:to:)` and ends with `finish(_:)`.
/// An iteration waits for its channel, so an idle upstream costs nothing.
final class Relay: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    private let channels = Lock<[AsyncStream<Int>.Continuation]>([])

    /// How many iterations were started.
    var iterations: Int { self.channels.withLock { $0.count } }

    func makeAsyncIterator() -> AsyncStream<Int>.Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        self.channels.withLock { $0.append(continuation) }
        return stream.makeAsyncIterator()
    }

    func yield(_ element: Int, to iteration: Int) {
        _ = self.channels.withLock { $0[iteration] }.yield(element)
    }

    func finish(_ iteration: Int) {
        self.channels.withLock { $0[iteration] }.finish()
    }
}

// MARK: - Observing a base

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

// MARK: - How an AsyncStream upstream ended

/// How an `AsyncStream` ended, as its `onTermination` reports it.
enum StreamEnd: Sendable, Equatable {
    case finished
    case cancelled

    init(_ termination: AsyncStream<Int>.Continuation.Termination) {
        switch termination {
        case .cancelled: self = .cancelled
        case .finished: self = .finished
        @unknown default: self = .finished
        }
    }
}

/// Records how an `AsyncStream` upstream ended (its `onTermination` reports) and lets a test
/// wait for the first report.
final class TerminationRecorder: Sendable {
    private let ends = Lock<[StreamEnd]>([])

    var all: [StreamEnd] { self.ends.withLock { $0 } }

    /// A new stream, its continuation, and a recorder attached to it.
    static func recordedStream() -> (AsyncStream<Int>, AsyncStream<Int>.Continuation, TerminationRecorder) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let recorder = TerminationRecorder()
        recorder.attach(to: continuation)
        return (stream, continuation, recorder)
    }

    func attach(to continuation: AsyncStream<Int>.Continuation) {
        continuation.onTermination = { termination in
            self.ends.withLock { $0.append(StreamEnd(termination)) }
        }
    }

    func waitForTermination(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [StreamEnd] {
        try await waitUntil("onTermination", sourceLocation: sourceLocation) { !self.all.isEmpty }
        return self.all
    }
}
