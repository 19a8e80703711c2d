// `.bufferingNewest` subscribers drop lazily: a send moves no histogram cell, and a stalled
// subscriber learns what it missed when it reads (tokio's `Lagged(n)`, then the oldest
// element retained). The machine gathers a stale cell at the window start only when a member
// reads or leaves, or once the cell is far behind (`Lane.settleDistance`: the limit plus at
// least 64). The lag-reporting suite sends about 50 elements a run, never that far; these
// tests stall subscribers for hundreds of elements, several settle distances, through the
// public faces, and check what each one reads (`events`), what it holds meanwhile
// (`backlog`, never more than its limit), the replay cache, and what the shared buffer
// keeps.

import Testing

@testable import AsyncMulticast

@Suite("Lazy dropping lanes: subscribers stalled far behind", .timeLimit(.minutes(5)))
struct LazyDroppingLaneTests {
    /// Reads every event `iterator` has until the end.
    static func drain(_ iterator: inout SharedEventIterator<Int, Never>) async -> [SharedEvent<Int>] {
        var events: [SharedEvent<Int>] = []
        while let event = await iterator.next() { events.append(event) }
        return events
    }

    @Test(
        "a stalled .bufferingNewest(3) subscriber holds 3 however long it stalls, then reads .missed(n) and the last 3",
        arguments: [3, 64, 67, 300, 1_000])
    func stalledSubscriberHoldsItsLimit(sent: Int) async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(3))
        let stalled = subject.subscribe()
        var reader = subject.events().makeAsyncIterator()
        for value in 0..<sent {
            subject.send(value)
            #expect(await reader.next() == .element(value))
            #expect(
                stalled.backlog
                    == SubscriberBacklog(count: Swift.min(value + 1, 3), highWaterMark: Swift.min(value + 1, 3)))
            #expect(subject.storage.bufferedCount <= 3)
        }
        #expect(subject.storage.invariantViolation == nil)
        subject.finish()
        var events = stalled.events.makeAsyncIterator()
        let expected: [SharedEvent<Int>] =
            (sent > 3 ? [.missed(sent - 3)] : []) + (sent - 3..<sent).map { .element($0) }
        #expect(await Self.drain(&events) == expected)
    }

    @Test("a stalled subscriber that reads now and then learns each gap exactly, across several settles")
    func readsNowAndThen() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(2))
        var slow = subject.events().makeAsyncIterator()
        var next = 0
        // Bursts shorter and longer than the settle distance (66 for a limit of 2).
        for burst in [1, 2, 3, 65, 66, 67, 130, 200, 5] {
            for _ in 0..<burst {
                subject.send(next)
                next += 1
            }
            let missed = burst - Swift.min(burst, 2)
            if missed > 0 { #expect(await slow.next() == .missed(missed), "burst \(burst)") }
            // The oldest retained, then the one after it: what it holds is read.
            for value in next - Swift.min(burst, 2)..<next {
                #expect(await slow.next() == .element(value), "burst \(burst)")
            }
            #expect(subject.storage.invariantViolation == nil)
        }
        subject.finish()
        #expect(await slow.next() == nil)
    }

    @Test(
        "several limits on one subject, beside lossless subscribers: each reads what its own queue would",
        arguments: [0, 2, 5, 100])
    func severalLanesAgreeWithTheirOwnQueues(replay: Int) async {
        let policies: [SharedBufferingPolicy] = [
            .bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(2), .bufferingNewest(5),
            .bufferingOldest(0), .bufferingOldest(2), .unbounded, .bounded(1_000),
        ]
        let subject = AsyncReplaySubject<Int, Never>(replay: replay, buffering: .bufferingNewest(2))
        var subscriptions: [SharedSubscription<Int, Never>?] = []
        var iterators: [SharedEventIterator<Int, Never>?] = []
        var references: [LagReference] = []
        var sent: [Int] = []
        var rng = LCG(seed: UInt64(replay))
        func join(_ policy: SharedBufferingPolicy) {
            let subscription = subject.subscribe(buffering: policy)
            subscriptions.append(subscription)
            iterators.append(subscription.events.makeAsyncIterator())
            var reference = LagReference(policy: policy)
            reference.queue = policy.replayed(sent, replay: replay).map { (0, $0) }
            references.append(reference)
        }
        for policy in policies { join(policy) }
        for round in 0..<40 {
            let burst = [1, 10, 66, 70, 140][Int(rng.next() % 5)]
            for _ in 0..<burst {
                let value = sent.count
                subject.send(value)
                sent.append(value)
                for k in references.indices where iterators[k] != nil { references[k].receive(value) }
            }
            // Some subscribers read a few events; the others stay stalled.
            for k in references.indices where iterators[k] != nil && rng.next() % 3 == 0 {
                for _ in 0..<Int(rng.next() % 4) where references[k].hasEventReady {
                    let expected = references[k].nextEvent()
                    let event = await iterators[k]!.next()
                    #expect(event == expected, "round \(round), #\(k) (\(references[k].policy))")
                }
            }
            // What each dropping subscriber holds is what its own queue holds.
            var allDropNewest = true
            var largestKeep = 0
            for k in references.indices where iterators[k] != nil {
                guard case .bufferingNewest(let keep) = references[k].policy else {
                    allDropNewest = false
                    continue
                }
                largestKeep = Swift.max(largestKeep, keep)
                // Its iterator's batch is handed over, not held; the policy may still drop
                // from it, so what it holds is its live part.
                let backlog = subscriptions[k]!.backlog
                let inBatch = iterators[k]!.liveHeldCount(tail: subject.storage.tailPublished)
                #expect(
                    backlog.map { $0.count + inBatch } == references[k].queue.count,
                    "round \(round), #\(k) (\(references[k].policy))")
                #expect((backlog?.highWaterMark ?? 0) <= keep, "round \(round), #\(k) (\(references[k].policy))")
            }
            #expect(subject.replayCache == Array(sent.suffix(replay)))
            if allDropNewest {
                #expect(subject.storage.bufferedCount <= Swift.max(Swift.min(replay, sent.count), largestKeep))
            }
            #expect(subject.storage.invariantViolation == nil)
            // Now and then one leaves (stale or not), and a new one joins, stalled cells or not.
            switch rng.next() % 4 {
            case 0:
                let live = references.indices.filter { iterators[$0] != nil }
                if let k = live.randomElement(using: &rng) {
                    iterators[k] = nil
                    subscriptions[k] = nil
                    references[k].ended = true
                }
            case 1:
                join(policies[Int(rng.next() % UInt64(policies.count))])
            default:
                break
            }
        }
        subject.finish()
        for k in references.indices where iterators[k] != nil {
            let expected = references[k].remainingEvents(endingWith: nil)
            var iterator = iterators[k]!
            #expect(await Self.drain(&iterator) == expected.events, "#\(k) (\(references[k].policy))")
        }
    }

    @Test("the last stalled subscriber leaving removes its lane; one joining again starts afresh")
    func lastStalledSubscriberLeavesAndOneRejoins() async {
        let subject = AsyncReplaySubject<Int, Never>(replay: 1, buffering: .bufferingNewest(3))
        var stalled: SharedSubscription<Int, Never>? = subject.subscribe()
        var other: SharedSubscription<Int, Never>? = subject.subscribe(buffering: .bufferingNewest(5))
        for value in 0..<200 { subject.send(value) }
        #expect(stalled?.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        #expect(other?.backlog == SubscriberBacklog(count: 5, highWaterMark: 5))
        stalled = nil
        #expect(subject.storage.invariantViolation == nil)
        for value in 200..<300 { subject.send(value) }
        other = nil
        #expect(subject.subscriberCount == 0)
        #expect(subject.storage.bufferedCount == 1, "the replay window only")
        #expect(subject.storage.invariantViolation == nil)
        let again = subject.subscribe()
        for value in 300..<400 { subject.send(value) }
        #expect(again.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        subject.finish()
        var events = again.events.makeAsyncIterator()
        // It joined holding the replayed 299: 98 of the 101 it was to read were dropped.
        #expect(await Self.drain(&events) == [.missed(98), .element(397), .element(398), .element(399)])
        _ = stalled
        _ = other
    }

    @Test("a multicast connection cancelled while subscribers are far behind: each keeps its last n and its gap")
    func multicastCancelledWhileFarBehind() async {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let multicast = stream.multicast(replay: 0, buffering: .bufferingNewest(3))
        let stalled = multicast.subscribe()
        let stalledFive = multicast.subscribe(buffering: .bufferingNewest(5))
        let stalledZero = multicast.subscribe(buffering: .bufferingOldest(0))
        let plain = multicast.subscribe(buffering: .bufferingNewest(4))
        var reader = multicast.subscribe(buffering: .unbounded).makeAsyncIterator()
        let connection = multicast.connect()
        for value in 0..<300 { continuation.yield(value) }
        // The reader has read all 300: every one of them is in.
        for value in 0..<300 { #expect(await reader.next() == value) }
        #expect(stalled.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        #expect(stalledFive.backlog == SubscriberBacklog(count: 5, highWaterMark: 5))
        connection.cancel()
        continuation.finish()
        var events = stalled.events.makeAsyncIterator()
        #expect(await Self.drain(&events) == [.missed(297), .element(297), .element(298), .element(299)])
        var five = stalledFive.events.makeAsyncIterator()
        #expect(await Self.drain(&five) == [.missed(295)] + (295..<300).map { .element($0) })
        var zero = stalledZero.events.makeAsyncIterator()
        #expect(await Self.drain(&zero) == [.missed(300)])
        var values: [Int] = []
        for await value in plain { values.append(value) }
        #expect(values == [296, 297, 298, 299])
    }

    @Test("concurrent senders and readers: every element is read or counted missed once, in each sender's order")
    func concurrentSendersAndReaders() async {
        let perSender = 3_000
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(3))
        let policies: [SharedBufferingPolicy] = [
            .bufferingNewest(3), .bufferingNewest(1), .bufferingNewest(70), .bufferingOldest(0), .unbounded,
        ]
        let subscriptions = policies.map { subject.subscribe(buffering: $0) }
        let stalled = subject.subscribe(buffering: .bufferingNewest(2))
        let readers = subscriptions.map { subscription in
            Task {
                var events: [SharedEvent<Int>] = []
                for await event in subscription.events {
                    events.append(event)
                    if events.count % 97 == 0 { await Task.yield() }
                }
                return events
            }
        }
        let sampler = Task {
            var largest = 0
            for _ in 0..<2_000 {
                largest = Swift.max(largest, stalled.backlog?.highWaterMark ?? 0)
                await Task.yield()
            }
            return largest
        }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<2 {
                group.addTask {
                    for i in 0..<perSender {
                        subject.send(sender * 1_000_000 + i)
                        if i % 50 == 0 { await Task.yield() }
                    }
                }
            }
        }
        subject.finish()
        #expect(await sampler.value <= 2)
        #expect(stalled.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        for (k, reader) in readers.enumerated() {
            let summary = LagSummary(await reader.value)
            let (received, missed) = (summary.elements, summary.missed)
            #expect(!summary.evicted, "\(policies[k]) evicted")
            #expect(received.count + missed == 2 * perSender, "\(policies[k])")
            for sender in 0..<2 {
                let own = received.filter { $0 / 1_000_000 == sender }
                #expect(own == own.sorted(), "\(policies[k]) read sender \(sender)'s values out of order")
            }
            if policies[k] == .unbounded { #expect(missed == 0 && received.count == 2 * perSender) }
        }
        #expect(subject.storage.invariantViolation == nil)
    }
}
