// share(by:), checked from outside against its documented contract: what a joiner receives
// while the router is held (with a key's replay), how far stalled lossless subscribers of two
// keys let the upstream run, what the other subscribers get when the one holding the router
// leaves, prompt cancellation of a subscriber waiting while the router is held, many keys, and
// a router restarted many times. The order comes from gates on observable state (what the
// upstream produced, the router parked in a key, the upstream task parked in the hub).

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics: the documented contract", .timeLimit(.minutes(2)))
struct SharedTopicsContractTests {
    /// Reads `subscription` in a task of its own into `log`.
    func reader(_ subscription: SharedSubscription<Int, Never>, into log: LockedLog<Int>) -> Task<Void, Never> {
        Task { for await n in subscription { log.append(n) } }
    }

    @Test(
        "a joiner with replay of the key holding the router gets the key's replay, then the two on their way, none twice"
    )
    func replayJoinerOfTheHeldKey() async throws {
        let fed = FedTopics(replay: 1)
        let slow = fed.topics.subscribe(to: 1, buffering: .bounded(1))
        // 1 fills `slow` (and is key 1's replay); 3 is in the router's hand; 5 in its buffer.
        for n in [1, 3, 5, 7, 9] { fed.feed.yield(n) }
        try await fed.waitUntilHeld(after: [1, 3, 5], routerIn: 1)
        let late = fed.topics.subscribe(to: 1)
        let received = LockedLog<Int>()
        let lateReader = self.reader(late, into: received)
        fed.feed.yield(11)
        let slowReader = Task { for await _ in slow {} }
        try await waitUntil("11") { received.values.contains(11) }
        #expect(received.values == [1, 3, 5, 7, 9, 11], "the replay (1), then 3 and 5 on their way, then the rest")
        fed.feed.finish()
        await lateReader.value
        await slowReader.value
    }

    @Test("a replay joiner of a key freed and joined again gets none of the old subject's replay")
    func replayGoesWithTheLastSubscriber() async throws {
        let fed = FedTopics(replay: 2, keepAlive: .seconds(Int64.max))
        do {
            var first = fed.topics.subscribe(to: 0).makeAsyncIterator()
            for n in [0, 2] { fed.feed.yield(n) }
            #expect(await first.next() == 0)
            #expect(await first.next() == 2)
        }
        try await waitUntil("key 0 freed") { !fed.topics.isLive(0) }
        let session = try #require(fed.topics.topics.session)
        try await waitUntil("the stopped router returned") {
            session.state.withLock { $0.pump == nil && $0.retiring == nil }
        }
        let second = fed.topics.subscribe(to: 0)
        let received = LockedLog<Int>()
        let secondReader = self.reader(second, into: received)
        fed.feed.yield(4)
        try await waitUntil("4") { received.values.contains(4) }
        #expect(received.values == [4], "0 and 2 were the freed subject's replay")
        fed.feed.finish()
        await secondReader.value
    }

    @Test("two stalled lossless subscribers of two keys: the one that fills first holds the upstream at its n + 2")
    func twoStalledKeysTheFirstFullHolds() async throws {
        let fed = FedTopics()
        let evens = fed.topics.subscribe(to: 0, buffering: .bounded(2))
        let odds = fed.topics.subscribe(to: 1, buffering: .bounded(3))
        for n in 0..<40 { fed.feed.yield(n) }
        // evens holds 0 and 2, odds 1 and 3 (room for one more); 4 in the router's hand, 5 in
        // its buffer.
        try await fed.waitUntilHeld(after: Array(0...5), routerIn: 0)
        #expect(odds.backlog?.count == 2)
        fed.feed.finish()
        let evenLog = LockedLog<Int>()
        let oddLog = LockedLog<Int>()
        let evenReader = self.reader(evens, into: evenLog)
        let oddReader = self.reader(odds, into: oddLog)
        await evenReader.value
        await oddReader.value
        #expect(evenLog.values == Array(stride(from: 0, to: 40, by: 2)))
        #expect(oddLog.values == Array(stride(from: 1, to: 40, by: 2)))
    }

    @Test(
        "a stalled .bounded(n) subscriber lets other keys' elements through until n + 1 of its own key wait: then one more is produced"
    )
    func stalledSubscriberHoldsOnlyAtItsOwnKeysElements() async throws {
        let fed = FedTopics()
        let stalled = fed.topics.subscribe(to: 0, buffering: .bounded(1))
        let oddLog = LockedLog<Int>()
        let oddReader = self.reader(fed.topics.subscribe(to: 1), into: oddLog)
        for n in [0, 1, 3, 5, 7, 2, 9, 11, 4] { fed.feed.yield(n) }
        // 0 fills `stalled`; 1 to 7 reach key 1; 2 waits in the router's hand, 9 in its buffer.
        // So the upstream runs more than n + 2 elements past the last one `stalled` read, when
        // they are other keys': the bound is n + 1 of its key, and one more of any key.
        try await fed.waitUntilHeld(after: [0, 1, 3, 5, 7, 2, 9], routerIn: 0)
        try await waitUntil("1 to 7 routed") { oddLog.values == [1, 3, 5, 7] }
        fed.feed.finish()
        var received: [Int] = []
        for await n in stalled { received.append(n) }
        #expect(received == [0, 2, 4])
        await oddReader.value
        #expect(oddLog.values == [1, 3, 5, 7, 9, 11])
    }

    @Test(
        "the subscriber holding the router leaves: its key's other subscriber and the other keys get every later element, in order"
    )
    func holderLeavesOthersGetEverything() async throws {
        let fed = FedTopics()
        let holder = HeldSubscription(fed.topics.subscribe(to: 0, buffering: .bounded(1)))
        let evenLog = LockedLog<Int>()
        let oddLog = LockedLog<Int>()
        let evenReader = self.reader(fed.topics.subscribe(to: 0), into: evenLog)
        let oddReader = self.reader(fed.topics.subscribe(to: 1), into: oddLog)
        for n in [0, 2, 1, 4, 3, 5] { fed.feed.yield(n) }
        // 0 fills `holder`; 2 is in the router's hand; 1 in its buffer.
        try await fed.waitUntilHeld(after: [0, 2, 1], routerIn: 0)
        try await waitUntil("the even reader has 0") { evenLog.values == [0] }
        #expect(oddLog.values == [], "1 is behind 2")
        holder.release()
        try await waitUntil("key 0 down to its reader") { fed.topics.subscriberCount(of: 0) == 1 }
        fed.feed.finish()
        await evenReader.value
        await oddReader.value
        #expect(evenLog.values == [0, 2, 4])
        #expect(oddLog.values == [1, 3, 5])
    }

    @Test(
        "a subscriber waiting in next() while another key holds the router returns nil at once when its task is cancelled"
    )
    func waitingSubscriberCancelledWhileTheRouterIsHeld() async throws {
        let fed = FedTopics()
        let stalled = fed.topics.subscribe(to: 0, buffering: .bounded(1))
        let odd = fed.topics.subscribe(to: 1)
        let waiting = LockedFlag()
        let oddTask = Task { () -> Int? in
            var iterator = odd.makeAsyncIterator()
            waiting.set()
            return await iterator.next()
        }
        for n in [0, 2, 4, 1] { fed.feed.yield(n) }
        try await fed.waitUntilHeld(after: [0, 2, 4], routerIn: 0)
        try await waitUntil("the odd subscriber waiting") {
            waiting.isSet && fed.topics.topics.subject(of: 1)?.waitingCount == 1
        }
        oddTask.cancel()
        let answer = try await withTimeout("the cancelled next()", seconds: 20) { await oddTask.value }
        #expect(answer == nil)
        try await waitUntil("key 1 freed") { !fed.topics.isLive(1) }
        #expect(fed.pulled.values == [0, 2, 4], "the router and the upstream are still held by key 0")
        fed.feed.finish()
        var received: [Int] = []
        for await n in stalled { received.append(n) }
        #expect(received == [0, 2, 4])
    }

    @Test("many keys, one subscriber each: each gets exactly its own elements, in order; then every key is freed")
    func manyKeysEachGetsItsOwn() async throws {
        let keys = 256
        let perKey = 4
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let ends = TerminationRecorder()
        ends.attach(to: feed)
        let topics = stream.share(by: { $0 % keys })
        let logs = (0..<keys).map { _ in LockedLog<Int>() }
        let readers = (0..<keys).map { key in self.reader(topics.subscribe(to: key), into: logs[key]) }
        #expect(topics.keyCount == keys)
        for n in 0..<(keys * perKey) { feed.yield(n) }
        for key in 0..<keys {
            let expected = (0..<perKey).map { $0 * keys + key }
            try await waitUntil("key \(key)'s elements") { logs[key].count == perKey }
            #expect(logs[key].values == expected, "key \(key)")
        }
        for reader in readers { reader.cancel() }
        for reader in readers { await reader.value }
        try await waitUntil("every key freed") { topics.keyCount == 0 }
        #expect(try await ends.waitForTermination() == [.cancelled], "the upstream stopped after the last key")
    }

    @Test("a router stopped and started again many times: the hub keeps one subscriber, the running router's")
    func restartedRouterLeavesOneHubSubscriber() async throws {
        let fed = FedTopics(keepAlive: .seconds(Int64.max))
        let session = try #require(fed.topics.topics.session)
        for round in 0..<64 {
            let key = round % 2
            do {
                var iterator = fed.topics.subscribe(to: key).makeAsyncIterator()
                try await waitUntil("round \(round): the router settled") {
                    session.state.withLock { $0.pump != nil && $0.retiring == nil }
                }
                #expect(fed.hub.subscriberCount == 1, "round \(round)")
                fed.feed.yield(2 * round + key)
                #expect(await iterator.next() == 2 * round + key, "round \(round)")
            }
            try await fed.topics.waitUntilFreed(key)
        }
        try await waitUntil("the last router returned") {
            session.state.withLock { $0.pump == nil && $0.retiring == nil }
        }
        try await waitUntil("the hub without subscribers") { fed.hub.subscriberCount == 0 }
        fed.feed.finish()
    }
}
