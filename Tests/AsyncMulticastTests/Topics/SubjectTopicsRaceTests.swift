// AsyncSubjectTopics under races: a subscriber joins a key while its last subscriber leaves
// (released, cancelled, evicted) or while its keep-alive timer expires. Whatever the order,
// the joiner must hold a subject that `send(_:to:)` reaches: the old one, kept, or a fresh
// one; never a freed one. Two detached tasks per round, released together by a latch, many
// rounds; run under TSan with `--filter Topic`. Serialized with the heavy tests.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("AsyncSubjectTopics races")
    struct SubjectTopicsRaceTests {
        static let rounds = 4_000

        /// After a race: the joiner is the key's one subscriber, and what is sent to the key
        /// reaches it. Then it leaves and the key is freed, for the next round.
        func expectJoinerReached(
            _ joined: SharedSubscription<Int, Never>, topics: AsyncSubjectTopics<Int, Int, Never>, key: Int, round: Int
        ) async throws {
            #expect(topics.isLive(key), "round \(round): the joiner's key is live")
            #expect(topics.subscriberCount(of: key) == 1, "round \(round)")
            topics.send(round, to: key)
            // Read only what was delivered: a joiner of a freed subject would wait forever.
            #expect(joined.backlog?.count == 1, "round \(round): the joiner's subject is the one sends reach")
            guard joined.backlog?.count == 1 else { return }
            var iterator = joined.makeAsyncIterator()
            #expect(await iterator.next() == round, "round \(round)")
        }

        @Test("a join racing the last leave keeps the key or gets a fresh subject, never a freed one")
        func joinRacingTheLastLeave() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await withProgressWatchdog("join racing leave") { progress in
                for round in 0..<Self.rounds {
                    let key = round % 8
                    let leaving = HeldSubscription(topics.subscribe(to: key))
                    let start = Latch()
                    let leaver = Task.detached {
                        await start.wait()
                        leaving.release()
                    }
                    let joiner = Task.detached { () -> SharedSubscription<Int, Never> in
                        await start.wait()
                        return topics.subscribe(to: key)
                    }
                    start.release()
                    await leaver.value
                    let joined = await joiner.value
                    try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
                    try await topics.waitUntilFreed(key)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
        }

        @Test("a join racing a cancelled last reader keeps the key or gets a fresh subject")
        func joinRacingACancelledReader() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await withProgressWatchdog("join racing cancellation") { progress in
                for round in 0..<Self.rounds {
                    let key = round % 8
                    let subscription = topics.subscribe(to: key)
                    let reading = Signal<Void>()
                    let reader = Task.detached {
                        var iterator = subscription.makeAsyncIterator()
                        reading.send(())
                        while await iterator.next() != nil {}
                    }
                    _ = await reading.next("the reader started")
                    let start = Latch()
                    let canceller = Task.detached {
                        await start.wait()
                        reader.cancel()
                    }
                    let joiner = Task.detached { () -> SharedSubscription<Int, Never> in
                        await start.wait()
                        return topics.subscribe(to: key)
                    }
                    start.release()
                    await canceller.value
                    let joined = await joiner.value
                    await reader.value
                    try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
                    try await topics.waitUntilFreed(key)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
        }

        @Test("a join racing the eviction of the last subscriber keeps the key or gets a fresh subject")
        func joinRacingTheLastEviction() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await withProgressWatchdog("join racing eviction") { progress in
                for round in 0..<Self.rounds {
                    let key = round % 8
                    let slow = topics.subscribe(to: key, buffering: .evicting(1))
                    topics.send(-1, to: key)
                    let start = Latch()
                    let evictor = Task.detached {
                        await start.wait()
                        // The second element evicts a subscriber that holds the first; a
                        // joiner that got in first receives it, so it is not checked here.
                        topics.send(-2, to: key)
                    }
                    let joiner = Task.detached { () -> SharedSubscription<Int, Never> in
                        await start.wait()
                        return topics.subscribe(to: key, buffering: .unbounded)
                    }
                    start.release()
                    await evictor.value
                    let joined = await joiner.value
                    #expect(await slow.waitForEviction()?.reason == .hardLimit, "round \(round)")
                    #expect(topics.subscriberCount(of: key) == 1, "round \(round)")
                    topics.send(round, to: key)
                    let delivered = joined.backlog?.count ?? 0
                    #expect(delivered >= 1, "round \(round): the joiner's subject is the one sends reach")
                    if delivered >= 1 {
                        var iterator = joined.makeAsyncIterator()
                        var received = await iterator.next()
                        if received == -2 { received = await iterator.next() }
                        #expect(received == round, "round \(round)")
                    }
                    try await topics.waitUntilFreed(key)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
        }

        @Test("a join racing the keep-alive timer's expiry keeps the key or gets a fresh subject")
        func joinRacingTheKeepAliveExpiry() async throws {
            let clock = ManualClock()
            let topics = AsyncSubjectTopics<Int, Int, Never>(keepAlive: .seconds(1), clock: clock)
            try await withProgressWatchdog("join racing expiry") { progress in
                for round in 0..<(Self.rounds / 2) {
                    let key = round % 8
                    HeldSubscription(topics.subscribe(to: key)).release()
                    _ = await clock.waitForSleepers(count: 1)
                    let start = Latch()
                    let expirer = Task.detached {
                        await start.wait()
                        clock.advance(by: .seconds(1))
                    }
                    let joiner = Task.detached { () -> SharedSubscription<Int, Never> in
                        await start.wait()
                        return topics.subscribe(to: key)
                    }
                    start.release()
                    await expirer.value
                    let joined = await joiner.value
                    try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
                    // The joiner left: its window opens; let it expire.
                    try await waitUntil("round \(round): the next window's timer") { clock.sleeperCount == 1 }
                    clock.advance(by: .seconds(1))
                    try await topics.waitUntilFreed(key)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
        }

        @Test("many tasks joining, sending to and leaving few keys leave no key behind")
        func churnOnFewKeysLeavesNothing() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>(replay: 1, keepAlive: .zero)
            try await withProgressWatchdog("churn") { progress in
                await withTaskGroup(of: Void.self) { group in
                    for worker in 0..<4 {
                        group.addTask {
                            for round in 0..<500 {
                                let key = (worker + round) % 3
                                let subscription = topics.subscribe(to: key)
                                topics.send(round, to: key)
                                var iterator = subscription.makeAsyncIterator()
                                // Its own element, or a newer one of another worker.
                                _ = await iterator.next()
                                progress.tick()
                                if round % 32 == 0 { await Task.yield() }
                            }
                        }
                    }
                }
            }
            #expect(topics.keyCount == 0)
        }
    }
}
