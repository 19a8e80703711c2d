// The subscriber drivers, and what the tests read from a sequence's storage.
//
// - `SubscriberBox` holds an iterator; each `next()` runs in the task that calls it, so a test
//   can cancel one read (`startNext()` then `cancel()`) or read from an already-cancelled task.
// - `HeldSubscription` holds a subscription until a test or another task releases it.
// - `SubscriberTask` is a subscriber living in a task of its own, driven by commands under a
//   hang guard: `next()`, `take(_:)`, `drain()`, `leave()`, or `cancel()` for its whole task.

import Testing

@testable import AsyncMulticast

// MARK: - HeldSubscription: a subscription released when the test says so

/// A subscription that a test (or another task) releases when it says so: the last copy
/// going is a leave.
final class HeldSubscription<Element: Sendable, Failure: Error>: Sendable {
    let subscription: Lock<SharedSubscription<Element, Failure>?>
    init(_ subscription: SharedSubscription<Element, Failure>) { self.subscription = Lock(subscription) }
    func release() {
        let released = self.subscription.withLock { held in
            defer { held = nil }
            return held
        }
        _ = released  // dropped here, outside the lock
    }
}

// MARK: - SubscriberBox: reads in the caller's task

/// Holds an iterator so that its `next()` calls run in whichever task calls them: the test's
/// own, one the test cancels, or one started per call (`startNext()`), while the test does
/// something else meanwhile.
///
/// Calls never overlap: each task is awaited before the next one starts, which also orders
/// the accesses for ThreadSanitizer.
final class SubscriberBox<Element: Sendable, Failure: Error>: @unchecked Sendable {
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

extension SubscriberBox where Failure == Never {
    /// Reads until the end: every element left.
    func readAll() async -> [Element] {
        var elements: [Element] = []
        while let element = await self.next() { elements.append(element) }
        return elements
    }

    /// Starts one `next()` in a new task.
    func startNext() -> Task<Element?, Never> {
        Task { await self.next() }
    }

    /// Reads until the end in a task of its own (`reading`), and runs `action` in another
    /// (`acting`) once `count` elements were read, or once the reader ended if it ends
    /// first: the action (a finish, a cancel) falls after exactly that much progress.
    func readAll(
        runningAfter count: Int, _ action: @escaping @Sendable () -> Void
    ) -> (reading: Task<[Element], Never>, acting: Task<Void, Never>) {
        let (progress, reported) = AsyncStream.makeStream(of: Int.self)
        let reading = Task { () -> [Element] in
            var received: [Element] = []
            while let element = await self.next() {
                received.append(element)
                reported.yield(received.count)
            }
            reported.finish()
            return received
        }
        let acting = Task {
            var counts = progress.makeAsyncIterator()
            var read = 0
            while read < count, let next = await counts.next() { read = next }
            action()
        }
        return (reading, acting)
    }
}

extension AsyncIteratorProtocol where Failure == Never {
    /// Reads until the end: every element left.
    mutating func readAll(isolation actor: isolated (any Actor)? = #isolation) async -> [Element] {
        var elements: [Element] = []
        while let element = await self.next(isolation: actor) { elements.append(element) }
        return elements
    }

    /// Reads until the end (or until its task is cancelled), and sends to `signal` once it
    /// read `marker`: every element read.
    mutating func readAll(
        announcing marker: Element, to signal: Signal<Void>, isolation actor: isolated (any Actor)? = #isolation
    ) async -> [Element] where Element: Equatable {
        var elements: [Element] = []
        while let element = await self.next(isolation: actor) {
            elements.append(element)
            if element == marker { signal.send(()) }
        }
        return elements
    }
}

/// Reads until the end or the failure: every element left, and the error if it failed. The
/// `do throws(TestError)` proves statically that `next()` throws `TestError` (the base's
/// `Failure`), not `any Error`.
func collect(_ iterator: inout SharedIterator<Int, TestError>) async -> (elements: [Int], error: TestError?) {
    var elements: [Int] = []
    do throws(TestError) {
        while let element = try await iterator.next() { elements.append(element) }
        return (elements, nil)
    } catch {
        let typed: TestError = error
        return (elements, typed)
    }
}

extension SharedIterator where Failure == Never {
    /// The next `count` elements (fewer if the sequence ends first).
    mutating func take(_ count: Int) async -> [Element] {
        var elements: [Element] = []
        while elements.count < count, let element = await self.next() { elements.append(element) }
        return elements
    }
}

// MARK: - SubscriberTask: reads in a task of its own

/// One subscriber (one `SharedIterator`) owned by a task of its own and driven by commands, so
/// a test can read it one element at a time under a hang guard, leave it, or cancel its task.
/// Unlike `SubscriberBox`, every read runs in that one task.
///
/// The iterator is created inside the task; ``join(_:sourceLocation:)`` returns once it is.
final class SubscriberTask<Element: Sendable, Failure: Error>: Sendable {
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
    ) async -> SubscriberTask {
        let joined = Signal<Void>()
        let subscriber = SubscriberTask(make: make, joined: joined)
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

extension SubscriberTask where Element == Int {
    /// For the first subscriber of a sequence over `source`: asks for an element (that demand
    /// starts iteration 0), waits for the start, feeds `values` to it and returns the answer
    /// to the demand.
    func startIteration(
        of source: FedSource, yielding values: Int..., sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Int? {
        await self.startIteration(of: source, yielding: values, sourceLocation: sourceLocation)
    }

    func startIteration(
        of source: FedSource, yielding values: [Int], sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Int? {
        self.request()
        await source.control.waitForStart(of: 0, sourceLocation: sourceLocation)
        for value in values { source.control.yield(value) }
        return await self.answer(sourceLocation: sourceLocation)
    }
}

// MARK: - Peeking into the storage, and many subscribers at once

extension MulticastStorage {
    /// Subscribers currently suspended in `next()`.
    var waitingCount: Int { self.state.withLock { $0.machine.waiters.count } }

    var bufferedCount: Int { self.state.withLock { $0.machine.bufferedCount } }
    var upstreamState: Machine.Upstream { self.state.withLock { $0.machine.upstream } }

    /// What subscriber `id` may still receive from the shared buffer or its private queue
    /// (not what its iterator already took); empty once it was evicted.
    func undelivered(_ id: SubscriberID) -> [Element] { self.state.withLock { $0.machine.undelivered(id) } }
    /// The first broken engine invariant, or `nil`.
    var invariantViolation: String? { self.state.withLock { $0.machine.invariantViolation() } }
    /// Subscribers of `policy`'s lane evicted and not yet told (0 without such a lane).
    func evictedCount(_ policy: SharedBufferingPolicy) -> Int {
        self.state.withLock { $0.machine.lanes.first { $0.policy == policy }?.evicted ?? 0 }
    }
    /// Producers (an upstream task, or subject senders) parked until a bounded subscriber makes room.
    var producersWaitingForRoom: Int { self.state.withLock { $0.machine.parkedProducers.count } }
    /// Observers registered by `subscriberCounts` iterators and `waitForSubscribers(atLeast:)`.
    var countObserverCount: Int { self.state.withLock { $0.machine.countObservers.cells.count } }

    /// `offer` as a producer preempted between releasing the lock and counting its offer:
    /// the element is produced (and the waiting subscribers are resumed with it), but the
    /// offer count has not moved, so a subscriber that caught up skips its read. Returns
    /// how many waiting subscribers were resumed.
    @discardableResult
    func offerUncounted(_ element: Element) -> Int {
        var resuming: [Machine.SubscriberContinuation] = []
        _ = self.state.withLock {
            $0.machine.elementProduced(element, epoch: Self.pushEpoch, respectingBounds: false, resuming: &resuming)
        }
        for continuation in resuming { continuation.resume(returning: .success(element)) }
        return resuming.count
    }
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

    /// Starts one `next()` of `box` in a task of its own, and waits until `count` subscribers
    /// are suspended in `next()`, that one among them: the read, pending.
    func startWaitingRead(
        of box: SubscriberBox<Element, Failure>, waiting count: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Task<Element?, Never> where Failure == Never {
        let read = box.startNext()
        try await self.waitForWaiting(count, sourceLocation: sourceLocation)
        return read
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
}

extension MulticastStorage {
    /// Evicted subscribers that left, remembered for a late `waitForEviction()`.
    var departedEvictionCount: Int {
        self.state.withLock { $0.machine.departedEvictions.count }
    }

    /// Tasks waiting in `SharedSubscription.waitForEviction()`.
    var evictionWatcherCount: Int {
        self.state.withLock { $0.machine.evictionWatchers.values.reduce(0) { $0 + $1.count } }
    }
}

/// Each of `subscribers` leaves, in order.
func leaveAll<Element: Sendable, Failure: Error>(
    _ subscribers: SubscriberTask<Element, Failure>..., sourceLocation: SourceLocation = #_sourceLocation
) async {
    for subscriber in subscribers { await subscriber.leave(sourceLocation: sourceLocation) }
}
