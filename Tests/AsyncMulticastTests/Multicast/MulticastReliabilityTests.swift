// Reliability of multicast(): behaviour at the edges of the public API, with real tasks.
//
// - After a multicast connection is cancelled, the subscribers present at the cancel keep
//   exactly what was buffered for them, never see the next connection's elements, and do not
//   hold the next connection back.
// - Extreme arguments (`multicast(replay: Int.max)`, `Int.max` limits) work as documented.
//
// Every test body runs under `withTimeout`, so a hang is reported as a failure.

import Testing

@testable import AsyncMulticast

@Suite("Reliability: multicast", .timeLimit(.minutes(3)))
struct MulticastReliabilityTests {
    // MARK: - Multicast: subscribers present at a cancel

    /// A `.bounded(2)` multicast over `TaggedIterations` whose subscriber `old` never read:
    /// its first connection produced 2 elements, paused, and was cancelled.
    private static func cancelledAfterTwo() async throws -> (
        base: TaggedIterations, multicast: AsyncMulticastSequence<Int, Never>,
        old: SharedIterator<Int, Never>, first: MulticastConnection
    ) {
        let base = TaggedIterations()
        let multicast = base.multicast(buffering: .bounded(2))
        let old = multicast.makeAsyncIterator()
        let first = multicast.connect()
        try await waitUntil("the first iteration to produce 2 elements") { multicast.storage.bufferedCount == 2 }
        first.cancel()
        return (base, multicast, old, first)
    }

    /// Up to `count` elements of `iterator`, stopping early at its end.
    private static func read(_ count: Int, from iterator: inout SharedIterator<Int, Never>) async -> [Int] {
        var received: [Int] = []
        for _ in 0..<count {
            guard let element = await iterator.next() else { break }
            received.append(element)
        }
        return received
    }

    @Test(
        "multicast .bounded(2): a subscriber present at a cancel does not hold back the next connection, keeps its 2 elements, then ends"
    )
    func cancelledSubscriberDoesNotHoldBackNextConnection() async throws {
        try await withTimeout(seconds: 150) {
            // `old` does not read: the upstream produces 2 elements and pauses.
            var (base, multicast, old, first) = try await Self.cancelledAfterTwo()

            var fresh = multicast.makeAsyncIterator()
            let second = multicast.connect()
            #expect(second != first)
            let received = await Self.read(50, from: &fresh)
            try Task.checkCancellation()  // stopped by the hang guard: nothing more to check
            #expect(received == Array(1000..<1050), "the second iteration, from its first element")
            #expect(base.iterations == 2)

            // `old` has not read anything so far: it gets exactly the first iteration's two.
            #expect(await old.next() == 0)
            #expect(await old.next() == 1)
            #expect(await old.next() == nil)

            second.cancel()
            let rest = await fresh.readAll()
            #expect(rest == Array(1050..<(1050 + rest.count)), "drains the rest of the second iteration")
            // At most the 2 of its bound, plus the 1 its iterator's batch may hold
            // (`.bounded(2)` batches `min(2 / 2, 64)`), depending on how far ahead the
            // producer was at its 50th read.
            #expect(rest.count <= 3)
            #expect(multicast.subscriberCount == 0)
        }
    }

    @Test(
        "multicast .bounded(2): a subscriber that drained and ended after a cancel; the next connection delivers to a new subscriber"
    )
    func drainedSubscriberThenReconnect() async throws {
        try await withTimeout(seconds: 150) {
            var (base, multicast, old, _) = try await Self.cancelledAfterTwo()
            #expect(await old.next() == 0)
            #expect(await old.next() == 1)
            #expect(await old.next() == nil)
            #expect(multicast.subscriberCount == 0)

            var fresh = multicast.makeAsyncIterator()
            let second = multicast.connect()
            let received = await Self.read(50, from: &fresh)
            try Task.checkCancellation()  // stopped by the hang guard: nothing more to check
            #expect(received == Array(1000..<1050))
            second.cancel()
            let rest = await fresh.readAll()
            #expect(rest == Array(1050..<(1050 + rest.count)))
            #expect(multicast.subscriberCount == 0)
            #expect(base.iterations == 2)
        }
    }

    /// The multicast's default policy `.bounded(pace)` paces the first iteration: a lossless
    /// subscriber that does not read lets exactly `pace` elements through. Subscribers of
    /// every policy are present at the cancel; each must afterwards read exactly what its
    /// policy kept of those `pace` elements, then `nil`, while the second connection runs.
    @Test(
        "multicast: subscribers of every policy present at a cancel read what they had buffered, then nil, never the next connection's elements",
        arguments: [2, 4])
    func subscribersOfEveryPolicyKeepTheirBufferAcrossReconnect(pace: Int) async throws {
        try await withTimeout(seconds: 150) {
            let base = TaggedIterations()
            let multicast = base.multicast(buffering: .bounded(pace))
            let kept = Array(0..<pace)
            let old: [(policy: SharedBufferingPolicy, expected: [Int])] = [
                (.bounded(pace), kept),
                (.unbounded, kept),
                (.bufferingNewest(2), Array(kept.suffix(2))),
                (.bufferingOldest(2), Array(kept.prefix(2))),
                (.bufferingNewest(1), Array(kept.suffix(1))),
                (.bufferingOldest(1), Array(kept.prefix(1))),
                (.bufferingNewest(0), []),
                (.bufferingOldest(0), []),
            ]
            let olds = old.map { SubscriberBox(multicast.buffering($0.policy).makeAsyncIterator()) }
            let first = multicast.connect()
            try await waitUntil("the first iteration to produce \(pace) elements") {
                multicast.storage.bufferedCount == pace
            }
            first.cancel()

            var fresh = multicast.makeAsyncIterator()
            let second = multicast.connect()
            var received: [Int] = []
            for _ in 0..<20 {
                guard let element = await fresh.next() else { break }
                received.append(element)
            }
            try Task.checkCancellation()  // stopped by the hang guard: nothing more to check
            #expect(received == Array(1000..<1020), "the second iteration, from its first element")

            // While the second connection is running:
            for (index, (policy, expected)) in old.enumerated() {
                var got: [Int] = []
                while got.count <= pace + 30, let element = await olds[index].next() { got.append(element) }
                #expect(got == expected, "\(policy) subscriber present at the cancel")
            }
            #expect(multicast.subscriberCount == 1, "only the new subscriber is left")

            second.cancel()
            let rest = await fresh.readAll()
            #expect(rest == Array(1020..<(1020 + rest.count)))
            #expect(multicast.subscriberCount == 0)
            #expect(base.iterations == 2)
        }
    }

    /// 100 rounds of join / connect / produce / cancel, with subscribers of every policy
    /// joining and reading at seeded random moments (reads run in tasks, one at a time per
    /// subscriber), some of them spanning cancels. The elements of round `r` are `r * 1000 +
    /// i`, fed into that round's own iteration of the base.
    @Test("a reconnect storm: every subscriber sees elements of exactly one connection, in order, then nil")
    func reconnectStorm() async throws {
        // 0.1 s alone; under the thread sanitizer beside the other heavy suites its thousands
        // of yields queue behind their tasks, and it took 75 s (60 s was not a hang guard).
        try await withTimeout(seconds: 150) {
            let relay = Relay()
            let multicast = relay.multicast(buffering: .bounded(4))
            let policies: [SharedBufferingPolicy] = [
                .bounded(1), .bounded(4), .unbounded,
                .bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(3),
                .bufferingOldest(0), .bufferingOldest(1), .bufferingOldest(3),
            ]
            let rounds = 100
            var rng = LCG(seed: 0x5EED_2024)
            var subscribers: [StormSubscriber] = []

            func join(round: Int, beforeConnect: Bool, rng: inout LCG) {
                let policy = policies[Int(rng.next() % UInt64(policies.count))]
                subscribers.append(
                    StormSubscriber(
                        policy: policy, iteration: round, joinedBeforeConnect: beforeConnect,
                        sub: SubscriberBox(multicast.buffering(policy).makeAsyncIterator())))
            }
            func startRandomRead(rng: inout LCG) {
                let idle = subscribers.indices.filter { !subscribers[$0].ended && subscribers[$0].reading == nil }
                guard !idle.isEmpty else { return }
                subscribers[idle[Int(rng.next() % UInt64(idle.count))]].startRead()
            }
            func collectFinishedReads() async {
                for index in subscribers.indices { await subscribers[index].collect(wait: false) }
            }

            for round in 0..<rounds {
                if Task.isCancelled { break }
                // Disconnected: subscribers joining now wait for this round's connection.
                for _ in 0..<Int(rng.next() % 3) { join(round: round, beforeConnect: true, rng: &rng) }
                for _ in 0..<Int(rng.next() % 4) { startRandomRead(rng: &rng) }
                await collectFinishedReads()

                let connection = multicast.connect()
                try await waitUntil("iteration \(round) to start") { relay.iterations == round + 1 }
                var produced = 0
                for _ in 0..<(4 + Int(rng.next() % 12)) {
                    switch rng.next() % 5 {
                    case 0:
                        join(round: round, beforeConnect: false, rng: &rng)
                    case 1, 2:
                        for _ in 0...Int(rng.next() % 4) {
                            relay.yield(round * 1000 + produced, to: round)
                            produced += 1
                        }
                    case 3:
                        startRandomRead(rng: &rng)
                    default:
                        await collectFinishedReads()
                        await letOthersRun(Int(rng.next() % 20))
                    }
                }
                connection.cancel()
                await collectFinishedReads()
            }

            // Everyone present at the last cancel drains what is left, then ends.
            for index in subscribers.indices {
                await subscribers[index].collect(wait: true)
                var reads = 0
                while !subscribers[index].ended, reads < 10_000 {
                    if let element = await subscribers[index].sub.next() {
                        subscribers[index].received.append(element)
                    } else {
                        subscribers[index].ended = true
                    }
                    reads += 1
                }
            }

            var failures: [String] = []
            for (index, subscriber) in subscribers.enumerated() {
                let received = subscriber.received
                let label = "subscriber \(index) (\(subscriber.policy), round \(subscriber.iteration))"
                if !subscriber.ended { failures.append("\(label) never ended") }
                if let stray = received.first(where: { $0 / 1000 != subscriber.iteration }) {
                    failures.append("\(label) received \(stray) of another connection: \(received)")
                }
                if !isStrictlyIncreasing(received) { failures.append("\(label) out of order or repeated: \(received)") }
                switch subscriber.policy {
                case .bounded, .unbounded, .evicting:
                    if !isConsecutive(received) { failures.append("\(label) lossless but has a gap: \(received)") }
                    if subscriber.joinedBeforeConnect, let head = received.first, head != subscriber.iteration * 1000 {
                        failures.append("\(label) joined before connect() but missed the first element: \(received)")
                    }
                case .bufferingNewest, .bufferingOldest:
                    break
                }
            }
            let failureCount = failures.count
            #expect(failureCount == 0, "first failures: \(failures.prefix(5).map { String($0.prefix(300)) })")
            #expect(subscribers.count > 50, "the storm had subscribers")
            #expect(subscribers.contains { !$0.received.isEmpty }, "the storm delivered elements")
            #expect(multicast.subscriberCount == 0)
            #expect(relay.iterations == rounds)
        }
    }

    // MARK: - Extreme arguments

    @Test(
        "multicast(replay: Int.max): a late subscriber receives everything produced so far; the history survives a reconnection",
        arguments: [SharedBufferingPolicy.bounded(64)] + SharedBufferingPolicy.effectivelyUnbounded)
    func multicastReplayEverything(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 150) {
            let relay = Relay()
            let multicast = relay.multicast(replay: Int.max, buffering: policy)
            var early = multicast.makeAsyncIterator()
            let first = multicast.connect()
            try await waitUntil("the upstream to start") { relay.iterations == 1 }
            for value in 0..<10 { relay.yield(value, to: 0) }
            var earlyReceived: [Int] = []
            while earlyReceived.count < 10, let element = await early.next() { earlyReceived.append(element) }
            #expect(earlyReceived == Array(0..<10))

            var late = multicast.makeAsyncIterator()
            var lateReceived: [Int] = []
            for _ in 0..<10 {
                guard let element = await late.next() else { break }
                lateReceived.append(element)
            }
            #expect(lateReceived == Array(0..<10), "everything produced so far")

            first.cancel()
            #expect(await early.next() == nil)
            #expect(await late.next() == nil)

            // Joins while disconnected: the whole history at once, then the next connection.
            var next = multicast.makeAsyncIterator()
            var nextReceived: [Int] = []
            for _ in 0..<10 {
                guard let element = await next.next() else { break }
                nextReceived.append(element)
            }
            #expect(nextReceived == Array(0..<10))
            let second = multicast.connect()
            try await waitUntil("the upstream to restart") { relay.iterations == 2 }
            relay.yield(100, to: 1)
            #expect(await next.next() == 100)
            second.cancel()
            #expect(await next.next() == nil)
            #expect(multicast.subscriberCount == 0)
        }
    }
}

// MARK: - Helpers

/// A restartable base: every `makeAsyncIterator()` starts iteration `k` (0, 1, 2, …), which
/// yields `k * 1000`, `k * 1000 + 1`, … Like `Counter`, each `next()` first yields to other
/// tasks and returns `nil` once its task is cancelled.
private struct TaggedIterations: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    private let started = Lock(0)

    /// How many iterations were started.
    var iterations: Int { self.started.withLock { $0 } }

    struct AsyncIterator: AsyncIteratorProtocol {
        let first: Int
        var offset = 0

        mutating func next() async -> Int? {
            await Task.yield()
            if Task.isCancelled { return nil }
            defer { self.offset += 1 }
            return self.first + self.offset
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        let iteration = self.started.withLock { count -> Int in
            defer { count += 1 }
            return count
        }
        return AsyncIterator(first: iteration * 1000)
    }
}

/// One subscriber of the reconnect storm. Its reads run in tasks started by the test, one at
/// a time; `outcome` receives the result of the running one.
private struct StormSubscriber {
    let policy: SharedBufferingPolicy
    /// The only connection (round) whose elements it may receive.
    let iteration: Int
    let joinedBeforeConnect: Bool
    let sub: SubscriberBox<Int, Never>
    let outcome = Lock<Int??>(nil)
    var reading: Task<Void, Never>?
    var received: [Int] = []
    var ended = false

    init(policy: SharedBufferingPolicy, iteration: Int, joinedBeforeConnect: Bool, sub: SubscriberBox<Int, Never>) {
        self.policy = policy
        self.iteration = iteration
        self.joinedBeforeConnect = joinedBeforeConnect
        self.sub = sub
    }

    /// Starts one `next()` in a new task (unless one is running or the subscriber ended).
    mutating func startRead() {
        guard self.reading == nil, !self.ended else { return }
        let sub = self.sub
        let outcome = self.outcome
        self.reading = Task {
            let element = await sub.next()
            outcome.withLock { $0 = .some(element) }
        }
    }

    /// Records the running read's result if it finished (or, with `wait`, once it finishes).
    mutating func collect(wait: Bool) async {
        guard let task = self.reading else { return }
        if !wait, case .none = self.outcome.withLock({ $0 }) { return }
        await task.value
        let result = self.outcome.withLock { value -> Int?? in
            defer { value = nil }
            return value
        }
        self.reading = nil
        switch result {
        case .some(.some(let element)): self.received.append(element)
        case .some(.none): self.ended = true
        case .none: Issue.record("a finished read left no outcome")
        }
    }
}
