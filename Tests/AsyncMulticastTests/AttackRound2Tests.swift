// Attack round 2: the three behaviours changed last, attacked through the public API.
//
// 1. Lag reports (`events(buffering:)`) follow tokio's `Lagged(n)`: a `.missed` takes nothing,
//    a lossy subscriber never holds more than its limit, and the counts add up exactly.
// 2. An `.evicting(n)` subscriber's replayed elements are a greeting that counts against no
//    limit: only what is produced after it joined can evict it.
// 3. Subject senders: `send(waitingForRoom:)` waiters go in first in, first out, a cancelled
//    one goes in at once, completion releases them; `send(contentsOf:)` returns when the
//    subject completes, even while its sequence is idle.
//
// Every assertion is on public behaviour. A few gates read the storage (`@testable`) to
// know that a sender has parked or that a reader waits in `next()`: the public API has no
// way to tell, and the order the tests check depends on it. No gate decides an outcome.
//
// What this round found, fixed since and checked here: an evicted subscriber's greeting is
// released at once; a greeting's copy lives no longer than its readers; an `.evicting(n)`
// subscriber's greeting is on top of `n` (the guides say so); a reader answering into its own
// `.bounded(n)` subject next to a second bounded reader no longer waits for itself.

import Testing

@testable import AsyncMulticast

// MARK: - Helpers

/// What a lag-reporting subscriber received, summed up.
private struct LagSummary: Sendable, CustomStringConvertible {
    var elements: [Int] = []
    var missedCounts: [Int] = []
    var evicted = false

    init(_ events: [SharedEvent<Int>]) {
        for event in events {
            switch event {
            case .element(let value): self.elements.append(value)
            case .missed(let count): self.missedCounts.append(count)
            case .evicted: self.evicted = true
            }
        }
    }

    var missed: Int { self.missedCounts.reduce(0, +) }
    var description: String { "\(self.elements.count) elements, missed \(self.missedCounts)" }
}

/// Values sent by sender `s` are `s * senderStride + i`, `i` counting up from 0.
private let senderStride = 1_000_000

/// Whether each sender's values arrive in increasing order.
private func isIncreasingPerSender(_ values: [Int]) -> Bool {
    var last: [Int: Int] = [:]
    for value in values {
        let sender = value / senderStride
        if let previous = last[sender], previous >= value { return false }
        last[sender] = value
    }
    return true
}

/// Reads every event until the end.
private func drain(_ iterator: inout SharedEventIterator<Int, Never>) async -> [SharedEvent<Int>] {
    var events: [SharedEvent<Int>] = []
    while let event = await iterator.next() { events.append(event) }
    return events
}

/// Reads every event until the end or the error.
private func drain(
    _ iterator: inout SharedEventIterator<Int, TestError>
) async -> (events: [SharedEvent<Int>], failure: TestError?) {
    var events: [SharedEvent<Int>] = []
    do {
        while let event = try await iterator.next() { events.append(event) }
        return (events, nil)
    } catch {
        return (events, error)
    }
}

/// The lossy policies, limits 0, 1, 2 and 5.
private let lossyPolicies: [SharedBufferingPolicy] =
    [0, 1, 2, 5].map { .bufferingNewest($0) } + [0, 1, 2, 5].map { .bufferingOldest($0) }

/// Sends `perSender` tagged values from each of `senders` tasks, all started together.
private func sendConcurrently(
    senders: Int, perSender: Int, waitingForRoom: Bool = false,
    _ send: @escaping @Sendable (Int, Bool) async -> Void
) async {
    let start = Latch()
    await withTaskGroup(of: Void.self) { group in
        for s in 0..<senders {
            group.addTask {
                await start.wait()
                for i in 0..<perSender {
                    await send(s * senderStride + i, waitingForRoom)
                    if i % 7 == 0 { await Task.yield() }
                }
            }
        }
        start.release()
    }
}

/// A class element, to see when the library lets go of one.
private final class Token: Sendable {
    let value: Int
    init(_ value: Int) { self.value = value }
}

/// A weak reference that can cross tasks.
private final class WeakBox: @unchecked Sendable {
    weak var token: Token?
    init(_ token: Token) { self.token = token }
}

/// A sequence that stays idle until the test feeds it: counts its iterators, signals each
/// `next()` it enters, and records how its stream ended (`onTermination`).
private final class IdleSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    let stream: AsyncStream<Int>
    let input: AsyncStream<Int>.Continuation
    let ends = TerminationRecorder()
    let enteredNext = Signal<Void>()
    private let iterators = Lock(0)

    init() {
        (self.stream, self.input) = AsyncStream.makeStream(of: Int.self)
        self.ends.attach(to: self.input)
    }

    var iteratorCount: Int { self.iterators.withLock { $0 } }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Int>.Iterator
        let entered: Signal<Void>

        mutating func next() async -> Int? {
            self.entered.send(())
            return await self.base.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        self.iterators.withLock { $0 += 1 }
        return AsyncIterator(base: self.stream.makeAsyncIterator(), entered: self.enteredNext)
    }
}

/// An actor that reads a lag-reporting subscriber on its own executor.
private actor EventReader {
    func readAll(_ events: AsyncSharedEvents<Int, Never>, joined: Signal<Void>) async -> [SharedEvent<Int>] {
        var iterator = events.makeAsyncIterator()
        joined.send(())
        var received: [SharedEvent<Int>] = []
        while let event = await iterator.next() { received.append(event) }
        return received
    }
}

// Serialized, with hang guards of minutes: these races are CPU-heavy, and under the thread
// sanitizer, next to the rest of the suite on two cores, a run that takes 6 s alone took
// more than 30 s. A guard only decides that something hung.
@Suite("AttackRound2", .serialized, .timeLimit(.minutes(15)))
struct AttackRound2Tests {
    // MARK: - 1. Lag reports

    @Test("a burst from concurrent senders: a lossy subscriber keeps exactly its limit and reports the rest once")
    func burstFromConcurrentSenders() async throws {
        try await withTimeout(seconds: 300) {
            for policy in lossyPolicies {
                let subject = AsyncPassthroughSubject<Int, Never>()
                var reader = subject.events(buffering: policy).makeAsyncIterator()
                await sendConcurrently(senders: 4, perSender: 50) { value, _ in subject.send(value) }
                subject.finish()
                let events = await drain(&reader)
                let summary = LagSummary(events)
                switch policy {
                case .bufferingNewest(let n):
                    #expect(events.first == .missed(200 - n), "\(policy): \(events)")
                    #expect(summary.elements.count == n, "\(policy): \(summary)")
                    #expect(summary.missedCounts.count == 1, "\(policy): \(summary)")
                case .bufferingOldest(let n):
                    #expect(events.last == .missed(200 - n), "\(policy): \(events)")
                    #expect(summary.elements.count == n, "\(policy): \(summary)")
                    #expect(summary.missedCounts.count == 1, "\(policy): \(summary)")
                default:
                    Issue.record("not a lossy policy")
                }
                #expect(isIncreasingPerSender(summary.elements), "\(policy)")
                #expect(subject.subscriberCount == 0)
            }
        }
    }

    @Test(
        "concurrent senders and a reading subscriber: received + missed == sent, each sender in order",
        arguments: lossyPolicies)
    func conservationWhileReading(_ policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<12 {
                let subject = AsyncPassthroughSubject<Int, Never>()
                let iterator = subject.events(buffering: policy).makeAsyncIterator()
                let reader = Task {
                    var iterator = iterator
                    return await drain(&iterator)
                }
                let senders = 1 + round % 4
                await sendConcurrently(senders: senders, perSender: 150) { value, _ in subject.send(value) }
                subject.finish()
                let events = await reader.value
                let summary = LagSummary(events)
                #expect(
                    summary.elements.count + summary.missed == senders * 150,
                    "\(policy), round \(round): \(summary)")
                #expect(summary.missedCounts.allSatisfy { $0 > 0 }, "\(policy), round \(round)")
                #expect(isIncreasingPerSender(summary.elements), "\(policy), round \(round)")
                #expect(Set(summary.elements).count == summary.elements.count, "no duplicates")
                #expect(!summary.evicted)
            }
        }
    }

    @Test("views with different policies on one subject, all read while several tasks send: each adds up")
    func differentViewsAddUpTogether() async throws {
        try await withTimeout(seconds: 300) {
            let policies: [SharedBufferingPolicy] =
                lossyPolicies + [.unbounded, .evicting(1_000_000), .bounded(3)]
            for round in 0..<8 {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
                let readers = policies.map { policy in
                    let iterator = subject.events(buffering: policy).makeAsyncIterator()
                    return Task {
                        var iterator = iterator
                        return await drain(&iterator)
                    }
                }
                // A `.bounded` view makes `send(waitingForRoom:)` wait: half the rounds use it.
                let waiting = round % 2 == 0
                await sendConcurrently(senders: 3, perSender: 120, waitingForRoom: waiting) { value, waits in
                    if waits { await subject.send(waitingForRoom: value) } else { subject.send(value) }
                }
                subject.finish()
                for (policy, reader) in zip(policies, readers) {
                    let summary = LagSummary(await reader.value)
                    #expect(summary.elements.count + summary.missed == 360, "\(policy), round \(round): \(summary)")
                    #expect(isIncreasingPerSender(summary.elements), "\(policy), round \(round)")
                    switch policy {
                    case .unbounded, .evicting, .bounded:
                        #expect(summary.missed == 0 && !summary.evicted, "\(policy) loses nothing")
                    default:
                        break
                    }
                }
                #expect(subject.subscriberCount == 0)
            }
        }
    }

    @Test("a reader cancelled at a random point ends with nil, at once, and leaves; the others still add up")
    func cancelledReaderAtRandomPoints() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0xCA11)
            for round in 0..<60 {
                let policy = lossyPolicies[round % lossyPolicies.count]
                let subject = AsyncPassthroughSubject<Int, Never>()
                let witness = Task { [iterator = subject.events(buffering: policy).makeAsyncIterator()] in
                    var iterator = iterator
                    return await drain(&iterator)
                }
                let victimIterator = subject.events(buffering: policy).makeAsyncIterator()
                let afterCancel = LockedLog<SharedEvent<Int>?>()
                let victim = Task {
                    var iterator = victimIterator
                    while true {
                        let cancelledBefore = Task.isCancelled
                        let event = await iterator.next()
                        if cancelledBefore { afterCancel.append(event) }
                        if event == nil { return }
                    }
                }
                #expect(subject.subscriberCount == 2)
                let yields = Int(rng.next() % 40)
                let sending = Task {
                    await sendConcurrently(senders: 2, perSender: 200) { value, _ in subject.send(value) }
                }
                for _ in 0..<yields { await Task.yield() }
                victim.cancel()
                try await withTimeout("the cancelled reader", seconds: 300) { await victim.value }
                // A call made once the task was cancelled returns nil: nothing is taken ahead
                // under a dropping policy.
                #expect(afterCancel.values.allSatisfy { $0 == nil }, "\(policy), round \(round): \(afterCancel.values)")
                #expect(afterCancel.count <= 1, "it stops at the first nil")
                await sending.value
                #expect(subject.subscriberCount == 1, "\(policy), round \(round): the victim left")
                subject.finish()
                let summary = LagSummary(await witness.value)
                #expect(summary.elements.count + summary.missed == 400, "\(policy), round \(round): \(summary)")
                #expect(subject.subscriberCount == 0)
            }
        }
    }

    @Test("tokio's Lagged(n): a .missed takes nothing, so the element after the gap can still be dropped")
    func missedTakesNothing() async {
        // .bufferingNewest(1): 1, 2, 3 → missed(2); then 4 drops 3 → missed(1), element(4).
        let newest1 = AsyncPassthroughSubject<Int, Never>()
        var a = newest1.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
        for n in 1...3 { newest1.send(n) }
        #expect(await a.next() == .missed(2))
        newest1.send(4)
        #expect(await a.next() == .missed(1))
        #expect(await a.next() == .element(4))
        newest1.finish()
        #expect(await a.next() == nil)

        // .bufferingNewest(2): 1…5 → missed(3); 6 drops 4 → missed(1), 5, 6.
        let newest2 = AsyncPassthroughSubject<Int, Never>()
        var b = newest2.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
        for n in 1...5 { newest2.send(n) }
        #expect(await b.next() == .missed(3))
        newest2.send(6)
        newest2.finish()
        #expect(await drain(&b) == [.missed(1), .element(5), .element(6)])

        // .bufferingOldest(1): keeps 1, drops 2 and 3; after 1 is read, 4 is kept and 5 dropped.
        let oldest1 = AsyncPassthroughSubject<Int, Never>()
        var c = oldest1.events(buffering: .bufferingOldest(1)).makeAsyncIterator()
        for n in 1...3 { oldest1.send(n) }
        #expect(await c.next() == .element(1))
        oldest1.send(4)
        oldest1.send(5)
        #expect(await c.next() == .missed(2))
        oldest1.send(6)  // still dropped: 4 is held
        #expect(await c.next() == .element(4))
        oldest1.finish()
        #expect(await drain(&c) == [.missed(2)])

        // Limit 0: everything sent while it is not waiting is missed, reported before the end.
        for policy: SharedBufferingPolicy in [.bufferingNewest(0), .bufferingOldest(0)] {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var d = subject.events(buffering: policy).makeAsyncIterator()
            subject.send(1)
            subject.send(2)
            #expect(await d.next() == .missed(2), "\(policy)")
            subject.send(3)
            #expect(await d.next() == .missed(1), "\(policy)")
            subject.finish()
            #expect(await d.next() == nil, "\(policy)")
        }
    }

    @Test("a limit-0 subscriber waiting in next() receives what is sent then, and misses the rest")
    func limitZeroWaitingReceives() async throws {
        for policy: SharedBufferingPolicy in [.bufferingNewest(0), .bufferingOldest(0)] {
            let subject = AsyncPassthroughSubject<Int, Never>()
            let iterator = subject.events(buffering: policy).makeAsyncIterator()
            let reader = Task {
                var iterator = iterator
                return await iterator.next()
            }
            try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
            subject.send(1)
            subject.send(2)
            #expect(await reader.value == .element(1), "\(policy)")
        }
    }

    @Test("finish() and fail() in the middle of a gap: the gap is reported, then the end", arguments: lossyPolicies)
    func completionMidGap(_ policy: SharedBufferingPolicy) async {
        for fails in [false, true] {
            let subject = AsyncPassthroughSubject<Int, TestError>()
            var reader = subject.events(buffering: policy).makeAsyncIterator()
            for n in 1...6 { subject.send(n) }
            if fails { subject.fail(.boom) } else { subject.finish() }
            let (events, failure) = await drain(&reader)
            var expected: [SharedEvent<Int>]
            switch policy {
            case .bufferingNewest(let n):
                expected = n < 6 ? [.missed(6 - n)] : []
                expected += (7 - n..<7).map { .element($0) }
            case .bufferingOldest(let n):
                expected = (1..<1 + n).map { .element($0) }
                if n < 6 { expected.append(.missed(6 - n)) }
            default:
                expected = []
            }
            #expect(events == expected, "\(policy), fails: \(fails)")
            #expect(failure == (fails ? .boom : nil), "\(policy)")
            #expect(subject.subscriberCount == 0)
        }
    }

    @Test("completion after a .missed was returned: what is left is still reported exactly")
    func completionAfterAMissedWasReturned() async throws {
        let subject = AsyncPassthroughSubject<Int, TestError>()
        var newest = subject.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
        var oldest = subject.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
        for n in 1...5 { subject.send(n) }
        #expect(try await newest.next() == .missed(3))
        #expect(try await oldest.next() == .element(1))
        for n in 6...9 { subject.send(n) }
        subject.fail(.other(7))
        let (newEvents, newFailure) = await drain(&newest)
        // Held [4, 5]; 6…9 drop 4…7.
        #expect(newEvents == [.missed(4), .element(8), .element(9)])
        #expect(newFailure == .other(7))
        let (oldEvents, oldFailure) = await drain(&oldest)
        // Held [1, 2] and missed 3…5; once 1 was read, 6 fits and 7…9 are missed.
        #expect(oldEvents == [.element(2), .missed(3), .element(6), .missed(3)])
        #expect(oldFailure == .other(7))
    }

    @Test("replayed elements of a dropping subscriber: at most its limit, and no gap reported for the rest")
    func replayedToDroppingSubscriber() async {
        for policy: SharedBufferingPolicy in [.bufferingNewest(2), .bufferingOldest(2)] {
            let subject = AsyncReplaySubject<Int, Never>(bufferSize: 5)
            for n in 1...7 { subject.send(n) }
            var reader = subject.events(buffering: policy).makeAsyncIterator()
            subject.send(8)
            subject.finish()
            let events = await drain(&reader)
            if case .bufferingNewest = policy {
                #expect(events == [.missed(1), .element(7), .element(8)], "6 was replayed, then dropped for 8")
            } else {
                #expect(events == [.element(6), .element(7), .missed(1)], "8 found no room")
            }
        }
    }

    @Test("a current-value subject's lag subscriber: the current value counts like any other")
    func currentValueLag() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0)
        var reader = subject.events().makeAsyncIterator()
        subject.send(1)
        subject.send(2)
        subject.finish()
        #expect(await drain(&reader) == [.missed(2), .element(2)])
    }

    @Test("multicast with lag subscribers: cancel() mid-gap reports the gap, then nil; a reconnection starts afresh")
    func multicastCancelMidGap() async throws {
        try await withTimeout(seconds: 300) {
            let source = FedSource()
            let multicast = source.multicast(buffering: .unbounded)
            var newest = multicast.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
            var oldest = multicast.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
            var zero = multicast.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            var witness = multicast.makeAsyncIterator()
            let connection = multicast.connect()
            await source.control.waitForStart(of: 0)
            source.control.yield(1, 2, 3, 4, 5)
            for n in 1...5 { #expect(await witness.next() == n) }
            connection.cancel()
            #expect(await drain(&newest) == [.missed(3), .element(4), .element(5)])
            #expect(await drain(&oldest) == [.element(1), .element(2), .missed(3)])
            #expect(await drain(&zero) == [.missed(5)])
            #expect(await witness.next() == nil)
            #expect(multicast.subscriberCount == 0)

            // A later connection: new subscribers, nothing of the first one.
            var late = multicast.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
            var witness2 = multicast.buffering(.unbounded).makeAsyncIterator()
            let second = multicast.connect()
            #expect(second != connection)
            await source.control.waitForStart(of: 1)
            source.control.yield(10, 11, 12)
            for n in 10...12 { #expect(await witness2.next() == n) }
            #expect(await late.next() == .missed(2))
            #expect(await late.next() == .element(12))
            second.cancel()
            #expect(await late.next() == nil)
            #expect(await witness2.next() == nil)
        }
    }

    @Test("multicast cancel() while a lag subscriber reads concurrently: it adds up to what was produced")
    func multicastCancelWhileReading() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<20 {
                let policy = lossyPolicies[round % lossyPolicies.count]
                let multicast = Counter().multicast(buffering: .unbounded)
                let lagging = multicast.events(buffering: policy).makeAsyncIterator()
                let counted = multicast.makeAsyncIterator()
                let reader = Task {
                    var iterator = lagging
                    return await drain(&iterator)
                }
                let connection = multicast.connect()
                // The witness reads 300 elements, then the connection is cancelled; it drains
                // what else was produced before the cancel.
                var witness = counted
                var produced = 0
                while produced < 300, await witness.next() != nil { produced += 1 }
                connection.cancel()
                while await witness.next() != nil { produced += 1 }
                let summary = LagSummary(await reader.value)
                #expect(summary.elements.count + summary.missed == produced, "\(policy), round \(round): \(summary)")
                #expect(isStrictlyIncreasing(summary.elements))
            }
        }
    }

    @Test("share() of a pulled sequence: lag readers of every lossy policy add up to what the upstream produced")
    func shareLagReadersAddUp() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<4 {
                let shared = Counter(limit: 3_000).share(buffering: .unbounded)
                // Every reader joins before any of them waits (the first wait starts the upstream).
                let start = Latch()
                let readers = lossyPolicies.enumerated().map { index, policy in
                    let iterator = shared.events(buffering: policy).makeAsyncIterator()
                    return Task {
                        var iterator = iterator
                        await start.wait()
                        var events: [SharedEvent<Int>] = []
                        while let event = await iterator.next() {
                            events.append(event)
                            if (events.count + index + round) % 3 == 0 { await Task.yield() }
                        }
                        return events
                    }
                }
                #expect(shared.subscriberCount == lossyPolicies.count)
                start.release()
                for (policy, reader) in zip(lossyPolicies, readers) {
                    let summary = LagSummary(await reader.value)
                    #expect(summary.elements.count + summary.missed == 3_000, "\(policy), round \(round)")
                    #expect(isStrictlyIncreasing(summary.elements))
                }
            }
        }
    }

    @Test("a reader on the main actor: the counts add up while other tasks send")
    @MainActor
    func mainActorReader() async throws {
        for policy in [SharedBufferingPolicy.bufferingNewest(1), .bufferingOldest(3), .bufferingNewest(0)] {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var reader = subject.events(buffering: policy).makeAsyncIterator()
            let sending = Task.detached {
                await sendConcurrently(senders: 3, perSender: 200) { value, _ in subject.send(value) }
                subject.finish()
            }
            var events: [SharedEvent<Int>] = []
            while let event = await reader.next() { events.append(event) }
            await sending.value
            let summary = LagSummary(events)
            #expect(summary.elements.count + summary.missed == 600, "\(policy): \(summary)")
            #expect(isIncreasingPerSender(summary.elements))
        }
    }

    @Test("a reader on another actor: the counts add up while other tasks send")
    func actorReader() async throws {
        try await withTimeout(seconds: 300) {
            for policy in [SharedBufferingPolicy.bufferingNewest(2), .bufferingOldest(1), .bufferingOldest(0)] {
                let subject = AsyncPassthroughSubject<Int, Never>()
                let actor = EventReader()
                let joined = Signal<Void>()
                let reading = Task { await actor.readAll(subject.events(buffering: policy), joined: joined) }
                _ = await joined.next()
                await sendConcurrently(senders: 3, perSender: 200) { value, _ in subject.send(value) }
                subject.finish()
                let summary = LagSummary(await reading.value)
                #expect(summary.elements.count + summary.missed == 600, "\(policy): \(summary)")
                #expect(isIncreasingPerSender(summary.elements))
            }
        }
    }

    // MARK: - 2. The greeting of an evicting subscriber

    @Test(
        "AsyncReplaySubject(bufferSize: k, .evicting(n)): the whole replay, n live ones more, and n + 1 evict",
        arguments: [(2, 4), (3, 3), (5, 2), (5, 1), (1, 1), (8, 8)])
    func replaySubjectGreeting(_ sizes: (k: Int, n: Int)) async {
        let (k, n) = sizes
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: k, buffering: .evicting(n))
        for value in 1...k + 3 { subject.send(value) }
        let replayed = Array(4...k + 3)
        #expect(subject.replayCache == replayed)
        var keeping = subject.events().makeAsyncIterator()
        var stalled = subject.events().makeAsyncIterator()
        for value in 100..<100 + n { subject.send(value) }
        // `stalled` read nothing, and neither did `keeping`: both hold n live ones, and the
        // greeting counts against nothing.
        #expect(subject.subscriberCount == 2)
        let keepingFirst = await keeping.next()
        #expect(keepingFirst == .element(replayed[0]), "k \(k), n \(n)")
        var kept = [keepingFirst]
        while kept.count < k + n, let event = await keeping.next() { kept.append(event) }
        #expect(kept == (replayed + Array(100..<100 + n)).map { .element($0) }, "k \(k), n \(n)")
        subject.send(1_000)  // `keeping` holds 1; `stalled` would hold n + 1
        #expect(subject.subscriberCount == 1, "an evicted subscriber stops counting at its eviction")
        #expect(await stalled.next() == .evicted(.hardLimit(n)), "k \(k), n \(n)")
        #expect(await stalled.next() == nil)
        #expect(subject.subscriberCount == 1)
        subject.finish()
        #expect(await drain(&keeping) == [.element(1_000)])
        #expect(subject.subscriberCount == 0)
    }

    @Test("eviction after the greeting was partly read: what the iterator took comes first, then .evicted")
    func evictionAfterPartOfTheGreeting() async {
        // .evicting(2) takes one extra element per read (batch of min(2 / 2, 64) = 1).
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 5, buffering: .evicting(2))
        for value in 1...5 { subject.send(value) }
        var reader = subject.events().makeAsyncIterator()
        #expect(await reader.next() == .element(1))  // takes 2 as well
        subject.send(6)
        subject.send(7)  // two live ones: the limit, not past it
        #expect(await reader.next() == .element(2))
        #expect(await reader.next() == .element(3))  // takes 4 as well
        subject.send(8)  // three live ones not taken: evicted
        #expect(await reader.next() == .element(4), "already taken by the iterator")
        #expect(await reader.next() == .evicted(.hardLimit(2)))
        #expect(await reader.next() == nil)

        // .evicting(1) takes nothing extra: after the greeting's first element, two live ones evict.
        let one = AsyncReplaySubject<Int, Never>(bufferSize: 3, buffering: .evicting(1))
        for value in 1...3 { one.send(value) }
        var single = one.events().makeAsyncIterator()
        #expect(await single.next() == .element(1))
        one.send(4)
        #expect(await single.next() == .element(2))
        one.send(5)
        #expect(await single.next() == .evicted(.hardLimit(1)))
    }

    @Test("the batch that ends the greeting goes on into the live elements, which then no longer count")
    func batchAcrossTheSeam() async {
        // .evicting(4) takes up to 2 extra elements per read.
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1, buffering: .evicting(4))
        subject.send(0)
        var reader = subject.events().makeAsyncIterator()
        subject.send(1)
        subject.send(2)
        #expect(await reader.next() == .element(0))  // the greeting, then 1 and 2 taken
        for value in 3...6 { subject.send(value) }  // four more live: the limit
        #expect(await reader.next() == .element(1))
        #expect(await reader.next() == .element(2))
        #expect(await reader.next() == .element(3), "not evicted: 1 and 2 had been taken")
        // That read took 4 and 5 too: it holds 6 only. Four more make five: evicted.
        for value in 7...10 { subject.send(value) }
        #expect(await reader.next() == .element(4))
        #expect(await reader.next() == .element(5))
        #expect(await reader.next() == .evicted(.hardLimit(4)))
    }

    @Test("AsyncCurrentValueSubject(_, buffering: .evicting(1)): the current value greets, two live ones evict")
    func currentValueEvictingOne() async throws {
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .evicting(1))
        var reading = subject.events().makeAsyncIterator()
        var stalled = subject.events().makeAsyncIterator()
        subject.send(1)
        #expect(await reading.next() == .element(0))
        #expect(await reading.next() == .element(1))
        subject.send(2)
        #expect(subject.value == 2)
        #expect(subject.subscriberCount == 1, "evicted: it stopped counting")
        #expect(await stalled.next() == .evicted(.hardLimit(1)), "1 and 2 arrived after it joined")
        #expect(await stalled.next() == nil)
        #expect(subject.subscriberCount == 1)
        var late = subject.makeAsyncIterator()
        #expect(await late.next() == 2, "the current value, as a greeting")
        subject.finish()
        #expect(await drain(&reading) == [.element(2)])
        #expect(await late.next() == nil)

        // With `any Error`, a plain iteration throws SubscriberEvictedError.
        let throwing = AsyncCurrentValueSubject<Int, any Error>(0, buffering: .evicting(1))
        var plain = throwing.makeAsyncIterator()
        throwing.send(1)
        throwing.send(2)
        await #expect(throws: SubscriberEvictedError.self) { _ = try await plain.next() }
        #expect(throwing.subscriberCount == 0)
    }

    @Test("AsyncReplaySubject<_, any Error>: a plain iteration of an evicted subscriber throws, after its greeting")
    func replayAnyErrorThrows() async throws {
        let subject = AsyncReplaySubject<Int, any Error>(bufferSize: 3, buffering: .evicting(1))
        for value in 1...3 { subject.send(value) }
        var reader = subject.makeAsyncIterator()
        #expect(try await reader.next() == 1)
        subject.send(4)
        #expect(try await reader.next() == 2)
        #expect(try await reader.next() == 3)
        #expect(try await reader.next() == 4)
        subject.send(5)
        subject.send(6)
        await #expect(throws: SubscriberEvictedError.self) { _ = try await reader.next() }
        #expect(subject.subscriberCount == 0)
    }

    @Test("replay(k, buffering: .evicting(n)) on a sequence: the greeting while running and after the end")
    func replayOnASequence() async throws {
        try await withTimeout(seconds: 300) {
            let source = FedSource()
            let shared = source.replay(3, buffering: .evicting(2))
            let first = await SubscriberTask.join { shared.buffering(.unbounded).makeAsyncIterator() }
            #expect(await first.startIteration(of: source, yielding: 1, 2, 3, 4, 5, 6) == 1)
            #expect(await first.take(5) == [2, 3, 4, 5, 6])
            var late = shared.events().makeAsyncIterator()  // greeted with 4, 5, 6
            var stalled = shared.events().makeAsyncIterator()
            source.control.yield(7, 8)
            #expect(await first.take(2) == [7, 8])
            #expect(await late.next() == .element(4))
            for value in 5...8 { #expect(await late.next() == .element(value)) }
            source.control.yield(9, 10, 11)
            #expect(await first.take(3) == [9, 10, 11])
            #expect(await stalled.next() == .evicted(.hardLimit(2)), "five live ones")
            #expect(await late.next() == .evicted(.hardLimit(2)), "9, 10, 11: three live ones not taken")
            source.control.finish()
            #expect(await first.next() == nil)

            // After the end: the whole window, whatever the limit, then nil.
            var afterEnd = shared.buffering(.evicting(1)).makeAsyncIterator()
            var received: [Int] = []
            while let value = await afterEnd.next() { received.append(value) }
            #expect(received == [9, 10, 11])
        }
    }

    @Test("resetReplayCache() between joins: each subscriber keeps the greeting it joined with")
    func resetBetweenJoins() async {
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 3, buffering: .evicting(2))
        for value in 1...3 { subject.send(value) }
        var before = subject.makeAsyncIterator()
        var alsoBefore = subject.makeAsyncIterator()  // the same position: one shared copy
        #expect(await alsoBefore.next() == 1)
        subject.resetReplayCache()
        #expect(subject.replayCache.isEmpty)
        var afterReset = subject.makeAsyncIterator()
        subject.send(4)
        var afterFour = subject.makeAsyncIterator()
        subject.resetReplayCache()
        subject.send(5)
        var afterSecondReset = subject.makeAsyncIterator()
        subject.send(6)
        subject.finish()
        var received: [[Int]] = []
        for index in 0..<5 {
            var values: [Int] = []
            switch index {
            case 0: while let v = await before.next() { values.append(v) }
            case 1: while let v = await alsoBefore.next() { values.append(v) }
            case 2: while let v = await afterReset.next() { values.append(v) }
            case 3: while let v = await afterFour.next() { values.append(v) }
            default: while let v = await afterSecondReset.next() { values.append(v) }
            }
            received.append(values)
        }
        // `before` and `alsoBefore` each hold 4, 5, 6 live: three, past the limit of two.
        #expect(received[0] == [], "evicted: 4, 5 and 6 came after it joined, and it read none")
        #expect(received[1] == [2], "evicted after taking 2 (its batch)")
        #expect(received[2] == [], "evicted by 4, 5, 6 too")
        #expect(received[3] == [4, 5, 6], "greeted with 4, then 5 and 6 live")
        #expect(received[4] == [5, 6])
    }

    @Test("twenty subscribers joining at one position share the greeting: each reads it on its own")
    func manySubscribersOneGreeting() async {
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 4, buffering: .evicting(3))
        for value in 1...6 { subject.send(value) }
        let greeting = [3, 4, 5, 6]
        var early = (0..<20).map { _ in subject.events().makeAsyncIterator() }
        var readBefore: [[Int]] = []
        for index in early.indices {
            var values: [Int] = []
            for _ in 0..<index % 5 {
                if case .element(let v)? = await early[index].next() { values.append(v) }
            }
            readBefore.append(values)
            #expect(values == Array(greeting.prefix(index % 5)), "subscriber \(index)")
        }
        subject.send(7)
        subject.send(8)
        subject.send(9)  // three live: nobody evicted yet
        var late = (0..<10).map { _ in subject.events().makeAsyncIterator() }  // greeted with 6…9
        // The even ones catch up to 9; the odd ones read nothing more.
        for index in early.indices where index % 2 == 0 {
            while true {
                let event = await early[index].next()
                if event == .element(9) { break }
                guard case .element = event else {
                    Issue.record("subscriber \(index): \(String(describing: event))")
                    break
                }
            }
        }
        subject.send(10)  // the odd ones now hold four live ones
        subject.finish()
        for index in early.indices {
            let rest = await drain(&early[index])
            if index % 2 == 0 {
                #expect(rest == [.element(10)], "subscriber \(index)")
            } else {
                // What its iterator had taken ahead (a batch of one), then the eviction.
                let read = index % 5
                let taken = read % 2 == 1 ? [SharedEvent.element(greeting[read])] : []
                #expect(rest == taken + [.evicted(.hardLimit(3))], "subscriber \(index), read \(read)")
            }
        }
        for index in late.indices {
            #expect(await drain(&late[index]) == [6, 7, 8, 9, 10].map { .element($0) }, "late \(index)")
        }
        #expect(subject.subscriberCount == 0)
    }

    @Test("subscribers joining while another task sends: greeting and live elements meet with no gap or repeat")
    func joiningWhileSending() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1 + round % 4, buffering: .evicting(100_000))
                let total = 3_000
                let sender = Task {
                    for value in 1...total {
                        subject.send(value)
                        if value % 50 == 0 { await Task.yield() }
                    }
                    subject.finish()
                }
                var readers: [Task<[Int], Never>] = []
                for _ in 0..<8 {
                    await Task.yield()
                    let iterator = subject.makeAsyncIterator()
                    readers.append(
                        Task {
                            var iterator = iterator
                            var values: [Int] = []
                            while let value = await iterator.next() { values.append(value) }
                            return values
                        })
                }
                await sender.value
                for reader in readers {
                    let values = await reader.value
                    #expect(isConsecutive(values), "round \(round)")
                    #expect(values.isEmpty || values.last == total, "round \(round)")
                }
            }
        }
    }

    @Test("multicast cancel() with a greeting not yet read: each subscriber keeps exactly what it was owed")
    func multicastCancelKeepsTheGreeting() async throws {
        try await withTimeout(seconds: 300) {
            let source = FedSource()
            let multicast = source.multicast(replay: 3, buffering: .evicting(2))
            var witness = multicast.buffering(.unbounded).makeAsyncIterator()
            let connection = multicast.connect()
            await source.control.waitForStart(of: 0)
            source.control.yield(1, 2, 3, 4, 5)
            for value in 1...5 { #expect(await witness.next() == value) }
            var partly = multicast.events().makeAsyncIterator()
            var unread = multicast.events().makeAsyncIterator()
            #expect(await partly.next() == .element(3))  // takes 4 as well
            source.control.yield(6)
            #expect(await witness.next() == 6)
            connection.cancel()
            #expect(await drain(&partly) == [4, 5, 6].map { .element($0) })
            #expect(await drain(&unread) == [3, 4, 5, 6].map { .element($0) })

            // Joined while disconnected: the window, at once, then the next connection's.
            var between = multicast.events().makeAsyncIterator()
            for value in 4...6 { #expect(await between.next() == .element(value)) }
            let second = multicast.connect()
            await source.control.waitForStart(of: 1)
            source.control.yield(7)
            #expect(await between.next() == .element(7))
            #expect(await witness.next() == nil, "the witness belonged to the first connection")

            // Evicted before the cancel: it ends as evicted, with nothing of its greeting.
            var evicted = multicast.events().makeAsyncIterator()  // greeted with 5, 6, 7
            var evictedPlain = multicast.makeAsyncIterator()
            var witness2 = multicast.buffering(.unbounded).makeAsyncIterator()
            source.control.yield(8, 9, 10)
            for value in 5...10 { #expect(await witness2.next() == value, "replayed 5…7, then live") }
            second.cancel()
            #expect(await drain(&evicted) == [.evicted(.hardLimit(2))])
            #expect(await evictedPlain.next() == nil)
            #expect(multicast.subscriberCount == 1, "`witness2` has not read its end yet; `between` was evicted")
            #expect(await drain(&between) == [.evicted(.hardLimit(2))])
        }
    }

    @Test("an evicted subscriber's greeting is released at once, like the rest of its buffer")
    func evictedGreetingIsReleased() async {
        // Baseline: without a greeting, an evicted subscriber's elements are released at once.
        let plain = AsyncPassthroughSubject<Token, Never>(buffering: .evicting(1))
        var plainReader: SharedIterator<Token, Never>? = plain.makeAsyncIterator()
        var plainBoxes: [WeakBox] = []
        do {
            let tokens = [Token(1), Token(2)]
            plainBoxes = tokens.map(WeakBox.init)
            for token in tokens { plain.send(token) }
        }
        #expect(plainBoxes.allSatisfy { $0.token == nil }, "evicted: its buffer was released")
        #expect(plainReader != nil)
        plainReader = nil

        let subject = AsyncReplaySubject<Token, Never>(bufferSize: 2, buffering: .evicting(1))
        var boxes: [WeakBox] = []
        do {
            let tokens = [Token(1), Token(2)]
            boxes = tokens.map(WeakBox.init)
            for token in tokens { subject.send(token) }
        }
        var reader: SharedIterator<Token, Never>? = subject.makeAsyncIterator()  // greeted with 1, 2
        subject.resetReplayCache()  // only the greeting holds them now
        #expect(boxes.allSatisfy { $0.token != nil }, "owed to the subscriber")
        subject.send(Token(3))
        subject.send(Token(4))  // two live ones: evicted
        // "Its buffer is released at once": the greeting too, before the subscriber notices.
        #expect(boxes.allSatisfy { $0.token == nil }, "evicted: its greeting goes with its buffer")
        #expect(reader != nil)
        reader = nil
        #expect(boxes.allSatisfy { $0.token == nil }, "released with the subscriber")
    }

    @Test("an element that left the replay window and was read by every subscriber is released")
    func greetingCopyOutlivesItsUse() async {
        // Baseline: the same with `.unbounded`, which replays from the shared buffer.
        let baseline = AsyncReplaySubject<Token, Never>(bufferSize: 1, buffering: .unbounded)
        var baselineBox: WeakBox?
        do {
            let first = Token(1)
            baselineBox = WeakBox(first)
            baseline.send(first)
        }
        do {
            var reader = baseline.makeAsyncIterator()
            #expect(await reader.next()?.value == 1)
            baseline.send(Token(2))
            #expect(await reader.next()?.value == 2)
        }
        #expect(baselineBox?.token == nil, "out of the window, read, and its reader gone")

        let subject = AsyncReplaySubject<Token, Never>(bufferSize: 1, buffering: .evicting(4))
        var box: WeakBox?
        do {
            let first = Token(1)
            box = WeakBox(first)
            subject.send(first)
        }
        do {
            var reader = subject.makeAsyncIterator()  // greeted with 1
            #expect(await reader.next()?.value == 1)
            subject.send(Token(2))  // the window now holds 2 only
            #expect(await reader.next()?.value == 2)
        }  // the reader leaves
        #expect(subject.replayCache.map(\.value) == [2])
        #expect(subject.subscriberCount == 0)
        #expect(box?.token == nil, "out of the window, read, and its reader gone: nothing keeps it")
    }

    // MARK: - 3. Subject senders

    /// Starts one `send(waitingForRoom:)` per value, each once the ones before it have
    /// parked, so that the order in which they began waiting is known.
    private static func parkInOrder(
        _ values: [Int], storage: MulticastStorage<Int, Never>, alreadyParked: Int = 0,
        send: @escaping @Sendable (Int) async -> Void
    ) async throws -> [Task<Void, Never>] {
        var senders: [Task<Void, Never>] = []
        for (index, value) in values.enumerated() {
            senders.append(Task { await send(value) })
            try await waitUntil("sender of \(value) parked") {
                storage.producersWaitingForRoom == alreadyParked + index + 1
            }
        }
        return senders
    }

    @Test("cancelled waiting senders go in at once, in the order they were cancelled, ahead of those still waiting")
    func cancelledSendersGoAhead() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0x5E4D)
            for round in 0..<30 {
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 100, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)  // full
                let values = Array(1...8)
                let senders = try await Self.parkInOrder(values, storage: subject.storage) {
                    await subject.send(waitingForRoom: $0)
                }
                var cancelled: [Int] = []
                for index in values.indices.shuffled(using: &rng).prefix(Int(rng.next() % 5)) {
                    senders[index].cancel()
                    // It returns without anyone reading: it stopped waiting.
                    try await withTimeout("cancelled sender \(values[index])", seconds: 300) {
                        await senders[index].value
                    }
                    cancelled.append(values[index])
                    #expect(subject.replayCache == [0] + cancelled, "round \(round): in at once, past the bound")
                }
                let waiting = values.filter { !cancelled.contains($0) }
                let received = await reader.take(values.count + 1)
                #expect(received == [0] + cancelled + waiting, "round \(round)")
                for sender in senders { await sender.value }
                #expect(subject.replayCache == received)
                await reader.leave()
            }
        }
    }

    @Test(
        "a waiting sender goes in as soon as a read makes room; a later one waits behind; a synchronous send goes first"
    )
    func laterSenderWaitsBehind() async throws {
        try await withTimeout(seconds: 300) {
            // .bounded(4): room below 4; a read takes up to 2 extra elements.
            let subject = AsyncReplaySubject<Int, Never>(bufferSize: 100, buffering: .bounded(4))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            for value in 1...6 { subject.send(value) }  // holds 6, past the bound
            let first = try await Self.parkInOrder([7], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            #expect(await reader.next() == 1)  // takes 2 and 3: holds 3, room for one: 7 goes in
            await first[0].value
            #expect(subject.replayCache.last == 7, "the waiting sender went in with the read that made room")
            let second = try await Self.parkInOrder([8], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            subject.send(9)
            #expect(subject.replayCache.last == 9, "the synchronous send went in at once, ahead of 8")
            #expect(await reader.take(8) == [2, 3, 4, 5, 6, 7, 9, 8])
            await second[0].value
            await reader.leave()
        }
    }

    @Test(
        "after finish() or fail() waiting senders return at once; their elements are ignored",
        arguments: [false, true])
    func completionReleasesWaitingSenders(_ fails: Bool) async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            subject.send(0)
            let tasks = (1...6).map { value in Task { await subject.send(waitingForRoom: value) } }
            let (lines, input) = AsyncStream.makeStream(of: Int.self)
            for value in 10...12 { input.yield(value) }
            let contents = Task { await subject.send(contentsOf: lines) }
            try await waitUntil("all senders parked") { subject.storage.producersWaitingForRoom == 7 }
            if fails { subject.fail(.boom) } else { subject.finish() }
            for task in tasks { await task.value }
            await contents.value
            await subject.send(waitingForRoom: 99)  // after the end: returns at once
            var received: [Int] = []
            var failure: TestError?
            do throws(TestError) {
                while let value = try await reader.next() { received.append(value) }
            } catch {
                failure = error
            }
            #expect(received == [0])
            #expect(failure == (fails ? .boom : nil))
            input.finish()
        }
    }

    @Test(
        "the last bounded subscriber leaving releases the waiting senders in order; an earlier one leaving does not",
        arguments: 0..<3)
    func lastBoundedSubscriberLeaving(_ how: Int) async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncReplaySubject<Int, Never>(bufferSize: 100, buffering: .bounded(1))
            let first = await SubscriberTask.join { subject.makeAsyncIterator() }
            let second = await SubscriberTask.join { subject.buffering(.bounded(2)).makeAsyncIterator() }
            var lossy = subject.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            subject.send(0)
            subject.send(1)  // both full
            let senders = try await Self.parkInOrder(Array(2...7), storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            await first.leave()
            #expect(subject.replayCache == [0, 1], "the other is still full")
            switch how {
            case 0: await second.leave()
            case 1: await second.cancel()
            default:
                // It reads: room comes back two at a time, in order.
                #expect(await second.take(8) == Array(0...7))
                await second.leave()
            }
            for sender in senders { await sender.value }
            #expect(subject.replayCache == Array(0...7), "first in, first out")
            subject.finish()
            let summary = LagSummary(await drain(&lossy))
            #expect(summary.elements.isEmpty && summary.missed == 8)
        }
    }

    @Test("a lone reader answering into its own bounded subject never waits for itself, for bursts up to the bound")
    func echoLoopsWithBurstsUpToTheBound() async throws {
        try await withTimeout(seconds: 300) {
            for bound in 1...8 {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
                var echo = subject.makeAsyncIterator()
                // A bystander that does not count against the bound watches everything.
                let bystander = subject.buffering(.unbounded).makeAsyncIterator()
                let watching = Task {
                    var bystander = bystander
                    var values: [Int] = []
                    while let value = await bystander.next() { values.append(value) }
                    return values
                }
                for value in 0..<bound { subject.send(value) }  // a burst of exactly the bound
                var seen: [Int] = []
                while seen.count < 300, let value = await echo.next() {
                    seen.append(value)
                    await subject.send(waitingForRoom: value + bound)
                }
                subject.finish()
                #expect(seen == Array(0..<300), "bound \(bound)")
                let watched = await watching.value
                #expect(watched == Array(0..<300 + bound), "bound \(bound)")
            }
        }
    }

    @Test("an answering reader next to a second bounded reader: its answer waits for itself once the other was full")
    func echoNextToASecondBoundedReader() async throws {
        try await withTimeout(seconds: 300) {
            // .bounded(4): room while a subscriber holds at most 3, resume at 2; a read takes
            // up to 2 extra elements. A burst of 4 (the bound, not past it), no other sender.
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
            var echo = subject.makeAsyncIterator()
            var other = subject.makeAsyncIterator()  // reads whenever it likes
            for value in 0...3 { subject.send(value) }
            #expect(await echo.next() == 0)  // takes 0, 1, 2
            #expect(await other.next() == 0)  // takes 0, 1, 2
            await subject.send(waitingForRoom: 4)  // the answer to 0
            #expect(await echo.next() == 1)
            for value in 1...3 { #expect(await other.next() == value) }  // 3 takes 4 as well
            await subject.send(waitingForRoom: 5)  // the answer to 1
            #expect(await echo.next() == 2)
            await subject.send(waitingForRoom: 6)  // the answer to 2
            #expect(await echo.next() == 3)  // takes 3, 4, 5: it holds 6
            await subject.send(waitingForRoom: 7)  // the answer to 3
            #expect(await echo.next() == 4)
            await subject.send(waitingForRoom: 8)  // the answer to 4
            #expect(await echo.next() == 5)
            // The echo holds 6, 7, 8 (room for one more); the other holds 5…8: full.
            let answered = LockedFlag()
            let answer = Task {
                await subject.send(waitingForRoom: 9)  // the answer to 5
                answered.set()
            }
            try await waitUntil("the answer waits for room") { subject.storage.producersWaitingForRoom == 1 }
            // The other reads everything it holds and waits for more.
            let otherIterator = SubscriberBox(other)
            for value in 4...8 { #expect(await otherIterator.next() == value) }  // 4 from its batch
            // Subjects guide: "every number it reads makes room for its answer and it never waits
            // for itself". The other reader made room, so the answer went in, although the echo
            // (holding 3 of 4) is above half the bound: the echo did not have to read first.
            await answer.value
            #expect(answered.isSet)
            #expect(await otherIterator.next() == 9)
            #expect(await echo.next() == 6)  // takes 6, 7, 8
            subject.finish()
        }
    }

    @Test("ping-pong between two .bounded(1) subjects, each reader answering into the other: no deadlock")
    func pingPong() async throws {
        try await withTimeout(seconds: 300) {
            let ping = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let pong = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let pingReader = ping.makeAsyncIterator()
            let pongReader = pong.makeAsyncIterator()
            let a = Task {
                var reader = pingReader
                var last = -1
                while let value = await reader.next() {
                    last = value
                    if value >= 2_000 { pong.finish() } else { await pong.send(waitingForRoom: value + 1) }
                }
                return last
            }
            let b = Task {
                var reader = pongReader
                while let value = await reader.next() {
                    if value >= 2_000 { break }
                    await ping.send(waitingForRoom: value + 1)
                }
                ping.finish()
            }
            ping.send(0)
            await b.value
            #expect(await a.value == 2_000)
        }
    }

    @Test("waiting senders from many tasks, a reader, cancellations and finish() racing: nothing twice, order kept")
    func sendersRacingEverything() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0xFEED)
            for round in 0..<40 {
                let bound = 1 + Int(rng.next() % 3)
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
                let iterator = subject.makeAsyncIterator()
                let reader = Task {
                    var iterator = iterator
                    var values: [Int] = []
                    while let value = await iterator.next() {
                        values.append(value)
                        if values.count % 5 == 0 { await Task.yield() }
                    }
                    return values
                }
                let cancelledSenders = Set((0..<6).filter { _ in rng.next() % 3 == 0 })
                let attempted = LockedLog<Int>()
                let senders = (0..<6).map { s in
                    Task {
                        for i in 0..<60 {
                            attempted.append(s * senderStride + i)
                            await subject.send(waitingForRoom: s * senderStride + i)
                        }
                    }
                }
                let yields = Int(rng.next() % 200)
                for _ in 0..<yields { await Task.yield() }
                for s in cancelledSenders { senders[s].cancel() }
                for _ in 0..<Int(rng.next() % 100) { await Task.yield() }
                let finishedEarly = rng.next() % 2 == 0
                if finishedEarly { subject.finish() }
                for sender in senders { await sender.value }
                subject.finish()
                let received = await reader.value
                #expect(Set(received).count == received.count, "round \(round): nothing twice")
                #expect(isIncreasingPerSender(received), "round \(round)")
                #expect(Set(received).isSubset(of: Set(attempted.values)))
                if !finishedEarly {
                    #expect(received.count == 360, "round \(round): nothing lost without an early finish")
                }
            }
        }
    }

    @Test("send(contentsOf:) ends when the subject completes while its sequence is idle: the sequence is cancelled")
    func contentsOfEndsWithTheSubject() async throws {
        try await withTimeout(seconds: 300) {
            for kind in 0..<3 {
                let source = IdleSource()
                let sendAll: @Sendable () async -> Void
                let complete: @Sendable () -> Void
                switch kind {
                case 0:
                    let subject = AsyncPassthroughSubject<Int, Never>()
                    sendAll = { await subject.send(contentsOf: source) }
                    complete = { subject.finish() }
                case 1:
                    let subject = AsyncCurrentValueSubject<Int, TestError>(0)
                    sendAll = { await subject.send(contentsOf: source) }
                    complete = { subject.fail(.boom) }
                default:
                    let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1, buffering: .bounded(1))
                    sendAll = { await subject.send(contentsOf: source) }
                    complete = { subject.finish() }
                }
                let sending = Task { await sendAll() }
                source.input.yield(1)
                _ = await source.enteredNext.next()
                _ = await source.enteredNext.next()  // idle in its second next()
                complete()
                try await withTimeout("send(contentsOf:) after completion", seconds: 300) { await sending.value }
                #expect(try await source.ends.waitForTermination() == [.cancelled], "kind \(kind)")
                #expect(source.iteratorCount == 1)
            }
        }
    }

    @Test("send(contentsOf:) on a completed subject returns at once without making an iterator")
    func contentsOfOnACompletedSubject() async throws {
        let source = IdleSource()
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 2)
        subject.send(1)
        subject.finish()
        await subject.send(contentsOf: source)
        #expect(source.iteratorCount == 0)
        #expect(source.ends.all.isEmpty, "its stream was not touched")
        #expect(subject.replayCache == [1])
        source.input.finish()
    }

    @Test("send(contentsOf:) from the main actor, ended by finish() from another task while its sequence is idle")
    @MainActor
    func contentsOfOnTheMainActor() async throws {
        let source = IdleSource()
        let subject = AsyncPassthroughSubject<Int, Never>()
        var reader = subject.makeAsyncIterator()
        let finisher = Task.detached {
            _ = await source.enteredNext.next()
            source.input.yield(1)
            _ = await source.enteredNext.next()
            subject.finish()
        }
        await subject.send(contentsOf: source)
        await finisher.value
        #expect(await reader.next() == 1)
        #expect(await reader.next() == nil)
        #expect(try await source.ends.waitForTermination() == [.cancelled])
    }

    @Test("many send(contentsOf:) calls idle on their sequences all return when the subject finishes")
    func manyIdleContentsOf() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let sources = (0..<20).map { _ in IdleSource() }
            let calls = sources.map { source in Task { await subject.send(contentsOf: source) } }
            for source in sources { _ = await source.enteredNext.next() }
            sources[0].input.yield(1)
            sources[1].input.yield(2)  // one of them waits for room
            #expect(await reader.next() != nil)
            subject.finish()
            for call in calls { await call.value }
            for source in sources {
                // A call whose element waited for room when the subject finished, or that the
                // finish cancelled between two pulls, asks its sequence once more, cancelled.
                let ends = try await source.ends.waitForTermination()
                #expect(ends == [.cancelled])
            }
            _ = await reader.next()
            #expect(await reader.next() == nil)
        }
    }

    @Test("a send(contentsOf:) feeder among waiting senders: each source keeps its order, everyone gets in")
    func contentsOfAmongWaitingSenders() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<20 {
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1_000, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)
                let feeder = Task { await subject.send(contentsOf: (100..<110).async) }
                try await waitUntil("the feeder parked") { subject.storage.producersWaitingForRoom == 1 }
                let senders = try await Self.parkInOrder([1, 2, 3], storage: subject.storage, alreadyParked: 1) {
                    await subject.send(waitingForRoom: $0)
                }
                let received = await reader.take(14)
                await feeder.value
                for sender in senders { await sender.value }
                #expect(Array(received.prefix(3)) == [0, 100, 1], "round \(round): parked order")
                #expect(received.filter { $0 < 100 } == [0, 1, 2, 3], "round \(round)")
                #expect(received.filter { $0 >= 100 } == Array(100..<110), "round \(round)")
                await reader.leave()
            }
        }
    }

    // MARK: - More of each

    @Test("several readers of one lossy policy (one lane, shared cells), reading concurrently: each adds up")
    func sameLaneReadersConcurrently() async throws {
        try await withTimeout(seconds: 300) {
            for policy in [SharedBufferingPolicy.bufferingOldest(2), .bufferingNewest(1), .bufferingOldest(1)] {
                for round in 0..<4 {
                    let subject = AsyncPassthroughSubject<Int, Never>()
                    let readers = (0..<4).map { index in
                        let iterator = subject.events(buffering: policy).makeAsyncIterator()
                        return Task {
                            var iterator = iterator
                            var events: [SharedEvent<Int>] = []
                            while let event = await iterator.next() {
                                events.append(event)
                                if events.count % (index + 2) == 0 { await Task.yield() }
                            }
                            return events
                        }
                    }
                    await sendConcurrently(senders: 3, perSender: 200) { value, _ in subject.send(value) }
                    subject.finish()
                    for reader in readers {
                        let summary = LagSummary(await reader.value)
                        #expect(summary.elements.count + summary.missed == 600, "\(policy), round \(round)")
                        #expect(isIncreasingPerSender(summary.elements))
                    }
                }
            }
        }
    }

    @Test("a lag reader waiting in next() on another actor returns nil at once when its task is cancelled")
    func cancelWaitingLagReaderOnAnActor() async throws {
        try await withTimeout(seconds: 300) {
            for policy in lossyPolicies {
                let subject = AsyncPassthroughSubject<Int, Never>()
                let actor = EventReader()
                let joined = Signal<Void>()
                let reading = Task { await actor.readAll(subject.events(buffering: policy), joined: joined) }
                _ = await joined.next()
                subject.send(1)
                try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
                reading.cancel()
                let events = await reading.value
                switch policy {
                case .bufferingNewest(0), .bufferingOldest(0):
                    // It may have missed 1 if it was not waiting yet when 1 was sent.
                    #expect(events == [.element(1)] || events == [.missed(1)], "\(policy): \(events)")
                default:
                    #expect(events == [.element(1)], "\(policy)")
                }
                #expect(subject.subscriberCount == 0)
            }
        }
    }

    @Test("evicting readers joining a replay subject while it is fed: lossless up to the eviction, no seam gap")
    func evictingReadersWhileSending() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0xE71C)
            var evictions = 0
            var completions = 0
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 5, buffering: .evicting(3))
                let total = 2_000
                let sender = Task {
                    for value in 1...total {
                        subject.send(value)
                        if value % 16 == 0 { await Task.yield() }
                    }
                    subject.finish()
                }
                var readers: [Task<[SharedEvent<Int>], Never>] = []
                for index in 0..<8 {
                    for _ in 0..<Int(rng.next() % 30) { await Task.yield() }
                    let iterator = subject.events().makeAsyncIterator()
                    let pace = 1 + index % 4
                    readers.append(
                        Task {
                            var iterator = iterator
                            var events: [SharedEvent<Int>] = []
                            while let event = await iterator.next() {
                                events.append(event)
                                if events.count % pace == 0 { await Task.yield() }
                            }
                            return events
                        })
                }
                await sender.value
                for reader in readers {
                    let events = await reader.value
                    let summary = LagSummary(events)
                    #expect(summary.missedCounts.isEmpty, "round \(round): an evicting reader misses nothing")
                    #expect(isConsecutive(summary.elements), "round \(round): \(summary.elements.prefix(20))")
                    if summary.evicted {
                        evictions += 1
                        #expect(events.last == .evicted(.hardLimit(3)))
                    } else {
                        completions += 1
                        #expect(summary.elements.last == total, "round \(round)")
                    }
                }
            }
            #expect(evictions + completions == 80)
            #expect(evictions > 0, "the runs reached evictions")
        }
    }

    @Test("replay(2, buffering: .evicting(1)) of an AsyncThrowingStream: an evicted plain iteration throws")
    func replayOfAThrowingStreamEvicts() async throws {
        try await withTimeout(seconds: 300) { () async throws -> Void in
            let (updates, input) = AsyncThrowingStream.makeStream(of: Int.self)
            let shared = updates.replay(2, buffering: .evicting(1))
            var driver = shared.buffering(.unbounded).makeAsyncIterator()
            input.yield(1)
            #expect(try await driver.next() == 1)  // this wait started the upstream
            input.yield(2)
            input.yield(3)
            #expect(try await driver.next() == 2)
            #expect(try await driver.next() == 3)
            var greeted = shared.makeAsyncIterator()  // greeted with 2, 3
            var stalled = shared.makeAsyncIterator()
            #expect(try await greeted.next() == 2)
            #expect(try await greeted.next() == 3)
            input.yield(4)
            #expect(try await driver.next() == 4)
            #expect(try await greeted.next() == 4, "one live element: the limit")
            input.yield(5)
            #expect(try await driver.next() == 5)
            await #expect(throws: SubscriberEvictedError.self) {
                _ = try await stalled.next()  // 4 and 5 came after it joined
            }
            #expect(shared.subscriberCount == 2)
            input.finish()
            #expect(try await greeted.next() == 5)
            #expect(try await greeted.next() == nil)
        }
    }

    @Test("waiting senders go in first in, first out whatever their tasks' priorities")
    func fifoWhateverThePriorities() async throws {
        try await withTimeout(seconds: 300) {
            let priorities: [TaskPriority] = [.background, .high, .low, .userInitiated, .utility, .medium]
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 100, buffering: .bounded(3))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                for value in 0...2 { subject.send(value) }  // full
                var senders: [Task<Void, Never>] = []
                for (index, value) in (3...14).enumerated() {
                    let priority = priorities[(index + round) % priorities.count]
                    senders.append(Task(priority: priority) { await subject.send(waitingForRoom: value) })
                    try await waitUntil("sender of \(value) parked") {
                        subject.storage.producersWaitingForRoom == index + 1
                    }
                }
                #expect(await reader.take(15) == Array(0...14), "round \(round)")
                for sender in senders { await sender.value }
                #expect(subject.replayCache == Array(0...14))
                await reader.leave()
            }
        }
    }

    @Test("a current-value subject's waiting senders after finish(): ignored, and `value` stays the last sent")
    func currentValueWaitingSendersAfterFinish() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()  // holds the current value: full
            let senders = try await Self.parkInOrder([1, 2, 3], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            #expect(subject.value == 0, "nothing went in")
            subject.finish()
            for sender in senders { await sender.value }
            #expect(subject.value == 0)
            #expect(await reader.next() == 0)
            #expect(await reader.next() == nil)
        }
    }

    @Test("what an evicting subscriber keeps alive: its greeting, on top of the n live elements it may hold")
    func evictingSubscriberMemoryWithAGreeting() async {
        let subject = AsyncReplaySubject<Token, Never>(bufferSize: 4, buffering: .evicting(1))
        var boxes: [WeakBox] = []
        do {
            let tokens = (1...4).map(Token.init)
            boxes = tokens.map(WeakBox.init)
            for token in tokens { subject.send(token) }
        }
        var reader = subject.makeAsyncIterator()  // greeted with 1…4
        subject.resetReplayCache()  // the cache no longer holds them
        do {
            let live = Token(5)
            boxes.append(WeakBox(live))
            subject.send(live)  // one live element: the limit
        }
        let alive = boxes.filter { $0.token != nil }.count
        #expect(alive == 5, "the greeting (4) and the live element (1) are all owed")
        // The Serving clients guide's memory bound: `n`, plus a greeting not read yet.
        var received: [Int] = []
        subject.finish()
        while let token = await reader.next() { received.append(token.value) }
        #expect(received == [1, 2, 3, 4, 5])
    }

    @Test("send(waitingForRoom:) returns at once with only evicting, dropping and unbounded subscribers")
    func waitingForRoomWithoutBoundedSubscribers() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncReplaySubject<Int, Never>(bufferSize: 8, buffering: .evicting(1))
            for value in 1...8 { subject.send(value) }
            var greeted = subject.makeAsyncIterator()  // a greeting of 8: past its limit of 1
            var newest = subject.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            var unbounded = subject.buffering(.unbounded).makeAsyncIterator()
            for value in 9...20 { await subject.send(waitingForRoom: value) }
            #expect(subject.replayCache == Array(13...20))
            subject.finish()
            #expect(await greeted.next() == nil, "evicted by the live ones, not by the greeting")
            #expect(await newest.next() == .missed(12))
            var received: [Int] = []
            while let value = await unbounded.next() { received.append(value) }
            #expect(received == Array(1...20))
        }
    }

    @Test("released senders' elements reach a subscriber waiting in next() in their order, by a read or a leave")
    func releasedElementsReachWaitingSubscribers() async throws {
        try await withTimeout(seconds: 300) {
            for leaves in [false, true] {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
                let full = await SubscriberTask.join { subject.makeAsyncIterator() }
                let watching = (0..<3).map { _ in
                    let iterator = subject.buffering(.unbounded).makeAsyncIterator()
                    return Task {
                        var iterator = iterator
                        var values: [Int] = []
                        while let value = await iterator.next() { values.append(value) }
                        return values
                    }
                }
                subject.send(0)  // `full` is full; the watchers take 0 and wait again
                try await waitUntil("the watchers wait") { subject.storage.waitingCount == 3 }
                let senders = try await Self.parkInOrder(Array(1...6), storage: subject.storage) {
                    await subject.send(waitingForRoom: $0)
                }
                if leaves {
                    await full.leave()
                } else {
                    #expect(await full.take(7) == Array(0...6))
                }
                for sender in senders { await sender.value }
                subject.finish()
                for task in watching {
                    #expect(await task.value == Array(0...6), "leaves: \(leaves)")
                }
                if !leaves { #expect(await full.next() == nil) }
            }
        }
    }
}
