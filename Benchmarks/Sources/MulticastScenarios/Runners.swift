// Generic scenario runners. Each implementation file (Ours.swift, SAA.swift,
// HandRolled.swift via Scenarios.swift) only builds its shared sequence and
// hands it to one of these, so every implementation runs the same code.

// MARK: - Results

/// Join/leave churn: joins/s while one long-lived subscriber must lose nothing.
public struct ChurnResult: Sendable {
    public var joins = 0
    public var seconds = 0.0
    /// Elements the short subscribers received in total.
    public var shortDeliveries = 0
    /// Elements the upstream produced / the long-lived subscriber received.
    public var produced = 0
    public var longLived = SubscriberTally()
    /// Subscribers still registered after the churn (nil where not observable).
    public var leftoverSubscribers: Int?
    public var failures: [String] = []

    public init() {}

    public var joinsPerSecond: Double { seconds > 0 ? Double(joins) / seconds : 0 }
    public var ok: Bool { failures.isEmpty }
}

/// Idle subscribers: heap growth per subscriber whose iterator exists but is never iterated.
public struct IdleMemoryResult: Sendable {
    public var subscribers = 0
    /// Heap growth (glibc `mallinfo2()`: `uordblks + hblkhd`) divided by the subscriber count; nil off glibc.
    public var heapBytesPerSubscriber: Double?
    /// Inline size of one iterator (held in a pre-reserved array, so not part of the heap growth).
    public var iteratorStride = 0

    public init() {}
}

/// Cancellation latency samples, in nanoseconds.
public struct CancellationResult: Sendable {
    /// `task.cancel()` of a subscriber waiting in `next()` → that `next()` returning.
    public var cancelToReturn: [Double] = []
    /// `task.cancel()` of the last (only) subscriber, i.e. it leaving → the upstream
    /// AsyncStream's `onTermination`.
    public var cancelToUpstreamTermination: [Double] = []
    /// Samples where the upstream did not terminate within the timeout.
    public var upstreamNotTerminated = 0
    /// Samples whose upstream was not waited for (after repeated timeouts).
    public var upstreamNotChecked = 0
    public var samples = 0
    public var failures: [String] = []

    public init() {}
}

// MARK: - Fan-out

/// N subscribers, each in its own task, all registered (iterator created)
/// before anyone calls `next()`; the first `next()` starts the upstream.
public func fanOutShared<Shared: AsyncSequence & Sendable>(
    _ shared: Shared,
    subscribers: Int,
    elements: Int,
    lossless: Bool
) async -> FanOutTally where Shared.Element == Int, Shared.Failure == Never {
    let barrier = StartBarrier(parties: subscribers)
    return await withTaskGroup(of: SubscriberTally.self, returning: FanOutTally.self) { group in
        for _ in 0..<subscribers {
            group.addTask {
                var iterator = shared.makeAsyncIterator()
                await barrier.arriveAndWait()
                return await consume(&iterator, expected: elements, lossless: lossless)
            }
        }
        var total = FanOutTally()
        for await tally in group { total.add(tally) }
        return total
    }
}

/// The hand-rolled version: N streams subscribed up front, a producer task
/// forwards the upstream into all of them.
public func fanOutHandRolled(
    policy: BenchPolicy,
    subscribers: Int,
    elements: Int
) async -> FanOutTally {
    let broadcaster = HandRolledBroadcaster<Int>(bufferingPolicy: policy.handRolled)
    let streams = (0..<subscribers).map { _ in broadcaster.subscribe() }
    return await withTaskGroup(of: SubscriberTally.self, returning: FanOutTally.self) { group in
        for stream in streams {
            group.addTask {
                var iterator = stream.makeAsyncIterator()
                return await consume(&iterator, expected: elements, lossless: policy.isLossless)
            }
        }
        broadcaster.forward(CountingSequence(elements))
        var total = FanOutTally()
        for await tally in group { total.add(tally) }
        return total
    }
}

/// The floor: one consumer iterating the upstream directly, in its own task.
public func fanOutBase(elements: Int, opaque: Bool = false) async -> FanOutTally {
    let task = Task {
        if opaque {
            var iterator = OpaqueCountingSequence(elements).makeAsyncIterator()
            return await consume(&iterator, expected: elements, lossless: true)
        }
        var iterator = CountingSequence(elements).makeAsyncIterator()
        return await consume(&iterator, expected: elements, lossless: true)
    }
    var total = FanOutTally()
    total.add(await task.value)
    return total
}

// MARK: - Subject fan-out

/// One task sends `0..<elements` into `send`, then `finish`; N subscribers
/// (registered before the first send) each check they saw everything in order.
public func subjectFanOut<Shared: AsyncSequence & Sendable>(
    _ shared: Shared,
    subscribers: Int,
    elements: Int,
    send: @escaping @Sendable (Int) -> Void,
    finish: @escaping @Sendable () -> Void
) async -> FanOutTally where Shared.Element == Int, Shared.Failure == Never {
    let barrier = StartBarrier(parties: subscribers)
    return await withTaskGroup(of: SubscriberTally?.self, returning: FanOutTally.self) { group in
        for _ in 0..<subscribers {
            group.addTask {
                var iterator = shared.makeAsyncIterator()
                await barrier.arriveAndWait()
                return await consume(&iterator, expected: elements, lossless: true)
            }
        }
        group.addTask {
            await barrier.waitForAll()
            for element in 0..<elements { send(element) }
            finish()
            return nil
        }
        var total = FanOutTally()
        for await tally in group {
            if let tally { total.add(tally) }
        }
        return total
    }
}

/// Subject fan-out with the hand-rolled broadcaster (which *is* a passthrough subject).
public func subjectFanOutHandRolled(subscribers: Int, elements: Int) async -> FanOutTally {
    let broadcaster = HandRolledBroadcaster<Int>(bufferingPolicy: .unbounded)
    let streams = (0..<subscribers).map { _ in broadcaster.subscribe() }
    return await withTaskGroup(of: SubscriberTally?.self, returning: FanOutTally.self) { group in
        for stream in streams {
            group.addTask {
                var iterator = stream.makeAsyncIterator()
                return await consume(&iterator, expected: elements, lossless: true)
            }
        }
        group.addTask {
            for element in 0..<elements { broadcaster.send(element) }
            broadcaster.finish()
            return nil
        }
        var total = FanOutTally()
        for await tally in group {
            if let tally { total.add(tally) }
        }
        return total
    }
}

// MARK: - Join/leave churn

/// One long-lived subscriber reads the shared `StoppableCounter` from the
/// start; `concurrency` tasks then run `joins` short subscribers in total, each
/// taking `take` elements and leaving (dropping its iterator). Then the
/// upstream is stopped and the long-lived subscriber must have seen every
/// element the upstream produced, in order.
public func churnShared<Shared: AsyncSequence & Sendable>(
    _ shared: Shared,
    flag: StopFlag,
    joins: Int,
    take: Int,
    concurrency: Int,
    subscriberCount: (@Sendable () -> Int)? = nil
) async -> ChurnResult where Shared.Element == Int, Shared.Failure == Never {
    let registered = OneShot()
    let longLived = Task {
        var iterator = shared.makeAsyncIterator()
        registered.fire()
        return await consume(&iterator, expected: nil, lossless: true)
    }
    await registered.wait()
    var result = ChurnResult()
    let (shortDeliveries, seconds) = await measureSeconds {
        await runChurners(joins: joins, concurrency: concurrency) {
            var iterator = shared.makeAsyncIterator()
            var received = 0
            for _ in 0..<take {
                guard await iterator.next(isolation: nil) != nil else { break }
                received += 1
            }
            return received  // the iterator is dropped here: the subscriber leaves
        }
    }
    result.leftoverSubscribers = subscriberCount?()
    flag.stop()
    result.longLived = await longLived.value
    result.joins = joins
    result.seconds = seconds
    result.shortDeliveries = shortDeliveries
    result.produced = flag.producedCount
    result.check()
    return result
}

/// The hand-rolled churn: subscribe, take a few, drop the stream and iterator.
public func churnHandRolled(
    flag: StopFlag,
    joins: Int,
    take: Int,
    concurrency: Int,
    upstreamLimit: Int
) async -> ChurnResult {
    let broadcaster = HandRolledBroadcaster<Int>(bufferingPolicy: .unbounded)
    let stream = broadcaster.subscribe()
    let longLived = Task {
        var iterator = stream.makeAsyncIterator()
        return await consume(&iterator, expected: nil, lossless: true)
    }
    broadcaster.forward(StoppableCounter(flag: flag, limit: upstreamLimit))
    var result = ChurnResult()
    let (shortDeliveries, seconds) = await measureSeconds {
        await runChurners(joins: joins, concurrency: concurrency) {
            var iterator = broadcaster.subscribe().makeAsyncIterator()
            var received = 0
            for _ in 0..<take {
                guard await iterator.next(isolation: nil) != nil else { break }
                received += 1
            }
            return received
        }
    }
    result.leftoverSubscribers = broadcaster.subscriberCount
    flag.stop()
    result.longLived = await longLived.value
    result.joins = joins
    result.seconds = seconds
    result.shortDeliveries = shortDeliveries
    result.produced = flag.producedCount
    if result.produced >= upstreamLimit {
        result.failures.append("upstream hit its limit of \(upstreamLimit) before the churn ended")
    }
    result.check()
    return result
}

func runChurners(
    joins: Int,
    concurrency: Int,
    oneJoin: @escaping @Sendable () async -> Int
) async -> Int {
    await withTaskGroup(of: Int.self, returning: Int.self) { group in
        let workers = max(1, min(concurrency, joins))
        for worker in 0..<workers {
            let share = joins / workers + (worker < joins % workers ? 1 : 0)
            group.addTask {
                var received = 0
                for _ in 0..<share { received += await oneJoin() }
                return received
            }
        }
        var total = 0
        for await received in group { total += received }
        return total
    }
}

extension ChurnResult {
    mutating func check() {
        if let failure = longLived.failure { failures.append("long-lived: \(failure)") }
        if longLived.received != produced {
            failures.append("long-lived received \(longLived.received) of \(produced) produced")
        }
    }
}

// MARK: - Idle subscribers

/// Creates `count` iterators (each registers a subscriber), keeps them alive
/// in a pre-reserved array without iterating, and measures the heap growth.
/// `registered` (if given) is read and `whileAlive` is called while the iterators are alive.
public func idleSubscribers<Shared: AsyncSequence>(
    _ shared: Shared,
    count: Int,
    registered: (() -> Int)? = nil,
    whileAlive: () -> Void = {}
) -> IdleMemoryResult {
    var iterators: [Shared.AsyncIterator] = []
    iterators.reserveCapacity(count)
    let before = heapBytesInUse()
    for _ in 0..<count {
        iterators.append(shared.makeAsyncIterator())
    }
    let after = heapBytesInUse()
    var result = IdleMemoryResult()
    result.subscribers = registered?() ?? iterators.count
    result.iteratorStride = MemoryLayout<Shared.AsyncIterator>.stride
    if let before, let after {
        result.heapBytesPerSubscriber = Double(after - before) / Double(count)
    }
    whileAlive()
    withExtendedLifetime(iterators) {}
    return result
}

/// The hand-rolled version: `subscribe()` registers; the stream's iterator is kept.
public func idleSubscribersHandRolled(count: Int, whileAlive: () -> Void = {}) -> IdleMemoryResult {
    let broadcaster = HandRolledBroadcaster<Int>(bufferingPolicy: .unbounded)
    var iterators: [AsyncStream<Int>.Iterator] = []
    iterators.reserveCapacity(count)
    let before = heapBytesInUse()
    for _ in 0..<count {
        iterators.append(broadcaster.subscribe().makeAsyncIterator())
    }
    let after = heapBytesInUse()
    var result = IdleMemoryResult()
    result.subscribers = broadcaster.subscriberCount
    result.iteratorStride = MemoryLayout<AsyncStream<Int>.Iterator>.stride
    if let before, let after {
        result.heapBytesPerSubscriber = Double(after - before) / Double(count)
    }
    whileAlive()
    withExtendedLifetime(iterators) {}
    return result
}

// MARK: - Cancellation latency

/// What one cancellation sample needs from an implementation: given the
/// upstream, start a single subscriber task that creates its iterator, awaits
/// one `next()` and records `returned`; keep any shared state alive until
/// `release` is called.
public struct CancellationSubject: Sendable {
    public let subscriber: Task<Void, Never>
    public let release: @Sendable () -> Void

    public init(subscriber: Task<Void, Never>, release: @escaping @Sendable () -> Void = {}) {
        self.subscriber = subscriber
        self.release = release
    }
}

public typealias UpstreamStream = SignalOnPull<AsyncStream<Int>>

/// Runs `samples` cancellation samples. Per sample: a fresh never-yielding
/// AsyncStream upstream (its `onTermination` timestamped), one subscriber that
/// waits in `next()`; once the upstream has been pulled (and 1 ms later), the
/// subscriber's task is cancelled.
public func cancellationLatency(
    samples: Int,
    terminationTimeout: Duration = .milliseconds(20),
    start: (_ upstream: UpstreamStream, _ returned: TimestampSlot) -> CancellationSubject
) async -> CancellationResult {
    var result = CancellationResult()
    var consecutiveTimeouts = 0
    for _ in 0..<samples {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let terminated = TimestampSlot()
        continuation.onTermination = { _ in terminated.record() }
        let pulled = OneShot()
        let returned = TimestampSlot()
        let subject = start(SignalOnPull(stream, pulled: pulled), returned)

        await pulled.wait()
        try? await Task.sleep(for: .milliseconds(1))  // let the subscriber settle into its wait
        let cancelledAt = monotonicNanos()
        subject.subscriber.cancel()
        await subject.subscriber.value
        result.samples += 1

        if let returnedAt = returned.nanos {
            result.cancelToReturn.append(Double(returnedAt) - Double(cancelledAt))
        } else {
            result.failures.append("next() did not return after cancel")
        }

        // Upstream termination after the last (only) subscriber left (was cancelled).
        if consecutiveTimeouts >= 3 {
            result.upstreamNotChecked += 1
        } else {
            let deadline =
                monotonicNanos() + UInt64(terminationTimeout.components.seconds) * 1_000_000_000
                + UInt64(terminationTimeout.components.attoseconds / 1_000_000_000)
            while terminated.nanos == nil, monotonicNanos() < deadline {
                try? await Task.sleep(for: .microseconds(50))
            }
            if let terminatedAt = terminated.nanos {
                consecutiveTimeouts = 0
                result.cancelToUpstreamTermination.append(Double(terminatedAt) - Double(cancelledAt))
            } else {
                consecutiveTimeouts += 1
                result.upstreamNotTerminated += 1
            }
        }
        subject.release()
        continuation.finish()
    }
    return result
}

/// The hand-rolled broadcaster with `cancelUpstreamWhenEmpty`, forwarding the upstream.
public func cancellationSubjectHandRolled(
    upstream: UpstreamStream,
    returned: TimestampSlot
) -> CancellationSubject {
    let broadcaster = HandRolledBroadcaster<Int>(bufferingPolicy: .unbounded, cancelUpstreamWhenEmpty: true)
    let stream = broadcaster.subscribe()
    let subscriber = Task {
        var iterator = stream.makeAsyncIterator()
        _ = await iterator.next(isolation: nil)
        returned.record()
    }
    broadcaster.forward(upstream)
    return CancellationSubject(subscriber: subscriber)
}

/// The floor: the subscriber iterates the upstream AsyncStream directly.
public func cancellationSubjectBase(
    upstream: UpstreamStream,
    returned: TimestampSlot
) -> CancellationSubject {
    let subscriber = Task {
        var iterator = upstream.makeAsyncIterator()
        _ = await iterator.next(isolation: nil)
        returned.record()
    }
    return CancellationSubject(subscriber: subscriber)
}
