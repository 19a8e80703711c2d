// AsyncReplaySubject: `send` puts the element in the replay cache before it returns, so a
// subscriber created right after a send receives it; `replay` 0 is a passthrough subject;
// `replayCache` and `resetReplayCache()`; completion keeps the cache for late subscribers; a
// dropping or evicting policy limits what is replayed.

import Testing

@testable import AsyncMulticast

@Suite("AsyncReplaySubject", .timeLimit(.minutes(2)))
struct ReplaySubjectTests {
    @Test("a subscriber created right after send receives it from the cache, without waiting for anything")
    func sendThenSubscribe() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 1)
            subject.send(1)
            #expect(subject.replayCache == [1], "in the cache when send returns")
            var subscriber = subject.makeAsyncIterator()
            #expect(subject.storage.undelivered(subscriber.subscription.id) == [1], "ready for it when it joins")
            #expect(await subscriber.next() == 1)
            await subject.send(waitingForRoom: 2)
            #expect(subject.replayCache == [2])
            var second = subject.makeAsyncIterator()
            #expect(await second.next() == 2)
            #expect(await subscriber.next() == 2)
        }
    }

    @Test("replay 0 is a passthrough subject: nothing is cached or replayed")
    func zeroIsPassthrough() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 0)
            subject.send(1)
            #expect(subject.replayCache.isEmpty)
            #expect(subject.storage.bufferedCount == 0, "nothing is stored for nobody")
            var subscriber = subject.makeAsyncIterator()
            subject.send(2)
            subject.finish()
            #expect(await subscriber.next() == 2)
            #expect(await subscriber.next() == nil)
            var late = subject.makeAsyncIterator()
            #expect(await late.next() == nil, "after the end: nothing replayed, then the end")
        }
    }

    @Test("replayCache holds the latest replay elements, oldest first, whatever the subscribers read")
    func cacheContents() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 3)
            #expect(subject.replayCache.isEmpty)
            subject.send(1)
            subject.send(2)
            #expect(subject.replayCache == [1, 2])
            var reader = subject.makeAsyncIterator()
            #expect(await reader.next() == 1)
            #expect(await reader.next() == 2)
            for n in 3...5 { subject.send(n) }
            #expect(subject.replayCache == [3, 4, 5])
            #expect(await reader.next() == 3)
            #expect(subject.replayCache == [3, 4, 5], "reading does not take anything out of the cache")
            var newcomer = subject.makeAsyncIterator()
            subject.finish()
            let replayed = await newcomer.readAll()
            #expect(replayed == [3, 4, 5])
        }
    }

    @Test("resetReplayCache empties the cache for new subscribers; present ones keep what they have not read")
    func resetAffectsOnlyNewSubscribers() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 2)
            subject.send(1)
            subject.send(2)
            var present = subject.makeAsyncIterator()
            subject.resetReplayCache()
            #expect(subject.replayCache.isEmpty)
            var newcomer = subject.makeAsyncIterator()
            subject.send(3)
            #expect(subject.replayCache == [3], "the cache fills again from what is sent next")
            subject.finish()
            let presentReceived = await present.readAll()
            let newcomerReceived = await newcomer.readAll()
            #expect(presentReceived == [1, 2, 3], "the reset took nothing from a present subscriber")
            #expect(newcomerReceived == [3])
            #expect(subject.storage.invariantViolation == nil)
        }
    }

    @Test("after finish, a new subscriber gets the cache then nil; later sends are ignored")
    func cacheThenEnd() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 2)
            for n in 1...3 { subject.send(n) }
            subject.finish()
            subject.send(4)
            #expect(subject.replayCache == [2, 3])
            for _ in 0..<2 {
                var late = subject.makeAsyncIterator()
                #expect(await late.next() == 2)
                #expect(await late.next() == 3)
                #expect(await late.next() == nil)
            }
        }
    }

    @Test("after fail, a new subscriber gets the cache then the error")
    func cacheThenError() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, TestError>(replay: 2)
            for n in 1...3 { subject.send(n) }
            subject.fail(.boom)
            subject.fail(.other(1))  // ignored: completed once
            var late = subject.makeAsyncIterator()
            let (received, thrown) = await collect(&late)
            #expect(received == [2, 3])
            #expect(thrown == .boom)
        }
    }

    @Test(
        "a dropping policy below replay replays only the newest that many; an evicting or lossless one replays all",
        arguments: [
            (SharedBufferingPolicy.bufferingNewest(2), [4, 5]),
            (.bufferingOldest(2), [4, 5]),
            (.evicting(2), [1, 2, 3, 4, 5]),
            (.bufferingNewest(0), []),
            (.unbounded, [1, 2, 3, 4, 5]),
            (.bounded(2), [1, 2, 3, 4, 5]),
        ])
    func policyLimitsTheReplay(policy: SharedBufferingPolicy, expected: [Int]) async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 5, buffering: policy)
            for n in 1...5 { subject.send(n) }
            #expect(subject.replayCache == [1, 2, 3, 4, 5], "the cache itself is replay long")
            var late = subject.makeAsyncIterator()
            subject.finish()
            let replayed = await late.readAll()
            #expect(replayed == expected)
        }
    }

    @Test("a view's policy limits what its subscriber is replayed, and events() reports no gap for it")
    func viewPolicyLimitsTheReplay() async throws {
        try await withTimeout {
            let subject = AsyncReplaySubject<Int, Never>(replay: 4)
            for n in 1...4 { subject.send(n) }
            var viewed = subject.buffering(.bufferingNewest(1)).makeAsyncIterator()
            var events = subject.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
            var full = subject.makeAsyncIterator()
            subject.finish()
            #expect(await viewed.next() == 4)
            #expect(await viewed.next() == nil)
            #expect(await events.next() == .element(3))
            #expect(await events.next() == .element(4))
            #expect(await events.next() == nil)
            let all = await full.readAll()
            #expect(all == [1, 2, 3, 4])
        }
    }

    @Test("sends from many tasks: the cache holds the latest replay of them, in the order subscribers saw them")
    func concurrentSends() async throws {
        let subject = AsyncReplaySubject<Int, Never>(replay: 3)
        let witness = await SubscriberTask.join { subject.makeAsyncIterator() }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for n in 0..<25 { subject.send(sender * 100 + n) }
                }
            }
        }
        let cache = subject.replayCache
        subject.finish()
        let seen = await witness.drain().elements
        #expect(seen.count == 100)
        #expect(cache == Array(seen.suffix(3)))
        var late = subject.makeAsyncIterator()
        let replayed = await late.readAll()
        #expect(replayed == cache)
    }

    @Test("replay below 0 is refused with a message naming it")
    func negativeBufferSizeIsRefused() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncReplaySubject<Int, Never>(replay: -1)
        }
        expectMessage(result, contains: "AsyncReplaySubject(replay:): replay must be at least 0, got -1")
    }
}
