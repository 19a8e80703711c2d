// share(by:), from outside: what a joiner gets after every key was freed (the router stopped,
// the upstream kept alive or stopped), after the last subscriber of every key was evicted, and
// what every key gets when the upstream fails while a stalled subscriber holds the router. A
// `StubbornSource` answers each pull when the test says so, so that "produced before the join"
// and "produced after it" are exact.

import Testing

@testable import AsyncMulticast

extension SharedTopicsContractTests {
    /// Reads one element in a task of its own, then leaves.
    func readOne(_ subscription: SharedSubscription<Int, Never>) -> Task<Int?, Never> {
        Task {
            var iterator = subscription.makeAsyncIterator()
            return await iterator.next()
        }
    }

    /// Topics of a `StubbornSource` by parity, kept alive for 5 s on a scripted clock; the
    /// first subscriber of key 0 reads 0 (pull 0) and leaves. Returns once the router has
    /// stopped and the keep-alive window is open, the upstream waiting in pull 1.
    func stubbornTopicsAfterTheLastLeave() async throws -> (
        AsyncSharedTopics<Int, Int, Never>, StubbornSource.Control, ScriptedClock
    ) {
        let clock = ScriptedClock()
        let source = StubbornSource()
        let topics = source.share(by: { $0 % 2 }, keepAlive: .seconds(5), clock: clock)
        let first = self.readOne(topics.subscribe(to: 0))
        await source.control.waitForPull(0)
        source.control.answer(0)
        #expect(await first.value == 0)
        try await waitUntil("key 0 freed") { !topics.isLive(0) }
        let session = try #require(topics.topics.session)
        try await waitUntil("the router returned") { session.state.withLock { $0.pump == nil && $0.retiring == nil } }
        try await clock.waitForSleepers(1)
        await source.control.waitForPull(1)
        return (topics, source.control, clock)
    }

    @Test("an element the upstream produced within keepAlive while no key was live reaches no later joiner")
    func elementProducedWithoutKeysReachesNoLaterJoiner() async throws {
        let (topics, control, _) = try await self.stubbornTopicsAfterTheLastLeave()
        control.answer(2)  // produced while nobody listens
        await control.waitForPull(2)  // the upstream went on: 2 is behind it
        let joiner = self.readOne(topics.subscribe(to: 0))
        control.answer(4)
        #expect(await joiner.value == 4, "2 was produced before the join and was on no router's way")
        control.answer(nil)
    }

    @Test("an element the upstream produces after a join within keepAlive reaches the joiner")
    func elementProducedAfterAJoinWithinKeepAliveReachesTheJoiner() async throws {
        let (topics, control, _) = try await self.stubbornTopicsAfterTheLastLeave()
        let joiner = self.readOne(topics.subscribe(to: 0))  // while pull 1 waits
        control.answer(2)
        #expect(await joiner.value == 2)
        control.answer(nil)
    }

    @Test(
        "the last subscriber of every key evicted by the router: a later joiner gets a fresh router, and nothing routed before"
    )
    func routerEvictsTheLastSubscriberThenAJoinerIsReached() async throws {
        let fed = FedTopics(keepAlive: .seconds(Int64.max))
        let evicted = fed.topics.subscribe(to: 0, buffering: .evicting(1))
        for n in [0, 2] { fed.feed.yield(n) }
        #expect(await evicted.waitForEviction()?.reason == .hardLimit)
        try await waitUntil("key 0 freed") { !fed.topics.isLive(0) }
        let session = try #require(fed.topics.topics.session)
        try await waitUntil("the router returned") { session.state.withLock { $0.pump == nil && $0.retiring == nil } }
        try await waitUntil("0 and 2 produced") { fed.pulled.values == [0, 2] }
        let joiner = self.readOne(fed.topics.subscribe(to: 0))
        fed.feed.yield(4)
        #expect(await joiner.value == 4, "2 was routed (to the evicted subscriber) before the join")
        fed.feed.finish()
        _ = evicted
    }

    @Test("the upstream fails while a stalled subscriber holds the router: each key gets its elements, then the error")
    func failureWhileTheRouterIsHeld() async throws {
        let source = PushSource()
        let topics = source.share(by: { $0 % 2 })
        let stalled = topics.subscribe(to: 0, buffering: .bounded(1))
        let odd = topics.subscribe(to: 1)
        let oddLog = LockedLog<Int>()
        let oddReader = Task { () -> TestError? in
            do throws(TestError) {
                for try await n in odd { oddLog.append(n) }
                return nil
            } catch {
                return error
            }
        }
        for n in [1, 0, 2, 3, 4] { source.yield(n) }
        source.fail(.boom)
        // 0 fills `stalled`; 2 is in the router's hand; 3 in its buffer.
        try await waitUntil("the router waiting for room in key 0") {
            topics.topics.subject(of: 0)?.producersWaitingForRoom == 1
        }
        try await waitUntil("1 routed") { oddLog.values == [1] }
        #expect(topics.isLive(1), "the error is behind 2 and 3: key 1 still waits")
        var received: [Int] = []
        do throws(TestError) {
            for try await n in stalled { received.append(n) }
            Issue.record("the stalled subscriber ended without the error")
        } catch {
            #expect(error == .boom)
        }
        #expect(received == [0, 2, 4])
        #expect(await oddReader.value == .boom)
        #expect(oddLog.values == [1, 3])
        var late = topics.subscribe(to: 1).makeAsyncIterator()
        await #expect(throws: TestError.boom) { _ = try await late.next() }
    }
}

extension SharedTopicsContractTests {
    @Test("the upstream ends within keepAlive while no key is live: a later joiner of any key gets the end at once")
    func endWithoutKeysReachesLaterJoiners() async throws {
        let (topics, control, _) = try await self.stubbornTopicsAfterTheLastLeave()
        control.answer(nil)
        let joiner = self.readOne(topics.subscribe(to: 1))
        #expect(try await withTimeout("the joiner's end", seconds: 20) { await joiner.value } == nil)
        try await waitUntil("the topics completed") { !topics.isLive(1) }
        var later = topics.subscribe(to: 0).makeAsyncIterator()
        #expect(await later.next() == nil)
        #expect(control.iteratorCount == 1, "no second iteration after the end")
    }

    @Test("the upstream fails within keepAlive while no key is live: a later joiner of any key gets the error")
    func failureWithoutKeysReachesLaterJoiners() async throws {
        let clock = ScriptedClock()
        let source = PushSource()
        let topics = source.share(by: { $0 % 2 }, keepAlive: .seconds(5), clock: clock)
        do {
            var first = topics.subscribe(to: 0).makeAsyncIterator()
            source.yield(0)
            #expect(try await first.next() == 0)
        }
        try await waitUntil("key 0 freed") { !topics.isLive(0) }
        try await clock.waitForSleepers(1)
        source.fail(.boom)
        var joiner = topics.subscribe(to: 1).makeAsyncIterator()
        await #expect(throws: TestError.boom) { _ = try await joiner.next() }
        var later = topics.subscribe(to: 0).makeAsyncIterator()
        await #expect(throws: TestError.boom) { _ = try await later.next() }
    }

    @Test("a stalled .bounded(n) joiner of a key with replay holds the upstream at most n + 2 elements after it joined")
    func stalledReplayJoinerHoldsTheUpstream() async throws {
        let fed = FedTopics(replay: 2)
        let fastLog = LockedLog<Int>()
        let fast = self.reader(fed.topics.subscribe(to: 0), into: fastLog)
        for n in [0, 2, 4] { fed.feed.yield(n) }
        try await waitUntil("the fast reader has 0, 2, 4") { fastLog.values == [0, 2, 4] }
        let joined = fed.topics.subscribe(to: 0, buffering: .bounded(2))  // replays 2 and 4
        for n in 3..<23 { fed.feed.yield(2 * n) }
        try await waitUntil("the router waiting for room in key 0") {
            fed.topics.topics.subject(of: 0)?.producersWaitingForRoom == 1
        }
        try await waitUntil("the upstream task waiting for room in the hub") { fed.hub.producersWaitingForRoom == 1 }
        let producedSince = fed.pulled.count - 3
        // Observed: 2 (its replay fills its buffer, so the router waits at once).
        #expect(producedSince <= 2 + 2, "produced \(fed.pulled.values.dropFirst(3)) since the join")
        fed.feed.finish()
        var received: [Int] = []
        for await n in joined { received.append(n) }
        #expect(received == Array(stride(from: 2, to: 46, by: 2)), "the replay, then every element")
        await fast.value
        #expect(fastLog.values == Array(stride(from: 0, to: 46, by: 2)))
    }
}

extension SharedTopicsContractTests {
    @Test(
        "the subscriber holding the router is the last of every key and leaves: the router returns and the upstream stops"
    )
    func holderLeavesLastTheUpstreamStops() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let ends = TerminationRecorder()
        ends.attach(to: feed)
        let pulled = LockedLog<Int>()
        let topics = HookedStream(stream, pulled: { [pulled] in pulled.append($0) }).share(by: { $0 % 2 })
        let session = try #require(topics.topics.session)
        let holder = HeldSubscription(topics.subscribe(to: 0, buffering: .bounded(1)))
        for n in [0, 2, 4, 6] { feed.yield(n) }
        // 0 fills `holder`; 2 waits in the router's hand, 4 in its buffer.
        try await waitUntil("the upstream to produce 0, 2, 4") { pulled.values == [0, 2, 4] }
        try await waitUntil("the router waiting for room in key 0") {
            topics.topics.subject(of: 0)?.producersWaitingForRoom == 1
        }
        try await waitUntil("the upstream task waiting for room in the hub") {
            session.hub.producersWaitingForRoom == 1
        }
        let freed = Task { try await topics.waitUntilFreed(0) }
        holder.release()
        try await withTimeout("waitUntilFreed(0)", seconds: 20) { try await freed.value }
        #expect(try await ends.waitForTermination() == [.cancelled], "the upstream stopped with the last key")
        try await waitUntil("the router returned") { session.state.withLock { $0.pump == nil && $0.retiring == nil } }
        #expect(session.hub.subscriberCount == 0)
        #expect(topics.keyCount == 0)
    }
}
