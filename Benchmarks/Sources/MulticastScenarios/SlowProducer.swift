// The slowproducer scenario (slow-producer CPU): what one subscriber costs the process when the source
// is slow (one element every 100 µs, so the subscriber is suspended between elements and
// every element is a wake-up). The producer is a dedicated OS thread sleeping until
// precise deadlines; it does the same work in every variant except the one call that
// hands the element over (`yield` into an AsyncStream, or a subject's `send`).
//
// This file imports only AsyncMulticast of the two libraries (MemberImportVisibility), so
// `share()` here is AsyncMulticast's.

import AsyncMulticast
import Synchronization

public enum SlowProducerVariant: String, Sendable, CaseIterable, CustomStringConvertible {
    /// (a) The producer yields into an AsyncStream; one consumer iterates it directly.
    case stream
    /// (b) The same AsyncStream, `share()`d (default policy, `.bounded(64)`), one subscriber.
    case oursShare
    /// (c) The producer calls `AsyncPassthroughSubject.send` (default buffering); one subscriber.
    case oursSubject
    /// (d) For context: the same AsyncStream forwarded by the hand-rolled broadcaster
    /// (`forward(_:)`, a task iterating it and calling `send`), one subscriber. Like (b),
    /// every element passes through a second task.
    case handShare

    public var description: String {
        switch self {
        case .stream: "(a) AsyncStream, iterated directly"
        case .oursShare: "(b) AsyncStream.share(), 1 subscriber"
        case .oursSubject: "(c) AsyncPassthroughSubject, 1 subscriber"
        case .handShare: "(d) hand-rolled forward(), 1 subscriber"
        }
    }

    public var implementation: Implementation {
        switch self {
        case .stream: .base
        case .oursShare, .oursSubject: .ours
        case .handShare: .handRolled
        }
    }
}

public struct SlowProducerResult: Sendable {
    public var elements = 0
    /// From starting the producer thread to the subscriber seeing the end.
    public var wallSeconds = 0.0
    /// The whole process over that time (getrusage RUSAGE_SELF, every thread).
    public var usage = ProcessUsage(
        cpuNanos: 0, userNanos: 0, systemNanos: 0, voluntarySwitches: 0, involuntarySwitches: 0)
    /// The producer thread alone (CLOCK_THREAD_CPUTIME_ID).
    public var producerCPUNanos: UInt64 = 0
    public var failures: [String] = []

    public init() {}

    public var cpuNanosPerElement: Double { Double(usage.cpuNanos) / Double(Swift.max(1, elements)) }
    /// Process CPU minus the producer thread's, per element: the consuming side.
    public var consumerNanosPerElement: Double {
        (Double(usage.cpuNanos) - Double(producerCPUNanos)) / Double(Swift.max(1, elements))
    }
}

private final class ProducerReport: Sendable {
    let cpuNanos = Atomic<UInt64>(0)
    let done = OneShot()
}

/// One subscriber (its own task) on `shared`; once it is registered and has settled, a
/// producer thread calls `offer(0)`, `offer(1)`, … every `period` nanoseconds (absolute
/// deadlines, so the rate does not drift), then `finish()`.
func slowProducerRun<Shared: AsyncSequence & Sendable>(
    _ shared: Shared,
    elements: Int,
    period: UInt64,
    offer: @escaping @Sendable (Int) -> Void,
    finish: @escaping @Sendable () -> Void
) async -> SlowProducerResult where Shared.Element == Int, Shared.Failure == Never {
    let registered = OneShot()
    let consumer = Task {
        var iterator = shared.makeAsyncIterator()
        registered.fire()
        return await consume(&iterator, expected: elements, lossless: true)
    }
    await registered.wait()
    // Let the setup's threads go idle and the subscriber (and, for share(), its upstream
    // task once the first element arrives) settle before measuring.
    try? await Task.sleep(for: .milliseconds(5))

    let report = ProducerReport()
    let before = ProcessUsage.now()
    let started = monotonicNanos()
    startThread {
        let cpuAtStart = threadCPUNanos()
        var deadline = monotonicClockNanos()
        for element in 0..<elements {
            deadline &+= period
            sleep(untilMonotonic: deadline)
            offer(element)
        }
        finish()
        report.cpuNanos.store(threadCPUNanos() &- cpuAtStart, ordering: .releasing)
        report.done.fire()
    }
    let tally = await consumer.value
    await report.done.wait()
    let ended = monotonicNanos()
    let after = ProcessUsage.now()

    var result = SlowProducerResult()
    result.elements = elements
    result.wallSeconds = Double(ended - started) / 1e9
    result.usage = after - before
    result.producerCPUNanos = report.cpuNanos.load(ordering: .acquiring)
    result.failures = tally.failure.map { [$0] } ?? []
    return result
}

extension Scenarios {
    /// `elements` offered every `period` nanoseconds to one subscriber through `variant`.
    public static func slowProducer(
        _ variant: SlowProducerVariant,
        elements: Int,
        period: UInt64 = 100_000
    ) async -> SlowProducerResult {
        switch variant {
        case .stream:
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            return await slowProducerRun(
                stream, elements: elements, period: period,
                offer: { continuation.yield($0) }, finish: { continuation.finish() })
        case .oursShare:
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            return await slowProducerRun(
                stream.share(), elements: elements, period: period,
                offer: { continuation.yield($0) }, finish: { continuation.finish() })
        case .oursSubject:
            let subject = AsyncPassthroughSubject<Int, Never>()
            return await slowProducerRun(
                subject, elements: elements, period: period,
                offer: { subject.send($0) }, finish: { subject.finish() })
        case .handShare:
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            let broadcaster = HandRolledBroadcaster<Int>()
            let subscriber = broadcaster.subscribe()
            broadcaster.forward(stream)
            return await slowProducerRun(
                subscriber, elements: elements, period: period,
                offer: { continuation.yield($0) }, finish: { continuation.finish() })
        }
    }
}
