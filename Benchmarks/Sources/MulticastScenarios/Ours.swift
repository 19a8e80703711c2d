// AsyncMulticast's side of every scenario. This file imports only
// AsyncMulticast (MemberImportVisibility is on for this target), so `share`
// here can only be AsyncMulticast's.

import AsyncMulticast

extension BenchPolicy {
    public var ours: SharedBufferingPolicy {
        switch self {
        case .bounded64: .bounded(64)
        case .unbounded: .unbounded
        case .newest64: .bufferingNewest(64)
        }
    }
}

enum Ours {
    static func fanOut(policy: BenchPolicy, subscribers: Int, elements: Int) async -> FanOutTally {
        let shared = CountingSequence(elements).share(buffering: policy.ours)
        return await fanOutShared(shared, subscribers: subscribers, elements: elements, lossless: policy.isLossless)
    }

    static func churn(joins: Int, take: Int, concurrency: Int) async -> ChurnResult {
        let flag = StopFlag()
        let shared = StoppableCounter(flag: flag).share(buffering: .bounded(64))
        return await churnShared(
            shared,
            flag: flag,
            joins: joins,
            take: take,
            concurrency: concurrency,
            subscriberCount: { shared.subscriberCount }
        )
    }

    static func idle(count: Int) -> IdleMemoryResult {
        let shared = CountingSequence(1).share(buffering: .bounded(64))
        var result = idleSubscribers(shared, count: count)
        result.subscribers = shared.subscriberCount
        return result
    }

    static func cancellation(samples: Int) async -> CancellationResult {
        await cancellationLatency(samples: samples) { upstream, returned, left in
            let shared = upstream.share(buffering: .bounded(64))
            let subscriber = Task {
                do {
                    var iterator = shared.makeAsyncIterator()
                    _ = await iterator.next(isolation: nil)
                    returned.record()
                }
                left.record()
            }
            return CancellationSubject(subscriber: subscriber, release: { withExtendedLifetime(shared) {} })
        }
    }

    // MARK: Subject fan-out
    //
    // TODO(AsyncPassthroughSubject): enable once AsyncMulticast ships
    // `AsyncPassthroughSubject` (issue 4, scenario 2). Until then this section is
    // compiled out and `compare` / the benchmark suite report the subject
    // scenario for AsyncMulticast as "not available". To enable it, add
    // `.define("ASYNC_MULTICAST_SUBJECT")` to the MulticastScenarios target's
    // swiftSettings in Package.swift (or delete the #if).
    #if ASYNC_MULTICAST_SUBJECT
    static let hasSubject = true

    static func subject(subscribers: Int, elements: Int) async -> FanOutTally? {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
        return await subjectFanOut(
            subject,
            subscribers: subscribers,
            elements: elements,
            send: { subject.send($0) },
            finish: { subject.finish() }
        )
    }
    #else
    static let hasSubject = false

    static func subject(subscribers: Int, elements: Int) async -> FanOutTally? { nil }
    #endif
}
