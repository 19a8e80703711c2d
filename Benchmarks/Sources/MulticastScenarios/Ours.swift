// AsyncMulticast's side of every scenario. This file imports only
// AsyncMulticast (MemberImportVisibility is on for this target), so `share`
// here can only be AsyncMulticast's. Its SPI for benchmarks, `CatchUpSpinSwitch`,
// turns the catch-up spin off for the `share-nospin` cell.

@_spi(Benchmarks) import AsyncMulticast

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
        await HeapJitter.around {
            let shared = CountingSequence(elements).share(buffering: policy.ours)
            return await fanOutShared(shared, subscribers: subscribers, elements: elements, lossless: policy.isLossless)
        }
    }

    /// One subscriber sharing the opaque upstream: the cost of sharing over a real base.
    /// Turns the sole subscriber's catch-up spin on or off for the whole process (the library
    /// ships with it on): set before the cell's subscribers start.
    static func setCatchUpSpin(on: Bool) {
        CatchUpSpinSwitch.isOn = on
    }

    static func fanOutOverOpaque(policy: BenchPolicy, elements: Int) async -> FanOutTally {
        await fanOutOverOpaque(policy: policy, subscribers: 1, elements: elements)
    }

    /// N subscribers sharing the opaque upstream (the cost-per-delivery cell of share()).
    static func fanOutOverOpaque(policy: BenchPolicy, subscribers: Int, elements: Int) async -> FanOutTally {
        await HeapJitter.around {
            let shared = OpaqueCountingSequence(elements).share(buffering: policy.ours)
            return await fanOutShared(
                shared, subscribers: subscribers, elements: elements, lossless: policy.isLossless)
        }
    }

    static func churn(joins: Int, take: Int, concurrency: Int) async -> ChurnResult {
        await HeapJitter.around {
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
    }

    static func idle(count: Int, whileAlive: () -> Void) -> IdleMemoryResult {
        let shared = CountingSequence(1).share(buffering: .bounded(64))
        return idleSubscribers(shared, count: count, registered: { shared.subscriberCount }, whileAlive: whileAlive)
    }

    static func cancellation(samples: Int, terminationTimeout: Duration) async -> CancellationResult {
        await cancellationLatency(samples: samples, terminationTimeout: terminationTimeout) { upstream, returned in
            HeapJitter.aroundSetUp {
                let shared = upstream.share(buffering: .bounded(64))
                let subscriber = Task {
                    var iterator = shared.makeAsyncIterator()
                    _ = await iterator.next(isolation: nil)
                    returned.record()
                }
                return CancellationSubject(subscriber: subscriber, release: { withExtendedLifetime(shared) {} })
            }
        }
    }

    // MARK: Subject fan-out

    /// `defaultPolicy`: `AsyncPassthroughSubject()` as an app writes it (the cost cell);
    /// otherwise `.unbounded` named explicitly (the subject scenario). Both are `.unbounded` today.
    /// The subject cell read through `subscribe(after: nil)`: positions on.
    static func positionedSubject(subscribers: Int, elements: Int) async -> FanOutTally {
        await HeapJitter.around {
            let subject = AsyncPassthroughSubject<Int, Never>()
            return await subjectFanOut(
                PositionedValues(subject: subject), subscribers: subscribers, elements: elements,
                send: { subject.send($0) }, finish: { subject.finish() })
        }
    }

    /// `count` resumptions, one after another, into a full history of `history` elements:
    /// each reads the element after its position and leaves. The failures (none: it went right).
    static func resumptions(_ count: Int, history: Int) async -> [String] {
        let subject = AsyncReplaySubject<Int, Never>(replay: history)
        for n in 0..<history { subject.send(n) }
        for index in 0..<count {
            let after = history / 2 + index % (history / 2 - 1)
            var events = subject.subscribe(after: after).makeAsyncIterator()
            guard case .element(after + 1, position: after + 1)? = await events.next(isolation: nil) else {
                return ["the resumption after \(after) did not start at \(after + 1)"]
            }
        }
        return []
    }

    static func subject(subscribers: Int, elements: Int, defaultPolicy: Bool = false) async -> FanOutTally {
        await HeapJitter.around {
            let subject =
                defaultPolicy
                ? AsyncPassthroughSubject<Int, Never>() : AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
            return await subjectFanOut(
                subject,
                subscribers: subscribers,
                elements: elements,
                send: { subject.send($0) },
                finish: { subject.finish() }
            )
        }
    }
}

/// A subject's elements read through `subscribe(after: nil)`, their positions checked: the
/// elements of a subscriber with positions on.
struct PositionedValues: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let subject: AsyncPassthroughSubject<Int, Never>

    struct AsyncIterator: AsyncIteratorProtocol {
        var events: PositionedEventIterator<Int, Never>

        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            // Element n is at position n; anything else ends the iteration short, which the
            // tally reports.
            guard case .element(let value, let position)? = await self.events.next(isolation: actor), value == position
            else { return nil }
            return value
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(events: self.subject.subscribe(after: nil).makeAsyncIterator())
    }
}
