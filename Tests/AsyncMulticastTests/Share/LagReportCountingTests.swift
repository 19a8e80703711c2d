// Lag reports (`events(buffering:)`) follow tokio's `Lagged(n)`: a `.missed` takes nothing, a
// lossy subscriber never holds more than its limit, and the counts add up exactly, on every
// face, while several tasks send, read, cancel and complete at once.
//
// Every assertion is on public behaviour. A few gates read the storage (`@testable`) to know
// that a reader waits in `next()`: the public API has no way to tell. No gate decides an
// outcome.

import Testing

@testable import AsyncMulticast

// Serialized, with hang guards of minutes: these races are CPU-heavy, and under the thread
// sanitizer, next to the rest of the suite on two cores, a run that takes 6 s alone took
// more than 30 s. A guard only decides that something hung.
@Suite("Lag reports: the counts add up under concurrency", .serialized, .timeLimit(.minutes(15)))
struct LagReportCountingTests {
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
                    summary.expectEveryElementAccountedFor(360, "\(policy), round \(round)")
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
                // Calls made once the task was cancelled return what its iterator had taken
                // ahead (at most n / 2 under .bufferingNewest(n), a gap among them; none under
                // .bufferingOldest), then nil.
                let takenAhead: Int
                if case .bufferingNewest(let n) = policy { takenAhead = n / 2 } else { takenAhead = 0 }
                let values = afterCancel.values
                #expect(values.isEmpty || values.last! == nil, "\(policy), round \(round): \(values)")
                #expect(values.dropLast().allSatisfy { $0 != nil }, "it stops at the first nil")
                #expect(
                    values.dropLast().filter { if case .element = $0 { true } else { false } }.count <= takenAhead,
                    "\(policy), round \(round): \(values)")
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
                expected += (Swift.max(1, 7 - n)..<7).map { .element($0) }
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
            let subject = AsyncReplaySubject<Int, Never>(replay: 5)
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
            let events = await reader.readAll()
            await sending.value
            let summary = LagSummary(events)
            summary.expectEveryElementAccountedFor(600, "\(policy)")
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
                summary.expectEveryElementAccountedFor(600, "\(policy)")
            }
        }
    }

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
                        summary.expectEveryElementAccountedFor(600, "\(policy), round \(round)")
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

    @Test("feeders into an unbounded subject, a lossy events() reader, finished at random: the counts add up")
    func lossyReaderOfFeeders() async throws {
        let stride = 100_000
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 43)
            var missing: [String] = []
            for round in 0..<30 {
                let subject = AsyncPassthroughSubject<Int, Never>()
                let lossless = await SubscriberTask.join { subject.makeAsyncIterator() }
                let lossyJoined = Signal<Void>()
                let lossy = Task {
                    var iterator = subject.events(buffering: .bufferingNewest(3)).makeAsyncIterator()
                    lossyJoined.send(())
                    var events: [SharedEvent<Int>] = []
                    while let event = await iterator.next() {
                        events.append(event)
                        if events.count % 3 == 0 { await Task.yield() }
                    }
                    return events
                }
                _ = await lossyJoined.next()
                let streams = (1...3).map { source in HeldStream(prefilled: (0..<300).map { source * stride + $0 }) }
                let feeders = streams.map { held in
                    let sequence = held.counted
                    return Task { await subject.send(contentsOf: sequence) }
                }
                let k = Int.random(in: 1...900, using: &generator)
                var all = await lossless.take(k)
                subject.finish()
                for feeder in feeders { await feeder.value }
                all += await lossless.drain().elements
                let summary = LagSummary(await lossy.value)
                let (elements, missed) = (summary.elements, summary.missed)
                #expect(!summary.evicted, "round \(round): no eviction with a dropping policy")
                #expect(elements.count + missed == all.count, "round \(round): \(elements.count) + \(missed)")
                #expect(isIncreasingPerSender(all, stride: stride))
                // What the lossy reader got is a subsequence of what everyone got.
                var cursor = all.makeIterator()
                #expect(
                    elements.allSatisfy { value in
                        while let next = cursor.next() { if next == value { return true } }
                        return false
                    }, "round \(round)")
                for (index, held) in streams.enumerated() where held.ends.all != [.cancelled] {
                    // A feeder whose call came after the completion returns at once without
                    // iterating (documented), as in manyFeedersBridgedWithEcho.
                    let neverIterated =
                        held.ends.all.isEmpty && held.countedPulls == 0 && !all.contains { $0 / stride == index + 1 }
                    if !neverIterated {
                        missing.append(
                            "round \(round), feeder \(index): \(held.countedPulls) pulls, ends \(held.ends.all)")
                    }
                }
            }
            // Once marked an intermittent known issue with manyFeedersBridgedWithEcho: under
            // load, a feeder's task can start after the completion, and such a feeder never
            // pulls (see that test).
            #expect(missing.isEmpty, "feeders whose held stream never saw .cancelled: \(missing)")
        }
    }
}
