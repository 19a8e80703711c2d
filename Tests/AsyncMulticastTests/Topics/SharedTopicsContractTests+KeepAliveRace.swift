// share(by:) from outside: a join racing the end of the keep-alive window after the last key
// was freed. Whichever comes first, the joiner either continues the running iteration or gets
// a fresh one: it receives its key's elements in order, none twice, at most two of them
// produced before it joined, and the iterations never overlap. The upstream produces on
// demand (`Iterations`), so that it runs while the window is open.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive.SharedTopicsContractLoadTests {
    /// Joins key 0, reads one element and leaves; returns once key 0 is freed.
    static func visitAndLeave(_ topics: AsyncSharedTopics<Int, Int, Never>) async throws {
        var leaving: SharedIterator<Int, Never>? = topics.subscribe(to: 0).makeAsyncIterator()
        _ = await leaving!.next()
        leaving = nil
        try await waitUntil("key 0 freed") { !topics.isLive(0) }
    }

    /// The end of the keep-alive window (the clock moved past it) racing a join of `key` that
    /// reads three elements after `delay` yields: what the upstream had produced last before
    /// the join, and those.
    static func race(
        _ clock: ScriptedClock, againstAJoinOf key: Int, after delay: Int,
        of topics: AsyncSharedTopics<Int, Int, Never>,
        record: Iterations.Record
    ) async -> (before: Int, received: [Int]) {
        let start = Latch()
        let timer = Task.detached {
            await start.wait()
            clock.advance(by: .seconds(5))
        }
        let joiner = Task.detached { () -> JoinedAt in
            await start.wait()
            for _ in 0..<delay { await Task.yield() }
            // Values grow in the order they are produced (iteration * 1,000,000 + k).
            let before = record.produced.values.last ?? -1
            var iterator = topics.subscribe(to: key).makeAsyncIterator()
            var received: [Int] = []
            while received.count < 3, let n = await iterator.next() { received.append(n) }
            return JoinedAt(before: before, received: received)
        }
        start.release()
        await timer.value
        let joined = await joiner.value
        return (joined.before, joined.received)
    }

    struct JoinedAt: Sendable {
        let before: Int
        let received: [Int]
    }

    @Test("a join racing the end of keepAlive after the last leave: in order, none twice, iterations never overlap")
    func joinRacingTheEndOfKeepAlive() async throws {
        let keys = Self.keys
        let clock = ScriptedClock()
        let record = Iterations.Record()
        let topics = Iterations(record: record).share(by: { $0 % keys }, keepAlive: .seconds(5), clock: clock)
        let rounds = 300
        try await withProgressWatchdog("joins racing the end of keepAlive") { progress in
            for round in 0..<rounds {
                try await Self.visitAndLeave(topics)
                try await clock.waitForSleepers(1)  // the keep-alive window is open
                let key = round % keys
                let (before, received) = await Self.race(
                    clock, againstAJoinOf: key, after: round % 13, of: topics, record: record)
                let label = "round \(round), key \(key)"
                #expect(received.count == 3, "\(label): the upstream never ends")
                #expect(received.allSatisfy { $0 % keys == key }, "\(label): \(received)")
                #expect(zip(received, received.dropFirst()).allSatisfy { $0 < $1 }, "\(label): \(received)")
                let early = received.filter { $0 <= before }
                #expect(early.count <= 2, "\(label): \(early) produced before the join")
                try await waitUntil("round \(round): key \(key) freed") { !topics.isLive(key) }
                progress.tick()
            }
        }
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        try await waitUntil("the upstream stopped at the end") { record.state.withLock { $0.live } == 0 }
        let (started, overlaps) = record.state.withLock { ($0.started, $0.overlaps) }
        #expect(overlaps == 0)
        #expect(started > rounds / 20, "some joins came after the window closed (\(started) iterations)")
    }
}
