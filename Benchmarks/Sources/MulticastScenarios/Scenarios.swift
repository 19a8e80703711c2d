// The public entry points used by `compare` and the package-benchmark suite.

public enum Scenarios {
    // MARK: 1. Fan-out throughput

    /// One upstream of `elements` Ints, `subscribers` subscribers each in its own task.
    /// `.base` ignores `policy` and runs one consumer on the upstream directly.
    public static func fanOut(
        _ implementation: Implementation,
        policy: BenchPolicy,
        subscribers: Int,
        elements: Int
    ) async -> FanOutTally {
        switch implementation {
        case .ours: await Ours.fanOut(policy: policy, subscribers: subscribers, elements: elements)
        case .saa: await SAA.fanOut(policy: policy, subscribers: subscribers, elements: elements)
        case .handRolled: await fanOutHandRolled(policy: policy, subscribers: subscribers, elements: elements)
        case .base: await fanOutBase(elements: elements)
        }
    }

    // MARK: 2. Subject fan-out

    /// Whether AsyncMulticast's `AsyncPassthroughSubject` is compiled in (see the TODO in Ours.swift).
    public static var oursHasSubject: Bool { Ours.hasSubject }

    /// `send` from one task to N subscribers. nil when the implementation has no
    /// subject (ours before AsyncPassthroughSubject exists; the base).
    /// SAA: an AsyncStream continuation shared with `share(bufferingPolicy: .unbounded)`.
    public static func subject(_ implementation: Implementation, subscribers: Int, elements: Int) async -> FanOutTally? {
        switch implementation {
        case .ours: await Ours.subject(subscribers: subscribers, elements: elements)
        case .saa: await SAA.subject(subscribers: subscribers, elements: elements)
        case .handRolled: await subjectFanOutHandRolled(subscribers: subscribers, elements: elements)
        case .base: nil
        }
    }

    // MARK: 3. Join/leave churn

    /// Upper bound on what the hand-rolled (no back-pressure) upstream may run ahead.
    public static let handRolledChurnUpstreamLimit = 50_000_000

    public static func churn(
        _ implementation: Implementation,
        joins: Int,
        take: Int = 3,
        concurrency: Int = 4
    ) async -> ChurnResult? {
        switch implementation {
        case .ours: await Ours.churn(joins: joins, take: take, concurrency: concurrency)
        case .saa: await SAA.churn(joins: joins, take: take, concurrency: concurrency)
        case .handRolled:
            await churnHandRolled(
                flag: StopFlag(),
                joins: joins,
                take: take,
                concurrency: concurrency,
                upstreamLimit: handRolledChurnUpstreamLimit
            )
        case .base: nil
        }
    }

    // MARK: 4. Idle subscriber memory

    public static func idle(_ implementation: Implementation, subscribers: Int) -> IdleMemoryResult? {
        switch implementation {
        case .ours: Ours.idle(count: subscribers)
        case .saa: SAA.idle(count: subscribers)
        case .handRolled: idleSubscribersHandRolled(count: subscribers)
        case .base: nil
        }
    }

    // MARK: 5. Cancellation latency

    public static func cancellation(_ implementation: Implementation, samples: Int) async -> CancellationResult {
        switch implementation {
        case .ours: await Ours.cancellation(samples: samples)
        case .saa: await SAA.cancellation(samples: samples)
        case .handRolled:
            await cancellationLatency(samples: samples, start: cancellationSubjectHandRolled)
        case .base:
            await cancellationLatency(samples: samples, start: cancellationSubjectBase)
        }
    }
}
