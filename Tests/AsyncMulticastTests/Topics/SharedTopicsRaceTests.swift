// AsyncSharedTopics (`share(by:)`) under races: a subscriber joins a key while its last
// subscriber leaves, or joins another key while the last subscriber of every key leaves (the
// pump that routes the one upstream stops, and another starts). Whatever the order, the joiner
// holds a live subject that the pump reaches: an element the upstream produces after the join
// returned reaches it. And the upstream's iterations never overlap. Two detached tasks per
// round, released together by a latch, many rounds; run under TSan with `--filter SharedTopics`.
// Serialized with the heavy tests. Under TSan, beside the other topics suites, the same-key
// race found a join left without a pump: the stop read the live keys before clearing the
// flag a join reads without the lock (see `TopicsSession.lastKeyFreed`).

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("AsyncSharedTopics races")
    struct SharedTopicsRaceTests {
        static let rounds = 2_000

        /// After a race: an element of `key` produced now reaches the joiner, alone. Then it
        /// leaves, and the key is freed, for the next round.
        /// One round: `leaving` is released while a subscriber joins `key`, both let go by one
        /// latch; then the joiner must be reached (`expectJoinerReached`).
        func race(
            _ leaving: HeldSubscription<Int, Never>, againstAJoinOf key: Int,
            topics: AsyncSharedTopics<Int, Int, Never>,
            feed: AsyncStream<Int>.Continuation, round: Int
        ) async throws {
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
            try await self.expectJoinerReached(joined, topics: topics, feed: feed, key: key, round: round)
        }

        func expectJoinerReached(
            _ joined: SharedSubscription<Int, Never>, topics: AsyncSharedTopics<Int, Int, Never>,
            feed: AsyncStream<Int>.Continuation, key: Int, round: Int
        ) async throws {
            #expect(topics.isLive(key), "round \(round): the joiner's key is live")
            #expect(topics.subscriberCount(of: key) == 1, "round \(round)")
            let element = round * 16 + key
            feed.yield(element)
            // A joiner of a freed subject would never receive it: the hang guard reports it.
            let received = await withTimeoutOrNil("round \(round): the element reaches the joiner", seconds: 20) {
                var iterator = joined.makeAsyncIterator()
                return await iterator.next()
            }
            guard let received else {
                Issue.record("round \(round): \(Self.describe(topics, key: key, joined: joined))")
                throw CancellationError()
            }
            #expect(received == element, "round \(round)")
            try await topics.waitUntilFreed(key)
        }

        /// What the topics' pump and hub look like (for a failure's message; read once the
        /// joiner's wait was cancelled, so the joiner may have left).
        static func describe(
            _ topics: AsyncSharedTopics<Int, Int, Never>, key: Int, joined: SharedSubscription<Int, Never>
        ) -> String {
            let session = topics.topics.session!
            let pump = session.state.withLock { state in
                "generation \(state.generation), installed \(state.pump != nil), retiring \(state.retiring != nil)"
            }
            let live = session.liveKeys.load(ordering: .sequentiallyConsistent)
            let pumping = session.pumping.load(ordering: .sequentiallyConsistent)
            let hubCount = session.hub.subscriberCount
            let hubState = session.hub.state.withLock { "\($0.machine.upstream), task \($0.upstreamTask != nil)" }
            return "(\(pump), pumping \(pumping), live keys \(live), hub subscribers \(hubCount), "
                + "joiner backlog \(String(describing: joined.backlog)), key count \(topics.keyCount), hub \(hubState), subject count \(topics.subscriberCount(of: key)))"
        }

        /// Many rounds of `race`: each round a subscriber joins key `round % 8` while the last
        /// subscriber of key `leavingKey(round)` leaves; at the end no key is left.
        func raceJoinsAgainstLastLeaves(
            _ name: String, leavingKey: @escaping @Sendable (_ round: Int) -> Int
        ) async throws {
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            // Kept alive for good: one iteration of the one stream, whatever the pump does.
            let topics = stream.share(by: { $0 % 16 }, keepAlive: .seconds(Int64.max))
            try await withProgressWatchdog(name) { progress in
                for round in 0..<Self.rounds {
                    let leaving = HeldSubscription(topics.subscribe(to: leavingKey(round)))
                    let key = round % 8
                    try await self.race(leaving, againstAJoinOf: key, topics: topics, feed: feed, round: round)
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
            feed.finish()
        }

        @Test("a join racing the last leave of its key keeps the key or gets a fresh one, and the pump reaches it")
        func joinRacingTheLastLeaveOfItsKey() async throws {
            try await self.raceJoinsAgainstLastLeaves("join racing leave") { round in round % 8 }
        }

        @Test("a join of one key racing the last leave of every other key gets a pump that reaches it")
        func joinRacingTheLastLeaveOfAnotherKey() async throws {
            try await self.raceJoinsAgainstLastLeaves("join racing the last key's leave") { round in 8 + round % 8 }
        }

        @Test("joins and leaves of many keys at once: the upstream's iterations never overlap, and it stops at the end")
        func churnNeverOverlapsIterations() async throws {
            let log = ScriptedLog()
            let topics = ScriptedBase(log: log).share(by: { $0 % 4 })
            try await withProgressWatchdog("churn") { progress in
                for round in 0..<(Self.rounds / 4) {
                    let start = Latch()
                    let tasks = (0..<4).map { key in
                        Task.detached {
                            await start.wait()
                            let subscription = topics.subscribe(to: (round + key) % 4)
                            _ = subscription
                        }
                    }
                    start.release()
                    for task in tasks { await task.value }
                    progress.tick()
                    if round % 64 == 0 { await Task.yield() }
                }
            }
            #expect(topics.keyCount == 0)
            try await waitUntil("every iteration to end") { log.stops == log.starts }
            #expect(log.overlaps == 0)
            #expect(log.endReports == log.stops, "each iteration ended once")
        }
    }
}
