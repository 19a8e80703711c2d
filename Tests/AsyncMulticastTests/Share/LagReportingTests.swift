// Lag reporting: `events(buffering:)` yields `.element`, `.missed(n)` exactly where a dropping
// policy dropped `n` elements, and `.evicted` as an evicted subscriber's last event.
//
// The randomized test drives a subject from one task: random sends, joins, leaves, and reads
// of one event from a subscriber that has one ready (a read that would suspend is never
// made), then the end (finish or fail) and every subscriber drained. Each subscriber is
// compared, event by event, with `LagReference`: a plain queue per subscriber that records
// how many elements were dropped before each element it keeps.

import Testing

@testable import AsyncMulticast

/// What one lag-reporting subscriber must see: the events its own queue would produce, with
/// the iterator's own state (the batch of a lossless policy) kept as `SharedEventIterator`
/// keeps it. A `.missed` takes nothing from the queue: the element after the gap stays
/// there, where the policy may still drop it (as tokio's receiver reports `Lagged(n)`).
struct LagReference {
    let policy: SharedBufferingPolicy
    /// Not yet taken from the shared buffer: each element with how many were dropped just
    /// before it.
    var queue: [(missed: Int, value: Int)] = []
    /// Dropped since the last queued element: reported before the next one, or the end.
    var trailing = 0
    /// Evicted by an `.evicting` policy and not told yet.
    var evicted = false
    /// Taken by the iterator in one read (lossless policies), returned before anything else.
    var batch: [Int] = []
    /// It returned its last event (`.evicted`): it has left.
    var ended = false

    init(policy: SharedBufferingPolicy) {
        self.policy = policy
    }

    /// How many ready elements a read takes besides the one it returns (see `SharedIterator`).
    var batchLimit: Int {
        switch self.policy {
        case .bounded(let n), .evicting(let n, _): return Swift.min(n / 2, 64)
        case .unbounded: return 64
        case .bufferingNewest, .bufferingOldest: return 0
        }
    }

    /// An element arrives while the subscriber is not waiting in `next()`.
    mutating func receive(_ value: Int) {
        guard !self.ended, !self.evicted else { return }
        switch self.policy {
        case .bufferingNewest(let limit):
            guard limit > 0 else {
                self.trailing += 1
                return
            }
            self.queue.append((self.trailing, value))
            self.trailing = 0
            if self.queue.count > limit {
                let dropped = self.queue.removeFirst()
                self.queue[0].missed += dropped.missed + 1
            }
        case .bufferingOldest(let limit):
            if self.queue.count < limit {
                self.queue.append((self.trailing, value))
                self.trailing = 0
            } else {
                self.trailing += 1
            }
        case .evicting(let limit, _):
            self.queue.append((0, value))
            if self.queue.count > limit {
                self.evicted = true
                self.queue.removeAll()
            }
        case .bounded, .unbounded:
            self.queue.append((0, value))
        }
    }

    /// Whether `next()` would return without suspending (before the end).
    var hasEventReady: Bool {
        !self.ended && (!self.batch.isEmpty || self.evicted || !self.queue.isEmpty)
    }

    /// The event `next()` returns now; only when `hasEventReady`.
    mutating func nextEvent() -> SharedEvent<Int> {
        precondition(self.hasEventReady)
        if !self.batch.isEmpty {
            return .element(self.batch.removeFirst())
        }
        if self.evicted, case .evicting(let limit, _) = self.policy {
            self.ended = true
            return .evicted(.hardLimit(limit))  // the reference applies only hard limits
        }
        if self.queue[0].missed > 0 {
            // The gap alone: the element after it stays queued.
            defer { self.queue[0].missed = 0 }
            return .missed(self.queue[0].missed)
        }
        let value = self.queue.removeFirst().value
        let taken = Swift.min(self.batchLimit, self.queue.count)
        self.batch = self.queue.prefix(taken).map(\.value)
        self.queue.removeFirst(taken)
        return .element(value)
    }

    /// Every event left once the subject has ended with `failure` (`nil`: finished), then how
    /// the iteration ends: `nil`, or the error.
    mutating func remainingEvents(endingWith failure: TestError?) -> (events: [SharedEvent<Int>], failure: TestError?) {
        var events: [SharedEvent<Int>] = []
        while self.hasEventReady { events.append(self.nextEvent()) }
        if self.ended { return (events, nil) }  // evicted: the end is not its business
        if self.trailing > 0 { events.append(.missed(self.trailing)) }
        self.ended = true
        return (events, failure)
    }
}

// Long: its races scale with scheduler round trips, so on a loaded machine they may take
// minutes. A hang fails sooner, by each test's no-progress watchdog or hang guard.
@Suite("Lag reporting: events(buffering:)", .timeLimit(.minutes(15)))
struct LagReportingTests {
    /// The policies a randomized run picks from.
    enum PolicyFamily: String, Sendable, CaseIterable, CustomStringConvertible {
        case newest, oldest, evicting, mixed

        var description: String {
            switch self {
            case .newest: return ".bufferingNewest(k)"
            case .oldest: return ".bufferingOldest(k)"
            case .evicting: return ".evicting(k)"
            case .mixed: return "all of them, and .unbounded, on one subject"
            }
        }

        func policies() -> [SharedBufferingPolicy] {
            switch self {
            // 6 and 9: iterators that take batches of 3 and 4 ahead, which the policy may
            // still drop (`HeldBatch.take`); the reference reads one at a time.
            case .newest: return [0, 1, 2, 3, 6, 9].map { .bufferingNewest($0) }
            case .oldest: return (0...3).map { .bufferingOldest($0) }
            case .evicting: return (1...4).map { .evicting($0) }
            case .mixed:
                return PolicyFamily.newest.policies() + PolicyFamily.oldest.policies()
                    + PolicyFamily.evicting.policies() + [.unbounded]
            }
        }
    }

    static let seeds: UInt64 = 200
    static let stepsPerRun = 120

    /// What the runs exercised, so that a test can tell that they reached the interesting cases.
    struct Coverage: Sendable {
        var elements = 0
        var missed = 0
        var evicted = 0

        mutating func count(_ event: SharedEvent<Int>) {
            switch event {
            case .element: self.elements += 1
            case .missed: self.missed += 1
            case .evicted: self.evicted += 1
            }
        }

        /// What `run` exercised over `seeds`, one seeded run each, until the first that reports
        /// a disagreement (recorded as an issue, with `name` and the seed). The hang guard is a
        /// watchdog that each run feeds, not a deadline for all of them that a loaded machine
        /// could miss.
        static func ofSeededRuns(
            _ what: String, seeds: Range<UInt64>, case name: String,
            _ run: @escaping @Sendable (UInt64, inout Coverage) async -> String?
        ) async throws -> Coverage {
            try await withProgressWatchdog(what) { progress -> Coverage in
                var coverage = Coverage()
                for seed in seeds {
                    if let failure = await run(seed, &coverage) {
                        Issue.record("\(name), seed \(seed): \(failure)")
                        break
                    }
                    progress.tick()
                    // A run rarely suspends: let the tests beside it run between runs.
                    await Task.yield()
                }
                return coverage
            }
        }
    }

    @Test(
        "lag counts are exact: every event, .missed position and count, matches a per-subscriber queue",
        arguments: PolicyFamily.allCases)
    func lagCountsAreExact(_ family: PolicyFamily) async throws {
        let coverage = try await Coverage.ofSeededRuns("200 seeded runs", seeds: 0..<Self.seeds, case: "\(family)") {
            await Self.run(family: family, seed: $0, coverage: &$1)
        }
        #expect(coverage.elements > 1_000)
        if family != .evicting { #expect(coverage.missed > 1_000, "the runs reached few gaps") }
        if family == .evicting || family == .mixed { #expect(coverage.evicted > 100, "the runs reached few evictions") }
    }

    /// One seeded run; the first disagreement, if any.
    static func run(family: PolicyFamily, seed: UInt64, coverage: inout Coverage) async -> String? {
        var rng = LCG(seed: seed &* 8 &+ UInt64(PolicyFamily.allCases.firstIndex(of: family)!))
        let policies = family.policies()
        let subjectPolicy = policies[Int(rng.next() % UInt64(policies.count))]
        let subject = AsyncPassthroughSubject<Int, TestError>(buffering: subjectPolicy)
        var iterators: [SharedEventIterator<Int, TestError>?] = []
        var references: [LagReference] = []
        var trace: [String] = []
        var sent = 0

        // Each subscriber has the subject's own policy (`events()`), or half the time one of
        // its own (`events(buffering:)`).
        func join(_ rng: inout LCG) {
            if rng.next() % 2 == 0 {
                iterators.append(subject.events().makeAsyncIterator())
                references.append(LagReference(policy: subjectPolicy))
                trace.append("join(\(subjectPolicy))")
            } else {
                let policy = policies[Int(rng.next() % UInt64(policies.count))]
                iterators.append(subject.events(buffering: policy).makeAsyncIterator())
                references.append(LagReference(policy: policy))
                trace.append("join(\(policy))")
            }
        }
        func failure(_ message: String) -> String {
            "\(message)\n  steps: \(trace.joined(separator: ", "))"
        }

        for _ in 0..<Int(rng.next() % 3) + 1 { join(&rng) }
        for _ in 0..<Self.stepsPerRun {
            let roll = rng.next() % 100
            switch roll {
            case 0..<45:
                subject.send(sent)
                for k in references.indices where iterators[k] != nil { references[k].receive(sent) }
                trace.append("send(\(sent))")
                sent += 1
            case 45..<90:
                let ready = references.indices.filter { iterators[$0] != nil && references[$0].hasEventReady }
                guard !ready.isEmpty else { continue }
                let k = ready[Int(rng.next() % UInt64(ready.count))]
                let expected = references[k].nextEvent()
                let event: SharedEvent<Int>?
                do throws(TestError) {
                    event = try await iterators[k]!.next()
                } catch {
                    return failure("subscriber #\(k) (\(references[k].policy)) threw \(error), expected \(expected)")
                }
                trace.append("read(#\(k)) -> \(event.map { "\($0)" } ?? "nil")")
                coverage.count(expected)
                guard event == expected else {
                    return failure(
                        "subscriber #\(k) (\(references[k].policy)) read \(String(describing: event)), expected \(expected)"
                    )
                }
                if references[k].ended { iterators[k] = nil }
            case 90..<95:
                if iterators.count < 6 { join(&rng) }
            default:
                let live = iterators.indices.filter { iterators[$0] != nil }
                guard live.count > 1 else { continue }
                let k = live[Int(rng.next() % UInt64(live.count))]
                iterators[k] = nil  // releasing the iterator leaves
                references[k].ended = true
                trace.append("leave(#\(k))")
            }
            if let violation = subject.storage.invariantViolation {
                return failure("invariant: \(violation)")
            }
        }

        let ending: TestError? = rng.next() % 2 == 0 ? nil : .other(Int(seed))
        if let ending { subject.fail(ending) } else { subject.finish() }
        trace.append(ending == nil ? "finish" : "fail")
        for k in iterators.indices where iterators[k] != nil {
            let expected = references[k].remainingEvents(endingWith: ending)
            var events: [SharedEvent<Int>] = []
            var thrown: TestError?
            do throws(TestError) {
                while let event = try await iterators[k]!.next() { events.append(event) }
            } catch {
                thrown = error
            }
            guard events == expected.events, thrown == expected.failure else {
                return failure(
                    """
                    subscriber #\(k) (\(references[k].policy)) drained \(events) then \(thrown.map { "threw \($0)" } ?? "nil"); \
                    expected \(expected.events) then \(expected.failure.map { "threw \($0)" } ?? "nil")
                    """)
            }
            for event in events { coverage.count(event) }
            // After its end, an iterator keeps returning nil.
            do throws(TestError) {
                let after = try await iterators[k]!.next()
                guard after == nil else { return failure("subscriber #\(k) returned \(after!) after its end") }
            } catch {
                return failure("subscriber #\(k) threw \(error) after its end")
            }
        }
        guard subject.subscriberCount == 0 else {
            return failure("\(subject.subscriberCount) subscribers left after draining")
        }
        return nil
    }

    // MARK: Where the count sits

    @Test("a subscriber waiting in next() misses nothing, even under .bufferingNewest(0)")
    func waitingSubscriberMissesNothing() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let joined = Signal<Void>()
        // The client asks again only after the rest was sent: otherwise, resumed with 1 on
        // the other core, it could be waiting again before 2 is sent, and receive it.
        let sent = Latch()
        let client = Task { () -> [SharedEvent<Int>] in
            var events = subject.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            joined.send(())
            var received: [SharedEvent<Int>] = []
            if let first = await events.next() { received.append(first) }
            await sent.wait()
            while let event = await events.next() { received.append(event) }
            return received
        }
        _ = await joined.next("the client joining")
        try await waitUntil("the client waits") { subject.storage.waitingCount == 1 }
        subject.send(1)  // handed to it while it waits
        subject.send(2)  // it is not waiting any more: dropped
        subject.send(3)  // dropped
        subject.finish()
        sent.release()
        #expect(await client.value == [.element(1), .missed(2)], "the count of what it missed comes before the end")
    }

    @Test("a .missed takes nothing: the element after the gap can still be dropped, as tokio's Lagged(n)")
    func missedTakesNothingUnderBufferingNewest() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(2))
        var client = subject.events().makeAsyncIterator()
        for n in 1...3 { subject.send(n) }  // keeps 2, 3
        #expect(await client.next() == .missed(1))
        for n in 4...6 { subject.send(n) }  // 2 was not taken by the .missed: it goes with 3 and 4
        subject.finish()
        let events = await client.readAll()
        #expect(events == [.missed(3), .element(5), .element(6)])
    }

    @Test("a .bufferingOldest(n) subscriber told of a gap still holds at most n")
    func missedTakesNothingUnderBufferingOldest() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingOldest(2))
        var client = subject.events().makeAsyncIterator()
        for n in 1...3 { subject.send(n) }  // keeps 1, 2; drops 3
        #expect(await client.next() == .element(1))
        #expect(await client.next() == .element(2))  // empty: it rejoins after the gap
        for n in 4...7 { subject.send(n) }  // keeps 4, 5; drops 6, 7
        #expect(await client.next() == .missed(1))
        subject.send(8)  // 4 and 5 are still the two it holds: dropped
        subject.finish()
        let events = await client.readAll()
        #expect(events == [.element(4), .element(5), .missed(3)])
    }

    @Test("a gap found while about to wait is reported at once, and the subscriber stays")
    func gapFoundBeforeSuspending() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(1))
        var client = subject.events().makeAsyncIterator()
        for n in 1...3 { subject.send(n) }
        #expect(await client.next() == .missed(2))
        #expect(await client.next() == .element(3))
        #expect(subject.subscriberCount == 1)
        subject.send(4)
        #expect(await client.next() == .element(4))
        subject.finish()
        #expect(await client.next() == nil)
    }

    @Test("a .missed count before a failure comes first, then the error")
    func missedBeforeAFailure() async {
        let subject = AsyncPassthroughSubject<Int, TestError>()
        var client = subject.events(buffering: .bufferingOldest(1)).makeAsyncIterator()
        for n in 1...4 { subject.send(n) }
        subject.fail(.boom)
        var events: [SharedEvent<Int>] = []
        var thrown: TestError?
        do throws(TestError) {
            while let event = try await client.next() { events.append(event) }
        } catch {
            thrown = error
        }
        #expect(events == [.element(1), .missed(3)])
        #expect(thrown == .boom)
    }

    @Test("a subscriber that read what it kept and rejoined reports the gap before the next element")
    func gapAfterRejoining() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var client = subject.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
        for n in 1...5 { subject.send(n) }  // keeps 1, 2; drops 3, 4, 5
        #expect(await client.next() == .element(1))
        subject.send(6)  // room for one: kept, after the gap
        subject.send(7)  // full again: dropped
        #expect(await client.next() == .element(2))
        #expect(await client.next() == .missed(3))
        #expect(await client.next() == .element(6))
        subject.send(8)
        #expect(await client.next() == .missed(1))
        #expect(await client.next() == .element(8))
        subject.finish()
        #expect(await client.next() == nil)
    }

    @Test("a view's events() reports with the view's policy; the plain view never reports")
    func viewEvents() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let view = subject.buffering(.bufferingNewest(1))
        var client = view.events().makeAsyncIterator()
        var plain = view.makeAsyncIterator()
        for n in 1...3 { subject.send(n) }
        subject.finish()
        #expect(await client.next() == .missed(2))
        #expect(await client.next() == .element(3))
        #expect(await client.next() == nil)
        #expect(await plain.next() == 3, "a plain iteration skips silently")
        #expect(await plain.next() == nil)
    }

    // MARK: Every face

    enum Face: String, NamedTestCase {
        case passthroughSubject, currentValueSubject, replaySubject, share, replay, multicast, sharedSource
    }

    @Test("events(buffering:) on every face reports the gap where it is", arguments: Face.allCases)
    func everyFace(_ face: Face) async throws {
        let lossy = SharedBufferingPolicy.bufferingNewest(1)
        var client: SharedEventIterator<Int, Never>
        let finish: @Sendable () -> Void
        // A current-value subject's subscriber starts with the current value, 0: dropped too.
        var expected: [SharedEvent<Int>] = [.missed(2), .element(3)]
        switch face {
        case .passthroughSubject:
            let subject = AsyncPassthroughSubject<Int, Never>()
            client = subject.events(buffering: lossy).makeAsyncIterator()
            for n in 1...3 { subject.send(n) }
            finish = { subject.finish() }
        case .currentValueSubject:
            let subject = AsyncCurrentValueSubject<Int, Never>(0)
            client = subject.events(buffering: lossy).makeAsyncIterator()
            for n in 1...3 { subject.send(n) }
            finish = { subject.finish() }
            expected = [.missed(3), .element(3)]
        case .replaySubject:
            let subject = AsyncReplaySubject<Int, Never>(replay: 1)
            client = subject.events(buffering: lossy).makeAsyncIterator()
            for n in 1...3 { subject.send(n) }
            finish = { subject.finish() }
        case .share, .replay:
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let shared = face == .share ? stream.share() : stream.replay(1)
            client = shared.events(buffering: lossy).makeAsyncIterator()
            // A reader that keeps up starts the upstream and tells when it produced 1, 2, 3.
            let reader = await SubscriberTask.join { shared.makeAsyncIterator() }
            for n in 1...3 { input.yield(n) }
            #expect(await reader.take(3) == [1, 2, 3])
            finish = { input.finish() }
        case .multicast:
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let multicast = stream.multicast()
            client = multicast.events(buffering: lossy).makeAsyncIterator()
            let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
            multicast.connect()
            for n in 1...3 { input.yield(n) }
            #expect(await reader.take(3) == [1, 2, 3])
            finish = { input.finish() }
        case .sharedSource:
            let emitters = Signal<AsyncSharedSource<Int, Never>.Emitter>()
            let source = AsyncSharedSource<Int, Never> { emitter in
                emitters.send(emitter)
                return {}
            }
            client = source.events(buffering: lossy).makeAsyncIterator()
            let reader = await SubscriberTask.join { source.makeAsyncIterator() }
            reader.request()  // the first demand starts the source
            let emitter = try #require(await emitters.next("the source starting"))
            for n in 1...3 { emitter.send(n) }
            #expect(await reader.answer() == 1)
            #expect(await reader.take(2) == [2, 3])
            finish = { emitter.finish() }
        }
        var events: [SharedEvent<Int>] = []
        for _ in expected.indices {
            if let event = await client.next() { events.append(event) }
        }
        #expect(events == expected)
        finish()
        #expect(await client.next() == nil)
    }

    // MARK: A multicast connection that ends

    @Test(
        "a multicast connection cancelled after drops: the gap is still reported where it is",
        arguments: [SharedBufferingPolicy.bufferingNewest(2), .bufferingOldest(2)])
    func gapSurvivesTheEndOfAConnection(_ policy: SharedBufferingPolicy) async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(buffering: .unbounded)
        var client = multicast.events(buffering: policy).makeAsyncIterator()
        let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        for n in 1...5 { input.yield(n) }
        #expect(await reader.take(5) == [1, 2, 3, 4, 5])
        connection.cancel()
        #expect(await reader.next() == nil)
        let events = await client.readAll()
        // What the same subscriber reports when the upstream finishes instead (see the
        // ServingClients guide): the ending of a connection must not lose the count.
        let expected: [SharedEvent<Int>] =
            policy == .bufferingNewest(2)
            ? [.missed(3), .element(4), .element(5)] : [.element(1), .element(2), .missed(3)]
        #expect(events == expected)
    }

    @Test("a multicast connection cancelled: a gap inside a .bufferingOldest queue is still reported where it is")
    func innerGapSurvivesTheEndOfAConnection() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(buffering: .unbounded)
        var client = multicast.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
        let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        for n in 1...5 { input.yield(n) }  // the client keeps 1, 2
        #expect(await reader.take(5) == [1, 2, 3, 4, 5])
        #expect(await client.next() == .element(1))
        for n in 6...7 { input.yield(n) }  // room for 6 after the gap; 7 dropped
        #expect(await reader.take(2) == [6, 7])
        connection.cancel()
        let events = await client.readAll()
        #expect(events == [.element(2), .missed(3), .element(6), .missed(1)])
    }
}
