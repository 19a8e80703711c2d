// Reliability: behaviour at the edges of the public API, with real tasks.
//
// - A `.bounded(n)` subject counts only the elements a subscriber has not been handed yet, so
//   a subscriber that echoes what it reads with `send(waitingForRoom:)` never waits for itself.
// - After a multicast connection is cancelled, the subscribers present at the cancel keep
//   exactly what was buffered for them, never see the next connection's elements, and do not
//   hold the next connection back.
// - Extreme arguments (huge keep-alive windows, `Int.max` limits and replay counts, zero
//   limits, very many distinct per-subscriber policies) work as documented.
//
// Every test body runs under `withTimeout`, so a hang is reported as a failure.

import Testing

@testable import AsyncMulticast

// Long: its races scale with scheduler round trips, so on a loaded machine they may take
// minutes. A hang fails sooner, by each test's no-progress watchdog or hang guard.
@Suite("Reliability", .timeLimit(.minutes(15)))
struct ReliabilityTests {
    // MARK: - Bounded subjects count only what was not handed out

    @Test(
        "a .bounded(8) subject: after the subscriber read all 8 buffered elements, 8 send(waitingForRoom:) calls return without a reader"
    )
    func boundedSubjectHasRoomOnceTheSubscriberReadEverything() async throws {
        try await withTimeout(seconds: 60) {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var iterator = subject.makeAsyncIterator()
            for value in 0..<8 { subject.send(value) }
            var first: [Int] = []
            for _ in 0..<8 {
                guard let element = await iterator.next() else { break }
                first.append(element)
            }
            #expect(first == Array(0..<8))

            // Nothing is unconsumed now: the subscriber has room for 8 more, and nobody reads
            // while they are sent, so each of these must return on its own.
            var sent = 0
            for value in 8..<16 {
                await subject.send(waitingForRoom: value)
                sent += 1
            }
            try Task.checkCancellation()  // stopped by the hang guard: nothing more to check
            #expect(sent == 8)

            var second: [Int] = []
            for _ in 0..<8 {
                guard let element = await iterator.next() else { break }
                second.append(element)
            }
            #expect(second == Array(8..<16))
            subject.finish()
            #expect(await iterator.next() == nil)
        }
    }

    @Test(
        "a subscriber of a .bounded(n) subject that echoes every element with send(waitingForRoom:) never waits for itself, for every n in 1...64"
    )
    func echoingSubscriberNeverWaitsForItself() async throws {
        try await withTimeout(seconds: 60) {
            for bound in 1...64 {
                if Task.isCancelled { break }
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
                let iterator = subject.makeAsyncIterator()
                await Self.checkEcho(bound: bound, subject: subject, iterator: iterator)
            }
        }
    }

    @Test(
        "a .bounded(n) view paces send(waitingForRoom:) on an unbounded subject: it waits while the view's subscriber is full"
    )
    func boundedViewPacesSendWaitingForRoom() async throws {
        try await withTimeout(seconds: 60) {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var iterator = subject.buffering(.bounded(2)).makeAsyncIterator()
            subject.send(0)
            subject.send(1)  // the view's subscriber now holds 2 of 2
            let sent = Lock(false)
            let producer = Task {
                await subject.send(waitingForRoom: 2)
                sent.withLock { $0 = true }
            }
            try await waitUntil("the producer to wait for room") { subject.storage.parkedProducerCount != 0 }
            #expect(subject.storage.parkedProducerCount == 1, "one producer waits")
            #expect(sent.withLock { $0 } == false, "send(waitingForRoom:) waited for the full view")
            #expect(await iterator.next() == 0)  // makes room: the producer goes on
            await producer.value
            #expect(sent.withLock { $0 })
            #expect(await iterator.next() == 1)
            #expect(await iterator.next() == 2)
        }
    }

    @Test(
        "a subscriber of a .bounded(n) view on an unbounded subject that echoes every element never waits for itself, for every n in 1...64"
    )
    func echoingViewSubscriberNeverWaitsForItself() async throws {
        try await withTimeout(seconds: 60) {
            for bound in 1...64 {
                if Task.isCancelled { break }
                let subject = AsyncPassthroughSubject<Int, Never>()
                let iterator = subject.buffering(.bounded(bound)).makeAsyncIterator()
                await Self.checkEcho(bound: bound, subject: subject, iterator: iterator)
            }
        }
    }

    /// A burst of `max(1, bound - 1)` synchronous sends, then the subscriber (this task)
    /// echoes every element it receives (`element + 1000`) with `send(waitingForRoom:)` until
    /// it received `3 * bound + 5` elements. It never holds more than `bound - 1` unconsumed
    /// elements when it sends, so no send may wait. Afterwards the subject is finished and the
    /// subscriber reads the echoes it had not read yet, then `nil`.
    private static func checkEcho(
        bound: Int, subject: AsyncPassthroughSubject<Int, Never>, iterator: SharedIterator<Int, Never>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        var iterator = iterator
        let burst = max(1, bound - 1)
        let total = 3 * bound + 5
        for value in 0..<burst { subject.send(value) }
        var received: [Int] = []
        while received.count < total, let element = await iterator.next() {
            received.append(element)
            await subject.send(waitingForRoom: element + 1000)
        }
        if Task.isCancelled {
            // Stopped by the hang guard: say where.
            Issue.record("bound \(bound): stuck after receiving \(received)", sourceLocation: sourceLocation)
            return
        }
        subject.finish()
        var rest: [Int] = []
        while let element = await iterator.next() { rest.append(element) }

        // Everything sent, in order: the burst, then each echo in the order of the elements
        // it answers.
        var expected = Array(0..<burst)
        var answered = 0
        while expected.count < total + burst {
            expected.append(expected[answered] + 1000)
            answered += 1
        }
        #expect(received == Array(expected.prefix(total)), "bound \(bound)", sourceLocation: sourceLocation)
        #expect(
            rest == Array(expected.dropFirst(total)), "bound \(bound): the echoes not read yet",
            sourceLocation: sourceLocation)
        #expect(subject.subscriberCount == 0, "bound \(bound)", sourceLocation: sourceLocation)
    }

    // MARK: - Multicast: subscribers present at a cancel

    /// A `.bounded(2)` multicast over `TaggedIterations` whose subscriber `old` never read:
    /// its first connection produced 2 elements, paused, and was cancelled.
    private static func cancelledAfterTwo() async throws -> (
        base: TaggedIterations, multicast: AsyncMulticastSequence<TaggedIterations>,
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
        try await withTimeout(seconds: 60) {
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
            var rest: [Int] = []
            while let element = await fresh.next() { rest.append(element) }
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
        try await withTimeout(seconds: 60) {
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
            var rest: [Int] = []
            while let element = await fresh.next() { rest.append(element) }
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
        try await withTimeout(seconds: 60) {
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
            var rest: [Int] = []
            while let element = await fresh.next() { rest.append(element) }
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
        try await withTimeout(seconds: 60) {
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

    // MARK: - keepAlive at the extremes

    @Test(
        "share(keepAlive: .seconds(Int64.max)): leaving opens the window without trapping, and a new subscriber continues the same iteration"
    )
    func hugeKeepAliveInSeconds() async throws {
        try await withTimeout(seconds: 60) {
            try await Self.checkKeepAliveContinues(.seconds(Int64.max), timed: false)
        }
    }

    @Test(
        "share(keepAlive:) with the largest Duration: leaving opens the window without trapping, and a new subscriber continues the same iteration"
    )
    func largestDurationKeepAlive() async throws {
        try await withTimeout(seconds: 60) {
            try await Self.checkKeepAliveContinues(
                Duration(secondsComponent: .max, attosecondsComponent: 999_999_999_999_999_999), timed: false)
        }
    }

    @Test(
        "share(keepAlive:) with the longest timed window: the timer sleeps a day at most on the real clock, and a new subscriber continues the same iteration"
    )
    func longestTimedKeepAlive() async throws {
        try await withTimeout(seconds: 60) {
            try await Self.checkKeepAliveContinues(
                MulticastStorage<Int, Never>.longestKeepAlive - .nanoseconds(1), timed: true)
        }
    }

    /// One subscriber starts the upstream, reads an element and leaves; if the window is
    /// `timed`, the keep-alive timer sleeps on the real clock toward the extreme deadline,
    /// else (a window as long as forever) there is no timer; a new subscriber must continue
    /// the same base iteration.
    private static func checkKeepAliveContinues(
        _ keepAlive: Duration, timed: Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let relay = Relay()
        let clock = ObservedContinuousClock()
        let shared = relay.share(keepAlive: keepAlive, clock: clock)
        let first = SubscriberBox(shared.makeAsyncIterator())
        let firstRead = first.startNext()
        try await waitUntil("the upstream to start", sourceLocation: sourceLocation) { relay.iterations == 1 }
        relay.yield(1, to: 0)
        #expect(await firstRead.value == 1, sourceLocation: sourceLocation)
        first.release()
        #expect(shared.subscriberCount == 0, sourceLocation: sourceLocation)
        #expect(shared.storage.isLingering, "the keep-alive window is open", sourceLocation: sourceLocation)

        if timed {
            // The timer task computes its deadline and asks the real clock to sleep until it
            // (a day at most at once): the step that used to trap.
            let sleep = await clock.sleeps.next("the keep-alive timer's sleep", sourceLocation: sourceLocation)
            #expect(
                sleep.map { $0 > .seconds(86_000) && $0 <= .seconds(86_400) } == true,
                "a day at most: \(String(describing: sleep))", sourceLocation: sourceLocation)
        } else {
            #expect(
                shared.storage.state.withLock { $0.timerTask } == nil, "a window as long as forever is not timed",
                sourceLocation: sourceLocation)
        }
        await letOthersRun()

        let second = SubscriberBox(shared.makeAsyncIterator())
        relay.yield(2, to: 0)
        #expect(await second.next() == 2, "the same iteration goes on", sourceLocation: sourceLocation)
        #expect(relay.iterations == 1, "no restart inside the window", sourceLocation: sourceLocation)
        second.release()
        // End the upstream so that nothing lingers after the test.
        relay.finish(0)
        try await waitUntil("the upstream to end", sourceLocation: sourceLocation) {
            shared.storage.upstreamState == .terminated(.finished)
        }
    }

    @Test(
        "share(keepAlive:) with .nanoseconds(1) or .zero: after the last subscriber left and the upstream stopped, a new subscriber restarts it",
        arguments: [Duration.nanoseconds(1), .zero])
    func tinyKeepAliveRestarts(keepAlive: Duration) async throws {
        try await withTimeout(seconds: 60) {
            let relay = Relay()
            let shared = relay.share(keepAlive: keepAlive)
            let first = SubscriberBox(shared.makeAsyncIterator())
            let firstRead = first.startNext()
            try await waitUntil("the upstream to start") { relay.iterations == 1 }
            relay.yield(1, to: 0)
            #expect(await firstRead.value == 1)
            first.release()
            try await waitUntil("the upstream to stop") { shared.storage.upstreamState == .idle }

            let second = SubscriberBox(shared.makeAsyncIterator())
            let secondRead = second.startNext()
            try await waitUntil("the upstream to restart") { relay.iterations == 2 }
            relay.yield(7, to: 1)
            #expect(await secondRead.value == 7, "the new iteration's element")
            second.release()
            try await waitUntil("the upstream to stop again") { shared.storage.upstreamState == .idle }
            #expect(relay.iterations == 2)
        }
    }

    // MARK: - Many distinct per-subscriber policies

    @Test(
        "100,000 short-lived subscribers, each through a view with a policy of its own, each receive what was sent to them"
    )
    func hundredThousandDistinctViews() async throws {
        // 100,000 rounds, each a few scheduler round trips: the hang guard is a watchdog that
        // each round feeds, not a deadline a loaded machine could miss.
        try await withProgressWatchdog("100,000 views") { progress in
            let subject = AsyncPassthroughSubject<Int, Never>()
            let count = 100_000
            var delivered = 0
            var firstMismatch: (k: Int, got: Int?)?
            for k in 0..<count {
                if Task.isCancelled { break }
                progress.tick()
                var iterator = subject.buffering(.bufferingNewest(k + 1)).makeAsyncIterator()
                subject.send(k)
                let element = await iterator.next()
                if element == k {
                    delivered += 1
                } else if firstMismatch == nil {
                    firstMismatch = (k, element)
                }
            }
            #expect(delivered == count)
            #expect(firstMismatch == nil, "first mismatch: \(String(describing: firstMismatch))")
            #expect(subject.subscriberCount == 0)

            // The subject still works for a plain subscriber afterwards.
            var last = subject.makeAsyncIterator()
            subject.send(-1)
            subject.finish()
            #expect(await last.next() == -1)
            #expect(await last.next() == nil)
        }
    }

    // MARK: - Extreme arguments

    /// Policies whose limit never binds in these tests: each must behave like `.unbounded`.
    static let effectivelyUnbounded: [SharedBufferingPolicy] = [
        .bounded(Int.max), .bufferingNewest(Int.max), .bufferingOldest(Int.max), .unbounded,
    ]

    @Test(
        "subjects with an Int.max limit (policy or view) lose nothing, and send(waitingForRoom:) never waits",
        arguments: ReliabilityTests.effectivelyUnbounded)
    func subjectsWithExtremeLimits(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 60) {
            let values = Array(0..<300)
            // The subject's own policy, and a view with it on a default subject.
            let own = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let plain = AsyncPassthroughSubject<Int, Never>()
            for (subject, iterator) in [
                (own, own.makeAsyncIterator()), (plain, plain.buffering(policy).makeAsyncIterator()),
            ] {
                var iterator = iterator
                for value in values.prefix(150) { subject.send(value) }
                for value in values.dropFirst(150) { await subject.send(waitingForRoom: value) }
                subject.finish()
                var received: [Int] = []
                while let element = await iterator.next() { received.append(element) }
                #expect(received == values, "\(policy)")
            }

            // A current-value subject: the current value first, then every value sent.
            let current = AsyncCurrentValueSubject<Int, Never>(-1, buffering: policy)
            let currentPlain = AsyncCurrentValueSubject<Int, Never>(-1)
            for (subject, iterator) in [
                (current, current.makeAsyncIterator()),
                (currentPlain, currentPlain.buffering(policy).makeAsyncIterator()),
            ] {
                var iterator = iterator
                for value in values.prefix(150) { subject.send(value) }
                for value in values.dropFirst(150) { await subject.send(waitingForRoom: value) }
                subject.finish()
                var received: [Int] = []
                while let element = await iterator.next() { received.append(element) }
                #expect(received == [-1] + values, "\(policy)")
                #expect(subject.value == 299)
            }
        }
    }

    @Test(
        "share() and multicast() with an Int.max limit (policy or view) deliver the whole base in order",
        arguments: ReliabilityTests.effectivelyUnbounded)
    func sharedSequencesWithExtremeLimits(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 60) {
            let values = Array(0..<500)
            let shared = Counter(limit: 500).share(buffering: policy)
            let sharedView = Counter(limit: 500).share().buffering(policy)
            for sequence in [AnyIterable(shared), AnyIterable(sharedView)] {
                var iterator = sequence.make()
                var received: [Int] = []
                while let element = await iterator.next() { received.append(element) }
                #expect(received == values, "share, \(policy)")
            }

            let multicast = Counter(limit: 500).multicast(buffering: policy)
            var a = multicast.makeAsyncIterator()
            var b = multicast.buffering(policy).makeAsyncIterator()
            multicast.connect()
            var receivedA: [Int] = []
            while let element = await a.next() { receivedA.append(element) }
            var receivedB: [Int] = []
            while let element = await b.next() { receivedB.append(element) }
            #expect(receivedA == values, "multicast, \(policy)")
            #expect(receivedB == values, "multicast view, \(policy)")
        }
    }

    @Test(
        ".bufferingNewest(0) and .bufferingOldest(0) subscribers receive only what arrives while they wait",
        arguments: [SharedBufferingPolicy.bufferingNewest(0), .bufferingOldest(0)])
    func zeroLimitsReceiveOnlyWhileWaiting(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 60) {
            let own = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let plain = AsyncPassthroughSubject<Int, Never>()
            for (subject, iterator) in [
                (own, own.makeAsyncIterator()), (plain, plain.buffering(policy).makeAsyncIterator()),
            ] {
                let sub = SubscriberBox(iterator)
                subject.send(1)  // not waiting: not received
                let read = sub.startNext()
                try await waitUntil("the subscriber to wait") { subject.storage.waitingCount == 1 }
                subject.send(2)  // received by the waiting subscriber
                subject.send(3)  // not waiting any more: not received
                #expect(await read.value == 2, "\(policy)")
                subject.finish()
                #expect(await sub.next() == nil, "\(policy)")
            }

            // A current-value subject: not even the current value.
            let current = AsyncCurrentValueSubject<Int, Never>(0, buffering: policy)
            let currentPlain = AsyncCurrentValueSubject<Int, Never>(0)
            for (subject, iterator) in [
                (current, current.makeAsyncIterator()),
                (currentPlain, currentPlain.buffering(policy).makeAsyncIterator()),
            ] {
                let sub = SubscriberBox(iterator)
                subject.send(1)
                let read = sub.startNext()
                try await waitUntil("the subscriber to wait") { subject.storage.waitingCount == 1 }
                subject.send(2)
                subject.send(3)
                #expect(await read.value == 2, "\(policy)")
                subject.finish()
                #expect(await sub.next() == nil, "\(policy)")
                #expect(subject.value == 3)
            }
        }
    }

    @Test(
        "replay(Int.max): a late subscriber receives everything produced so far, in order, then the live elements; after the end, everything then nil",
        arguments: [SharedBufferingPolicy.bounded(64)] + ReliabilityTests.effectivelyUnbounded)
    func replayEverything(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 60) {
            let relay = Relay()
            let replayed = relay.replay(Int.max, buffering: policy)
            let early = SubscriberBox(replayed.makeAsyncIterator())
            let firstRead = early.startNext()
            try await waitUntil("the upstream to start") { relay.iterations == 1 }
            for value in 0..<10 { relay.yield(value, to: 0) }
            var earlyReceived: [Int] = []
            if let element = await firstRead.value { earlyReceived.append(element) }
            while earlyReceived.count < 10, let element = await early.next() { earlyReceived.append(element) }
            #expect(earlyReceived == Array(0..<10))

            let late = SubscriberBox(replayed.makeAsyncIterator())
            var lateReceived: [Int] = []
            for _ in 0..<10 {
                guard let element = await late.next() else { break }
                lateReceived.append(element)
            }
            #expect(lateReceived == Array(0..<10), "everything produced so far")

            for value in 10..<15 { relay.yield(value, to: 0) }
            relay.finish(0)
            while let element = await early.next() { earlyReceived.append(element) }
            while let element = await late.next() { lateReceived.append(element) }
            #expect(earlyReceived == Array(0..<15))
            #expect(lateReceived == Array(0..<15))

            var afterEnd = replayed.makeAsyncIterator()
            var afterEndReceived: [Int] = []
            while let element = await afterEnd.next() { afterEndReceived.append(element) }
            #expect(afterEndReceived == Array(0..<15), "the whole history, then nil")
            #expect(relay.iterations == 1)
            #expect(replayed.subscriberCount == 0)
        }
    }

    @Test(
        "multicast(replay: Int.max): a late subscriber receives everything produced so far; the history survives a reconnection",
        arguments: [SharedBufferingPolicy.bounded(64)] + ReliabilityTests.effectivelyUnbounded)
    func multicastReplayEverything(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 60) {
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

/// A restartable push source: every `makeAsyncIterator()` opens a channel of its own
/// (iteration 0, 1, 2, …) that the test feeds with `yield(_:to:)` and ends with `finish(_:)`.
/// An iteration waits for its channel, so an idle upstream costs nothing.
/// `ContinuousClock`, reporting the length of each sleep before it starts: shows that the
/// keep-alive timer sleeps on the real clock, without waiting for anything.
private struct ObservedContinuousClock: Clock {
    let base = ContinuousClock()
    /// The length of each sleep, from the moment it was asked for.
    let sleeps = Signal<Duration>()

    var now: ContinuousClock.Instant { self.base.now }
    var minimumResolution: Duration { self.base.minimumResolution }

    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
        self.sleeps.send(self.base.now.duration(to: deadline))
        try await self.base.sleep(until: deadline, tolerance: tolerance)
    }
}

private final class Relay: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    private let channels = Lock<[AsyncStream<Int>.Continuation]>([])

    /// How many iterations were started.
    var iterations: Int { self.channels.withLock { $0.count } }

    func makeAsyncIterator() -> AsyncStream<Int>.Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        self.channels.withLock { $0.append(continuation) }
        return stream.makeAsyncIterator()
    }

    func yield(_ element: Int, to iteration: Int) {
        _ = self.channels.withLock { $0[iteration] }.yield(element)
    }

    func finish(_ iteration: Int) {
        self.channels.withLock { $0[iteration] }.finish()
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

/// Makes iterators of a shared sequence or of a view, so both can be checked in one loop.
private struct AnyIterable: Sendable {
    let make: @Sendable () -> SharedIterator<Int, Never>

    init(_ shared: AsyncShareSequence<Counter>) { self.make = { shared.makeAsyncIterator() } }
    init(_ view: AsyncSharedView<Int, Never>) { self.make = { view.makeAsyncIterator() } }
}

extension MulticastStorage {
    /// Producers waiting in `send(waitingForRoom:)` (or an upstream waiting for room).
    fileprivate var parkedProducerCount: Int {
        self.state.withLock { $0.machine.parkedProducers.count }
    }

    /// Whether the keep-alive window is open (no subscriber, the upstream still running).
    fileprivate var isLingering: Bool {
        if case .lingering = self.upstreamState { return true }
        return false
    }
}
