// Test helpers for the issue-3 suites (replay, multicast, keepAlive, subjects, shared source,
// seed scenarios). Every name starts with `I3` so it cannot clash with other test files.
//
// Ordering is established with explicit gates (AsyncStream-based signals, or polling with
// `Task.yield()`); timeouts exist only as hang guards (see HangGuards.swift).

import Testing
@testable import AsyncMulticast

// MARK: - A subscriber driven step by step

/// One subscriber (one `SharedIterator`) owned by its own task and driven by commands, so a
/// test can read it one element at a time under a hang guard, leave it, or cancel its task.
///
/// The iterator is created inside the task; ``join(_:sourceLocation:)`` returns once it is.
final class I3Subscriber<Element: Sendable, Failure: Error>: Sendable {
    private enum Command: Sendable {
        case next
        case leave
    }

    private let commands: AsyncStream<Command>.Continuation
    private let results: Signal<Result<Element?, Failure>>
    let task: Task<Void, Never>

    private init(
        make: @escaping @Sendable () -> SharedIterator<Element, Failure>,
        joined: Signal<Void>
    ) {
        let (commandStream, commands) = AsyncStream.makeStream(of: Command.self)
        let results = Signal<Result<Element?, Failure>>()
        self.commands = commands
        self.results = results
        self.task = Task {
            var iterator: SharedIterator<Element, Failure>? = make()
            joined.send(())
            for await command in commandStream {
                switch command {
                case .next:
                    let result: Result<Element?, Failure>
                    do throws(Failure) {
                        result = .success(try await iterator!.next())
                    } catch {
                        result = .failure(error)
                    }
                    results.send(result)
                case .leave:
                    iterator = nil  // releasing the iterator leaves
                    return
                }
            }
            iterator = nil
        }
    }

    /// Creates the subscriber (calls `make` in its task) and waits until it has joined.
    static func join(
        _ make: @escaping @Sendable () -> SharedIterator<Element, Failure>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> I3Subscriber {
        let joined = Signal<Void>()
        let subscriber = I3Subscriber(make: make, joined: joined)
        _ = await joined.next("subscriber joining", sourceLocation: sourceLocation)
        return subscriber
    }

    /// Asks for the next element without waiting for it (see ``response(sourceLocation:)``).
    func request() {
        self.commands.yield(.next)
    }

    /// The result of the oldest unanswered ``request()``; `nil` on a hang.
    func response(sourceLocation: SourceLocation = #_sourceLocation) async -> Result<Element?, Failure>? {
        await self.results.next("subscriber's next()", sourceLocation: sourceLocation)
    }

    /// `next()`, under a hang guard; an error is recorded as an issue and returned as `nil`.
    func next(sourceLocation: SourceLocation = #_sourceLocation) async -> Element? {
        self.request()
        return await self.answer(sourceLocation: sourceLocation)
    }

    /// The answer to an earlier ``request()`` as an element; an error is recorded.
    func answer(sourceLocation: SourceLocation = #_sourceLocation) async -> Element? {
        switch await self.response(sourceLocation: sourceLocation) {
        case .success(let element)?:
            return element
        case .failure(let error)?:
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
            return nil
        case nil:
            return nil
        }
    }

    /// The next `count` elements (fewer if the sequence ends first).
    func take(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> [Element] {
        var elements: [Element] = []
        while elements.count < count, let element = await self.next(sourceLocation: sourceLocation) {
            elements.append(element)
        }
        return elements
    }

    /// Reads until the end: the elements, then the error if the sequence failed.
    func drain(sourceLocation: SourceLocation = #_sourceLocation) async -> (elements: [Element], failure: Failure?) {
        var elements: [Element] = []
        while true {
            self.request()
            switch await self.response(sourceLocation: sourceLocation) {
            case .success(let element?)?:
                elements.append(element)
            case .success(nil)?, nil:
                return (elements, nil)
            case .failure(let error)?:
                return (elements, error)
            }
        }
    }

    /// Releases the iterator (leaves) and waits until the task ended.
    func leave(sourceLocation: SourceLocation = #_sourceLocation) async {
        self.commands.yield(.leave)
        await self.waitForTheEnd("subscriber leaving", sourceLocation: sourceLocation)
    }

    /// Cancels the subscriber's task and waits until it ended.
    func cancel(sourceLocation: SourceLocation = #_sourceLocation) async {
        self.task.cancel()
        await self.waitForTheEnd("cancelled subscriber", sourceLocation: sourceLocation)
    }

    /// Waits until the subscriber's task ended; cancels it if that takes a hang guard's time.
    private func waitForTheEnd(_ what: String, sourceLocation: SourceLocation) async {
        let task = self.task
        if await withTimeoutOrNil(what, sourceLocation: sourceLocation, { await task.value }) == nil {
            task.cancel()
        }
    }
}

// MARK: - Base sequences

/// How an iteration of an ``I3Source`` ended, as reported by its `AsyncStream`'s `onTermination`.
extension I3Subscriber where Element == Int {
    /// For the first subscriber of a sequence over `source`: asks for an element (that demand
    /// starts iteration 0), waits for the start, feeds `values` to it and returns the answer
    /// to the demand.
    func startIteration(
        of source: I3Source, yielding values: Int..., sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Int? {
        self.request()
        await source.control.waitForStart(of: 0, sourceLocation: sourceLocation)
        for value in values { source.control.yield(value) }
        return await self.answer(sourceLocation: sourceLocation)
    }
}

enum I3End: Sendable, Equatable {
    case finished
    case cancelled
}

/// A base sequence the test controls: every `makeAsyncIterator()` opens a new *iteration*
/// (numbered 0, 1, …) backed by its own `AsyncStream`, which the test feeds with
/// ``I3SourceControl/yield(_:)``. Counts iterators and `next()` calls; reports starts and
/// terminations through signals.
struct I3Source: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let control = I3SourceControl()

    func makeAsyncIterator() -> Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        self.control.register(continuation)
        return Iterator(base: stream.makeAsyncIterator(), control: self.control)
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        var base: AsyncStream<Int>.Iterator
        let control: I3SourceControl

        mutating func next() async -> Int? {
            self.control.countNext()
            return await self.base.next()
        }
    }
}

final class I3SourceControl: Sendable {
    private struct State: Sendable {
        var iterations: [AsyncStream<Int>.Continuation] = []
        var nextCalls = 0
        var ends: [Int: I3End] = [:]
    }
    private let state = Lock(State())
    /// Sends the iteration's index when `makeAsyncIterator()` is called.
    let started = Signal<Int>()
    /// Sends the iteration's index and how it ended when its stream terminates.
    let ended = Signal<(iteration: Int, end: I3End)>()

    fileprivate func register(_ continuation: AsyncStream<Int>.Continuation) {
        let index = self.state.withLock { state -> Int in
            state.iterations.append(continuation)
            return state.iterations.count - 1
        }
        let ended = self.ended
        let state = self.state
        continuation.onTermination = { termination in
            let end: I3End
            switch termination {
            case .cancelled: end = .cancelled
            case .finished: end = .finished
            @unknown default: end = .finished
            }
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
    func end(of index: Int) -> I3End? { self.state.withLock { $0.ends[index] } }

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
    func waitForEnd(sourceLocation: SourceLocation = #_sourceLocation) async -> (iteration: Int, end: I3End)? {
        await self.ended.next("end of an iteration", sourceLocation: sourceLocation)
    }
}

/// An endless base: 0, 1, 2, … (yielding now and then), as fast as it is pulled. Ends when
/// its task is cancelled. Counts its iterators.
struct I3Counter: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let iterators = LockedLog<Void>()

    func makeAsyncIterator() -> Iterator {
        self.iterators.append(())
        return Iterator()
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        var value = 0

        mutating func next() async -> Int? {
            if Task.isCancelled { return nil }
            if self.value % 8 == 0 { await Task.yield() }
            defer { self.value += 1 }
            return self.value
        }
    }
}

/// A base whose `next()` ignores cancellation: each pull waits until the test answers it
/// with ``I3StubbornControl/answer(_:)``. Shows whether a restart waits for a cancelled
/// iteration that is slow to notice.
struct I3StubbornSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let control = I3StubbornControl()

    func makeAsyncIterator() -> Iterator {
        self.control.iteratorMade()
        return Iterator(control: self.control)
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        let control: I3StubbornControl

        mutating func next() async -> Int? {
            await self.control.pull()
        }
    }
}

final class I3StubbornControl: Sendable {
    private struct State: Sendable {
        var iterators = 0
        var pending: [CheckedContinuation<Int?, Never>] = []
    }
    private let state = Lock(State())
    /// Sent each time a pull starts waiting.
    let pulled = Signal<Void>()

    fileprivate func iteratorMade() {
        self.state.withLock { $0.iterators += 1 }
    }

    fileprivate func pull() async -> Int? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            self.state.withLock { $0.pending.append(continuation) }
            self.pulled.send(())
        }
    }

    var iteratorCount: Int { self.state.withLock { $0.iterators } }
    var pendingPulls: Int { self.state.withLock { $0.pending.count } }

    /// Answers the oldest waiting pull.
    func answer(_ value: Int?) {
        let continuation = self.state.withLock { state in
            state.pending.isEmpty ? nil : state.pending.removeFirst()
        }
        continuation?.resume(returning: value)
    }
}
