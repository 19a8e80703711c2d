// AsyncSharedTopics (`share(by:)`): one upstream iteration for every key, started by the
// first subscriber of any key and stopped after the last subscriber of every key left and
// the keep-alive window passed on the clock; a later subscriber starts a fresh iteration.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics: one upstream for every key", .timeLimit(.minutes(2)))
struct SharedTopicsLifecycleTests {
    /// Reads `subscription` in a task until it ends; `received` tells what arrived.
    func reader(
        _ subscription: SharedSubscription<Int, Never>, into received: LockedLog<Int>
    ) -> Task<Void, Never> {
        Task {
            for await n in subscription { received.append(n) }
        }
    }

    @Test("the upstream starts once for every key and stops after the last subscriber of any key leaves and keepAlive")
    func upstreamStartedOnceAndStoppedAfterTheLastKey() async throws {
        let clock = ScriptedClock()
        let log = ScriptedLog()
        // Even numbers are key 0, odd ones key 1; the iteration's greeting, its index 0, is
        // key 0's.
        let topics = ScriptedBase(log: log).share(by: { $0 % 2 }, keepAlive: .seconds(5), clock: clock)
        #expect(log.starts == 0, "nothing starts before a subscriber")
        let evens = LockedLog<Int>()
        let odds = LockedLog<Int>()
        let evenReader = self.reader(topics.subscribe(to: 0), into: evens)
        try await waitUntil("the upstream to start") { log.starts == 1 }
        let oddReader = self.reader(topics.subscribe(to: 1), into: odds)
        try await waitUntil("the greeting to reach key 0") { evens.values == [0] }
        for n in 1...6 { log.send(n) }
        try await waitUntil("key 0's elements") { evens.values == [0, 2, 4, 6] }
        try await waitUntil("key 1's elements") { odds.values == [1, 3, 5] }
        #expect(log.starts == 1, "one iteration for both keys")

        evenReader.cancel()
        await evenReader.value
        try await waitUntil("key 0 to be freed") { !topics.isLive(0) }
        #expect(log.stops == 0, "key 1 still has its subscriber: the upstream runs")
        log.send(7)
        try await waitUntil("key 1 to keep receiving") { odds.values == [1, 3, 5, 7] }

        oddReader.cancel()
        await oddReader.value
        try await clock.waitForSleepers(1)  // the keep-alive window opened
        #expect(topics.keyCount == 0)
        #expect(log.stops == 0, "kept alive for 5 s on the clock")
        clock.advance(by: .seconds(4))
        #expect(log.stops == 0)
        clock.advance(by: .seconds(1))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(log.starts == 1)
        #expect(log.overlaps == 0)
    }

    @Test("a subscriber of any key arriving within keepAlive continues the same iteration")
    func joinWithinKeepAliveContinuesTheIteration() async throws {
        let clock = ScriptedClock()
        let log = ScriptedLog()
        let topics = ScriptedBase(log: log).share(by: { $0 % 2 }, keepAlive: .seconds(5), clock: clock)
        let first = LockedLog<Int>()
        let firstReader = self.reader(topics.subscribe(to: 0), into: first)
        try await waitUntil("the greeting") { first.values == [0] }
        firstReader.cancel()
        await firstReader.value
        try await clock.waitForSleepers(1)

        let second = LockedLog<Int>()
        let secondReader = self.reader(topics.subscribe(to: 1), into: second)  // another key
        clock.advance(by: .seconds(10))  // the window was closed by the join: nothing stops
        log.send(1)
        try await waitUntil("the same iteration's next element") { second.values == [1] }
        #expect(log.starts == 1)
        #expect(log.stops == 0)
        secondReader.cancel()
        await secondReader.value
    }

    @Test("a subscriber keeps its upstream even when nothing else holds the topics")
    func subscriberKeepsTheTopics() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let subscription = stream.share(by: { $0 % 2 }).subscribe(to: 1)
        for n in 1...5 { feed.yield(n) }
        feed.finish()
        #expect(await subscription.reduce(into: []) { $0.append($1) } == [1, 3, 5])
    }

    @Test("the topics are released once the upstream ended and nothing holds them")
    func topicsReleasedAfterTheEnd() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        var topics: AsyncSharedTopics<Int, Int, Never>? = stream.share(by: { $0 % 2 })
        weak let released = topics?.topics
        let subscription = topics!.subscribe(to: 0)
        feed.yield(2)
        feed.finish()
        #expect(await subscription.reduce(into: []) { $0.append($1) } == [2])
        topics = nil
        try await waitUntil("the topics released") { released == nil }
    }

    @Test("after the upstream stopped, the next subscriber starts a fresh iteration, never overlapping the old one")
    func restartAfterStopIsAFreshIteration() async throws {
        let log = ScriptedLog()
        let topics = ScriptedBase(log: log).share(by: { $0 % 2 })
        for session in 0..<3 {
            let received = LockedLog<Int>()
            let reader = self.reader(topics.subscribe(to: session % 2), into: received)
            try await waitUntil("session \(session) to start") { log.starts == session + 1 }
            // Greeted with its index, which is its key's, then one more element of its key.
            log.send(session + 2)
            try await waitUntil("its elements") { received.values == [session, session + 2] }
            reader.cancel()
            await reader.value
            #expect(try await log.waitForEnd(of: session) == .cancelled)
        }
        #expect(log.starts == 3)
        #expect(log.overlaps == 0)
    }
}
