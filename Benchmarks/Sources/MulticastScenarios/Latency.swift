// The latency scenario (wake-up latency): how long after `send` (a subject) or after the upstream
// produced an element (share()) a subscriber that is suspended in `next()` receives it.
//
// Every element is sent by a dedicated OS thread (the driver), one at a time: it waits
// until every subscriber has come back for the next element, sleeps a pause much longer
// than the catch-up spin (`CatchUpSpin.maxSpin`, 20 µs) so that they are all suspended
// again, and only then sends. So each sample is one wake-up of a parked subscriber, never
// an element picked up by a subscriber that was still running or spinning.
//
// This file imports only AsyncMulticast of the two libraries (MemberImportVisibility), so
// `share()` here is AsyncMulticast's.

import AsyncMulticast
import Dispatch
import Synchronization

/// What travels through the sequences: the element's number, when the driver sent it
/// (or yielded it into the upstream AsyncStream), and when the upstream's `next()`
/// returned it (for a subject or a bare stream, the same as `sent`).
public struct LatencyStamp: Sendable {
    public var index: Int
    public var sent: UInt64
    public var produced: UInt64
}

/// The upstream of the share() variants: an AsyncStream the driver yields into, stamping
/// `produced` when its `next()` returns, i.e. when the element comes out of the upstream.
public struct StampOnProduce: AsyncSequence, Sendable {
    public typealias Element = LatencyStamp
    public typealias Failure = Never

    let base: AsyncStream<LatencyStamp>

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = LatencyStamp
        public typealias Failure = Never

        var base: AsyncStream<LatencyStamp>.AsyncIterator

        public mutating func next() async -> LatencyStamp? {
            await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> LatencyStamp? {
            guard var stamp = await base.next(isolation: actor) else { return nil }
            stamp.produced = monotonicNanos()
            return stamp
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}

/// What is measured and through what.
public enum LatencyVariant: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The floor: `AsyncStream` `continuation.yield` → its one consumer (N = 1 only).
    case stream
    /// AsyncMulticast `AsyncPassthroughSubject` (default buffering): `send` → subscribers.
    case oursSubject
    /// The hand-rolled broadcaster's `send` (an AsyncStream per subscriber) → subscribers.
    case handSubject
    /// AsyncMulticast `share()` (default policy, `.bounded(64)`) of an AsyncStream: the
    /// upstream task pulls the stream and hands each element to the subscribers.
    case oursShare
    /// The hand-rolled broadcaster forwarding the same AsyncStream (`forward(_:)`: a task
    /// pulling it and calling `send`).
    case handShare

    public var description: String {
        switch self {
        case .stream: "AsyncStream (no sharing)"
        case .oursSubject: "AsyncPassthroughSubject"
        case .handSubject: "hand-rolled send()"
        case .oursShare: "AsyncStream.share()"
        case .handShare: "hand-rolled forward()"
        }
    }

    public var implementation: Implementation {
        switch self {
        case .stream: .base
        case .oursSubject, .oursShare: .ours
        case .handSubject, .handShare: .handRolled
        }
    }

    /// Whether the element goes through an upstream task (share) rather than being sent
    /// straight to the subscribers: then `produced` differs from `sent`.
    public var hasUpstream: Bool { self == .oursShare || self == .handShare }
}

/// Latency samples in nanoseconds.
public struct LatencyResult: Sendable {
    /// From `sent` to each subscriber's receipt: N samples per element.
    public var fromSend: [Double] = []
    /// From `sent` to the last subscriber's receipt: one sample per element.
    public var lastFromSend: [Double] = []
    /// From the upstream's `next()` returning (`produced`) to each receipt.
    public var fromProduced: [Double] = []
    /// From `produced` to the last receipt, per element.
    public var lastFromProduced: [Double] = []
    /// Scheduling classes seen by the driver and the subscribers' threads.
    public var schedulingClasses: Set<String> = []
    public var failures: [String] = []

    public init() {}

    public mutating func append(_ other: LatencyResult) {
        fromSend += other.fromSend
        lastFromSend += other.lastFromSend
        fromProduced += other.fromProduced
        lastFromProduced += other.lastFromProduced
        schedulingClasses.formUnion(other.schedulingClasses)
        failures += other.failures
    }
}

/// Counts subscribers coming back for the next element; the last of each round wakes the driver.
private final class Arrivals: @unchecked Sendable {
    let count = Atomic<Int>(0)
    let parties: Int
    let semaphore = DispatchSemaphore(value: 0)

    init(parties: Int) { self.parties = parties }

    func arrive() {
        if count.add(1, ordering: .acquiringAndReleasing).newValue % parties == 0 {
            semaphore.signal()
        }
    }
}

private final class SchedulingClasses: Sendable {
    let seen = Mutex<Set<String>>([])
    func record() {
        let current = Scheduling.currentThread()
        seen.withLock { _ = $0.insert(current) }
    }
}

/// One subscriber's receipts, indexed by element number.
private struct Receipts: Sendable {
    var fromSend: [UInt64]
    var fromProduced: [UInt64]
    var failure: String?
}

/// Runs `warmup + samples` elements through `sequences` (one subscriber each, each in its
/// own task), sent by a driver thread one at a time as described at the top of the file.
/// `pause`: nanoseconds the driver sleeps once every subscriber has come back, plus a
/// random 0..<`pause`/2 (so nothing periodic lines up with the sends).
func latencyRun<Shared: AsyncSequence & Sendable>(
    _ sequences: [Shared],
    warmup: Int,
    samples: Int,
    pause: UInt64,
    send: @escaping @Sendable (LatencyStamp) -> Void,
    finish: @escaping @Sendable () -> Void
) async -> LatencyResult where Shared.Element == LatencyStamp, Shared.Failure == Never {
    let total = warmup + samples
    let arrivals = Arrivals(parties: sequences.count)
    let classes = SchedulingClasses()
    let receipts = await withTaskGroup(of: Receipts.self, returning: [Receipts].self) { group in
        for shared in sequences {
            group.addTask {
                // Registered before the first arrival, so before the first send.
                var iterator = shared.makeAsyncIterator()
                var receipts = Receipts(
                    fromSend: Array(repeating: 0, count: total), fromProduced: Array(repeating: 0, count: total))
                for index in 0..<total {
                    arrivals.arrive()
                    guard let stamp = await iterator.next(isolation: nil) else {
                        receipts.failure = "ended after \(index) of \(total) elements"
                        return receipts
                    }
                    let now = monotonicNanos()
                    receipts.fromSend[index] = now &- stamp.sent
                    receipts.fromProduced[index] = now &- stamp.produced
                    if stamp.index != index, receipts.failure == nil {
                        receipts.failure = "got element \(stamp.index) for \(index)"
                    }
                    if index == 0 || index == total - 1 { classes.record() }
                }
                arrivals.arrive()  // done: lets the driver finish
                while await iterator.next(isolation: nil) != nil {
                    if receipts.failure == nil { receipts.failure = "an element after the last one" }
                }
                return receipts
            }
        }
        startThread {
            classes.record()
            var random: UInt64 = 0x9E37_79B9_7F4A_7C15
            for index in 0..<total {
                arrivals.semaphore.wait()  // every subscriber is back in next()...
                random ^= random << 13
                random ^= random >> 7
                random ^= random << 17
                sleepThread(nanoseconds: pause + random % Swift.max(1, pause / 2))  // ...and suspended
                send(LatencyStamp(index: index, sent: monotonicNanos(), produced: 0))
            }
            arrivals.semaphore.wait()
            finish()
        }
        var all: [Receipts] = []
        for await receipts in group { all.append(receipts) }
        return all
    }

    var result = LatencyResult()
    result.schedulingClasses = classes.seen.withLock { $0 }
    result.failures = receipts.compactMap(\.failure)
    guard result.failures.isEmpty else { return result }
    result.fromSend.reserveCapacity(samples * receipts.count)
    result.fromProduced.reserveCapacity(samples * receipts.count)
    for index in warmup..<total {
        var lastSend: UInt64 = 0
        var lastProduced: UInt64 = 0
        for subscriber in receipts {
            result.fromSend.append(Double(subscriber.fromSend[index]))
            result.fromProduced.append(Double(subscriber.fromProduced[index]))
            lastSend = Swift.max(lastSend, subscriber.fromSend[index])
            lastProduced = Swift.max(lastProduced, subscriber.fromProduced[index])
        }
        result.lastFromSend.append(Double(lastSend))
        result.lastFromProduced.append(Double(lastProduced))
    }
    return result
}

extension Scenarios {
    /// Wake-up latency of `subscribers` suspended subscribers through `variant`;
    /// `.stream` runs with one subscriber whatever `subscribers` says. `pause`: see
    /// `latencyRun` (nanoseconds).
    public static func latency(
        _ variant: LatencyVariant,
        subscribers: Int,
        warmup: Int = 10,
        samples: Int,
        pause: UInt64 = 100_000
    ) async -> LatencyResult {
        switch variant {
        case .stream:
            let (stream, continuation) = AsyncStream.makeStream(of: LatencyStamp.self)
            return await latencyRun(
                [stream], warmup: warmup, samples: samples, pause: pause,
                send: { continuation.yield($0) }, finish: { continuation.finish() })
        case .oursSubject:
            let subject = AsyncPassthroughSubject<LatencyStamp, Never>()
            return await latencyRun(
                Array(repeating: subject, count: subscribers), warmup: warmup, samples: samples, pause: pause,
                send: { subject.send($0) }, finish: { subject.finish() })
        case .handSubject:
            let broadcaster = HandRolledBroadcaster<LatencyStamp>()
            let streams = (0..<subscribers).map { _ in broadcaster.subscribe() }
            return await latencyRun(
                streams, warmup: warmup, samples: samples, pause: pause,
                send: { broadcaster.send($0) }, finish: { broadcaster.finish() })
        case .oursShare:
            let (stream, continuation) = AsyncStream.makeStream(of: LatencyStamp.self)
            let shared = StampOnProduce(base: stream).share()
            return await latencyRun(
                Array(repeating: shared, count: subscribers), warmup: warmup, samples: samples, pause: pause,
                send: { continuation.yield($0) }, finish: { continuation.finish() })
        case .handShare:
            let (stream, continuation) = AsyncStream.makeStream(of: LatencyStamp.self)
            let broadcaster = HandRolledBroadcaster<LatencyStamp>()
            let streams = (0..<subscribers).map { _ in broadcaster.subscribe() }
            broadcaster.forward(StampOnProduce(base: stream))
            return await latencyRun(
                streams, warmup: warmup, samples: samples, pause: pause,
                send: { continuation.yield($0) }, finish: { continuation.finish() })
        }
    }
}
