// swift-async-algorithms' side of every scenario. This file imports only
// AsyncAlgorithms (MemberImportVisibility is on for this target), so
// `share(bufferingPolicy:)` here can only be swift-async-algorithms'.
//
// How SAA 1.1.4's share() works (Sources/AsyncAlgorithms/AsyncShareSequence.swift):
// makeAsyncIterator() registers a "side" immediately; the first next() of any
// side starts one detached task that pulls the base only while some side is
// waiting; `.bounded(n)` makes that task wait while n elements are buffered.
// Every delivery scans all sides (emit + trimBuffer), so the cost per element
// grows with N: O(M·N²) in total for a fan-out. Releasing the last iterator
// does NOT cancel the base; that happens when the share sequence itself is
// deinitialised.

import AsyncAlgorithms

extension BenchPolicy {
    /// SAA spells "newest" as `.bufferingLatest`.
    public var saa: AsyncBufferSequencePolicy {
        switch self {
        case .bounded64: .bounded(64)
        case .unbounded: .unbounded
        case .newest64: .bufferingLatest(64)
        }
    }

    public var saaName: String {
        switch self {
        case .bounded64: ".bounded(64)"
        case .unbounded: ".unbounded"
        case .newest64: ".bufferingLatest(64)"
        }
    }
}

enum SAA {
    static func fanOut(policy: BenchPolicy, subscribers: Int, elements: Int) async -> FanOutTally {
        let shared = CountingSequence(elements).share(bufferingPolicy: policy.saa)
        return await fanOutShared(shared, subscribers: subscribers, elements: elements, lossless: policy.isLossless)
    }

    static func churn(joins: Int, take: Int, concurrency: Int) async -> ChurnResult {
        let flag = StopFlag()
        let shared = StoppableCounter(flag: flag).share(bufferingPolicy: .bounded(64))
        return await churnShared(shared, flag: flag, joins: joins, take: take, concurrency: concurrency)
    }

    static func idle(count: Int, whileAlive: () -> Void) -> IdleMemoryResult {
        let shared = CountingSequence(1).share(bufferingPolicy: .bounded(64))
        return idleSubscribers(shared, count: count, whileAlive: whileAlive)
    }

    static func cancellation(samples: Int, terminationTimeout: Duration) async -> CancellationResult {
        await cancellationLatency(samples: samples, terminationTimeout: terminationTimeout) { upstream, returned in
            let shared = upstream.share(bufferingPolicy: .bounded(64))
            let subscriber = Task {
                var iterator = shared.makeAsyncIterator()
                _ = await iterator.next(isolation: nil)
                returned.record()
            }
            return CancellationSubject(subscriber: subscriber, release: { withExtendedLifetime(shared) {} })
        }
    }

    /// SAA has no subject; the closest is an AsyncStream shared with share().
    static func subject(subscribers: Int, elements: Int) async -> FanOutTally {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .unbounded)
        let shared = stream.share(bufferingPolicy: .unbounded)
        return await subjectFanOut(
            shared,
            subscribers: subscribers,
            elements: elements,
            send: { continuation.yield($0) },
            finish: { continuation.finish() }
        )
    }
}
