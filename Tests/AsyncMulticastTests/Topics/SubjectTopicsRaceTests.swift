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

        /// Runs `body` for `rounds` rounds (with the round and its key, one of 8) under a
        /// progress watchdog; each round ends once its key is freed, and then no key is left.
        func forEachRound(
            _ what: String, rounds: Int = Self.rounds, of topics: AsyncSubjectTopics<Int, Int, Never>,
            _ body: @escaping @Sendable (_ round: Int, _ key: Int) async throws -> Void
        ) async throws {
            try await withProgressWatchdog(what) { progress in
                for round in 0..<rounds {
                    try await body(round, round % 8)
                    try await topics.waitUntilFreed(round % 8)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
        }

        /// Runs `action` and a subscription to `key` in two detached tasks released together
        /// by a latch; returns the subscription once both ran.
        static func join(
            _ key: Int, of topics: AsyncSubjectTopics<Int, Int, Never>, buffering: SharedBufferingPolicy? = nil,
            racing action: @escaping @Sendable () -> Void
        ) async -> SharedSubscription<Int, Never> {
            let start = Latch()
            let racer = Task.detached {
                await start.wait()
                action()
            }
            let joiner = Task.detached { () -> SharedSubscription<Int, Never> in
                await start.wait()
                guard let buffering else { return topics.subscribe(to: key) }
                return topics.subscribe(to: key, buffering: buffering)
            }
            start.release()
            await racer.value
            return await joiner.value
        }

        @Test("a join racing the last leave keeps the key or gets a fresh subject, never a freed one")
        func joinRacingTheLastLeave() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await self.forEachRound("join racing leave", of: topics) { round, key in
                let leaving = HeldSubscription(topics.subscribe(to: key))
                let joined = await Self.join(key, of: topics, racing: { leaving.release() })
                try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
            }
        }

        @Test("a join racing a cancelled last reader keeps the key or gets a fresh subject")
        func joinRacingACancelledReader() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await self.forEachRound("join racing cancellation", of: topics) { round, key in
                let subscription = topics.subscribe(to: key)
                let reading = Signal<Void>()
                let reader = Task.detached {
                    var iterator = subscription.makeAsyncIterator()
                    reading.send(())
                    while await iterator.next() != nil {}
                }
                _ = await reading.next("the reader started")
                let joined = await Self.join(key, of: topics, racing: { reader.cancel() })
                await reader.value
                try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
            }
        }

        @Test("a join racing the eviction of the last subscriber keeps the key or gets a fresh subject")
        func joinRacingTheLastEviction() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            try await self.forEachRound("join racing eviction", of: topics) { round, key in
                let slow = topics.subscribe(to: key, buffering: .evicting(1))
                topics.send(-1, to: key)
                // The second element evicts a subscriber that holds the first; a joiner that
                // got in first receives it, so it is not checked here.
                let joined = await Self.join(
                    key, of: topics, buffering: .unbounded, racing: { topics.send(-2, to: key) })
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
            }
        }

        @Test("a join racing the keep-alive timer's expiry keeps the key or gets a fresh subject")
        func joinRacingTheKeepAliveExpiry() async throws {
            let clock = ManualClock()
            let topics = AsyncSubjectTopics<Int, Int, Never>(keepAlive: .seconds(1), clock: clock)
            try await self.forEachRound("join racing expiry", rounds: Self.rounds / 2, of: topics) { round, key in
                HeldSubscription(topics.subscribe(to: key)).release()
                _ = await clock.waitForSleepers(count: 1)
                let joined = await Self.join(key, of: topics, racing: { clock.advance(by: .seconds(1)) })
                try await self.expectJoinerReached(joined, topics: topics, key: key, round: round)
                // The joiner left: its window opens; let it expire.
                try await waitUntil("round \(round): the next window's timer") { clock.sleeperCount == 1 }
                clock.advance(by: .seconds(1))
            }
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
