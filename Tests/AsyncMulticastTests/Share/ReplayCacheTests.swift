// Reading and clearing the replay cache of replay(n) and multicast(replay:): `replayCache` is
// what a subscriber joining now would be replayed; `resetReplayCache()` clears it for
// subscribers joining from now on and takes nothing from the present ones. (Its expiry when
// the upstream stops is in ReplayTests.swift.)

import Testing

@testable import AsyncMulticast

@Suite("replayCache and resetReplayCache() on replay(n) and multicast(replay:)", .timeLimit(.minutes(2)))
struct ReplayCacheTests {
    @Test("replay(n): replayCache holds the latest n produced; a reset clears it for new subscribers only")
    func replayCacheAndReset() async throws {
        let source = FedSource()
        let replayed = source.replay(2)
        #expect(replayed.replayCache.isEmpty)
        let reader = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await reader.startIteration(of: source, yielding: 1, 2, 3) == 1)
        #expect(await reader.take(2) == [2, 3], "all three were produced")
        #expect(replayed.replayCache == [2, 3])

        let present = await SubscriberTask.join { replayed.makeAsyncIterator() }  // replayed 2, 3
        replayed.resetReplayCache()
        #expect(replayed.replayCache.isEmpty)
        let newcomer = await SubscriberTask.join { replayed.makeAsyncIterator() }
        source.control.yield(4)
        #expect(await reader.next() == 4)
        #expect(replayed.replayCache == [4], "the cache fills again from what is produced next")
        #expect(await present.take(3) == [2, 3, 4], "the reset took nothing from a present subscriber")
        #expect(await newcomer.next() == 4, "a subscriber that joined after the reset is replayed nothing older")
        #expect(replayed.storage.invariantViolation == nil)

        source.control.finish()
        #expect(await reader.next() == nil)
        #expect(replayed.replayCache == [4], "an upstream that finished keeps its cache")
        var late = replayed.makeAsyncIterator()
        #expect(await late.next() == 4)
        #expect(await late.next() == nil)
        await leaveAll(present, newcomer)
    }

    @Test("share() has an empty replay cache")
    func shareHasNoCache() async throws {
        let source = FedSource()
        let shared = source.share()
        let reader = await SubscriberTask.join { shared.makeAsyncIterator() }
        #expect(await reader.startIteration(of: source, yielding: 1, 2) == 1)
        #expect(await reader.next() == 2)
        #expect(shared.replayCache.isEmpty)
        shared.resetReplayCache()  // harmless
        #expect(shared.replayCache.isEmpty)
        await reader.leave()
    }

    @Test("multicast(replay:): the cache survives a cancelled connection; a reset before reconnecting clears it")
    func multicastCacheAcrossConnections() async throws {
        let source = FedSource()
        let multicast = source.multicast(replay: 1)
        let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        #expect(await reader.take(2) == [1, 2])
        #expect(multicast.replayCache == [2])
        connection.cancel()
        #expect(await reader.next() == nil)
        #expect(multicast.replayCache == [2], "the connection, not the subscribers, decides; the cache stays")

        var kept = multicast.makeAsyncIterator()
        #expect(await kept.next() == 2, "a subscriber joining between connections is replayed the cache")
        multicast.resetReplayCache()
        #expect(multicast.replayCache.isEmpty)
        let fresh = await SubscriberTask.join { multicast.makeAsyncIterator() }
        multicast.connect()
        await source.control.waitForStart(of: 1)
        source.control.yield(10)
        #expect(await fresh.next() == 10, "nothing of the previous connection is replayed after the reset")
        #expect(await kept.next() == 10)
        #expect(multicast.replayCache == [10])
        await fresh.leave()
    }
}
