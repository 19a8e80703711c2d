// Adversarial review, from outside, of `.evicting(hard, softLimit:)`, `SharedSubscription.backlog`
// and `SharedSubscription.waitForEviction()`.
//
// - The soft limit on the machine alone, against a reference model (random runs, several lanes,
//   replay greetings, slot reuse, invariants after every step), and through the public faces:
//   `.zero` as a second hard limit, a count of 0, a count of hard - 1, `Duration`'s extremes,
//   clocks set back and jumping, lanes of different soft limits on one `share()`, replay
//   greetings, `multicast()` with its connection.
// - Watchers racing the subscriber's leave, cancellation and eviction (many iterations),
//   thousands of watchers, a copy of a subscription watched after the iteration took it, slot
//   reuse (a watcher of an old subscriber must never hear of a new one's eviction), echoes
//   (a subscriber and a watcher sending into their own subject).
// - The backlog read from several tasks while several tasks send.
// - Invalid soft limits stop with a message naming the parameter and the value (exit tests).
//
// Order comes from gates (Signal, Latch, Tally, waitUntil on the storage's state); deadlines
// are hang guards only.
//
// Found and fixed: a subscriber waiting in next() was reported evicted with another one on a
// single lane; a clock spike kept later stragglers past their soft limit; a saturated soft
// deadline was reached by a clock reading Duration's largest value; a multicast disconnect
// turned an unread greeting into backlog.

import Synchronization
import Testing

@testable import AsyncMulticast

// MARK: - Helpers

/// A clock the machine-level tests set, that counts its readings.
private final class CountedTime: Sendable {
    private let state = Mutex((now: Duration.zero, readings: 0))

    var readings: Int { self.state.withLock { $0.readings } }
    var current: Duration { self.state.withLock { $0.now } }
    func set(_ now: Duration) { self.state.withLock { $0.now = now } }
    func advance(by duration: Duration) { self.state.withLock { $0.now += duration } }

    var now: @Sendable () -> Duration {
        {
            self.state.withLock { state in
                state.readings += 1
                return state.now
            }
        }
    }
}

/// `a + b`, or `Duration`'s limit it went past (the library's rule for deadlines).
private func saturated(_ a: Duration, _ b: Duration) -> Duration {
    let (sum, overflow) = a.attoseconds.addingReportingOverflow(b.attoseconds)
    guard overflow else { return Duration(attoseconds: sum) }
    return Duration(attoseconds: b > .zero ? .max : .min)
}

/// Whether `watcher` has returned: checked after the test made sure the storage no longer
/// holds it (`evictionWatcherCount`), so that `value` does not wait.
private func finished(_ watchers: [Task<Bool, Never>]) async -> [Bool] {
    var values: [Bool] = []
    for watcher in watchers { values.append(await watcher.value) }
    return values
}

// MARK: - The machine against a reference model

/// A reference model of `.evicting` lanes with soft limits, driven beside a real machine: each
/// step is applied to both and every subscriber's fate, element and backlog compared, the
/// machine's invariants checked, and whether the clock was read.
///
/// The rule modelled (SharedBufferingPolicy.SoftLimit's docs): after each element appended, a
/// member holding more than `hard` is evicted; one holding more than `count` is evicted if the
/// element `count` places after its cursor was produced `duration` ago or earlier. The machine
/// asks for the clock (read after the lock, `followedUp(clock:)`) only when some member of a
/// soft-limited lane holds more than its count, for a duration above zero. Time never goes
/// back here (set-back clocks have tests of their own).
private struct SoftLimitModel {
    struct Member {
        var id: SubscriberID
        var policy: SharedBufferingPolicy
        var cursor: Int
        var greeting: [Int]
        var evicted = false
        var maxHeld = 0
    }

    var machine: Machine
    let time: CountedTime
    let replay: Int
    var members: [Member] = []
    var producedAt: [Duration] = []
    var rng: LCG
    var trace: [String] = []
    var slotReuses = 0
    var softEvictions = 0
    var hardEvictions = 0

    static let policies: [SharedBufferingPolicy] = [
        .evicting(6),
        .evicting(6, softLimit: .above(2, for: .seconds(3))),
        .evicting(6, softLimit: .above(0, for: .seconds(1))),
        .evicting(6, softLimit: .above(5, for: .seconds(2))),  // hard - 1
        .evicting(8, softLimit: .above(3, for: .zero)),  // a second hard limit at 3
        .evicting(3, softLimit: .above(1, for: .seconds(Int64.max))),
        .evicting(4, softLimit: .above(1, for: Duration(attoseconds: .max))),
        .evicting(5, softLimit: .above(0, for: .zero)),
    ]

    init(seed: UInt64, replay: Int) {
        let time = CountedTime()
        self.time = time
        self.replay = replay
        self.rng = LCG(seed: seed)
        self.machine = Machine(policy: .evicting(6), replay: replay, mode: .push)
    }

    var tail: Int { self.producedAt.count }

    func fail(_ message: String) -> String {
        "\(message)\n  last steps: \(self.trace.suffix(12).joined(separator: "; "))"
    }

    mutating func join() {
        let policy = Self.policies[Int.random(in: 0..<Self.policies.count, using: &self.rng)]
        let id = self.machine.subscriberJoined(policy: policy)
        if id.generation > 0 { self.slotReuses += 1 }
        let greeting = Array(Swift.max(0, self.tail - self.replay)..<self.tail)
        self.members.append(Member(id: id, policy: policy, cursor: self.tail, greeting: greeting))
        self.trace.append("join #\(self.members.count - 1) \(policy) slot \(id.slot)")
    }

    mutating func push() -> String? {
        let position = self.tail
        let now = self.time.current
        self.producedAt.append(now)
        let readingsBefore = self.time.readings
        self.machine.push(position, clock: self.time.now)
        self.trace.append("push \(position) at \(now)")
        var expectsReading = false
        for k in self.members.indices where !self.members[k].evicted {
            guard case .evicting(let hard, let soft) = self.members[k].policy else { continue }
            let held = self.tail - self.members[k].cursor
            if held > hard {
                self.members[k].evicted = true
                self.hardEvictions += 1
                continue
            }
            if let soft, held > soft.count {
                // `.zero` is a second hard limit: evicted at once, no reading needed.
                if soft.duration > .zero { expectsReading = true }
                let measuredFrom = self.producedAt[self.members[k].cursor + soft.count]
                if saturated(measuredFrom, soft.duration) <= now {
                    self.members[k].evicted = true
                    self.softEvictions += 1
                    continue
                }
            }
            self.members[k].maxHeld = Swift.max(self.members[k].maxHeld, held)
        }
        let read = self.time.readings > readingsBefore
        if read != expectsReading {
            return self.fail("push \(position): the clock was read: \(read), expected \(expectsReading)")
        }
        return nil
    }

    mutating func read(_ k: Int) -> String? {
        var batch: [Int]? = nil
        var report = ReadReport()
        let action = self.machine.nextRequested(self.members[k].id, batch: &batch, report: &report)
        self.trace.append("read #\(k)")
        let member = self.members[k]
        if member.evicted {
            guard case .ended(.success(nil)) = action, report.evicted else {
                return self.fail(
                    "#\(k) (\(member.policy)) was evicted, its read gave \(action), report.evicted \(report.evicted)")
            }
            self.members.remove(at: k)
            return nil
        }
        if !member.greeting.isEmpty {
            guard case .element(let element, _) = action, element == member.greeting[0] else {
                return self.fail("#\(k) expected its greeting's \(member.greeting[0]), got \(action)")
            }
            self.members[k].greeting.removeFirst()
            return nil
        }
        if member.cursor < self.tail {
            guard case .element(let element, _) = action, element == member.cursor else {
                return self.fail("#\(k) (\(member.policy)) expected \(member.cursor), got \(action)")
            }
            self.members[k].cursor += 1
            return nil
        }
        guard case .nothingReady = action else {
            return self.fail("#\(k) caught up, expected to suspend, got \(action)")
        }
        return nil
    }

    mutating func leave(_ k: Int) {
        _ = self.machine.subscriberLeft(self.members[k].id)
        self.trace.append("leave #\(k)")
        self.members.remove(at: k)
    }

    func check() -> String? {
        if let violation = self.machine.invariantViolation() { return self.fail("invariant: \(violation)") }
        for (k, member) in self.members.enumerated() {
            let backlog = self.machine.backlog(of: member.id)
            if member.evicted {
                if backlog != nil { return self.fail("#\(k) evicted, but its backlog is \(backlog!)") }
            } else {
                let held = self.tail - member.cursor
                guard let backlog, backlog.count == held, backlog.highWaterMark == Swift.max(held, member.maxHeld)
                else {
                    return self.fail(
                        "#\(k) (\(member.policy)) backlog \(String(describing: backlog)), expected (\(held), \(Swift.max(held, member.maxHeld)))"
                    )
                }
            }
        }
        return nil
    }

    mutating func step() -> String? {
        let roll = Int.random(in: 0..<100, using: &self.rng)
        switch roll {
        case 0..<12:
            if self.members.count < 12 { self.join() }
        case 12..<20:
            if !self.members.isEmpty { self.leave(Int.random(in: 0..<self.members.count, using: &self.rng)) }
        case 20..<50:
            if !self.members.isEmpty, let problem = self.read(Int.random(in: 0..<self.members.count, using: &self.rng))
            {
                return problem
            }
        case 50..<65:
            let step = [Duration.zero, .milliseconds(500), .seconds(1), .seconds(2), .seconds(3)]
            self.time.advance(by: step[Int.random(in: 0..<step.count, using: &self.rng)])
        default:
            if let problem = self.push() { return problem }
        }
        return self.check()
    }
}

// MARK: - The suite

@Suite("Evicting: soft limits, backlog, waitForEviction", .timeLimit(.minutes(5)))
struct SoftLimitBacklogTests {
    // MARK: The machine against the model

    @Test(
        "random runs: soft and hard evictions, elements, backlogs and clock readings match the model",
        arguments: [0, 3])
    func machineMatchesTheSoftLimitModel(replay: Int) async {
        var softEvictions = 0
        var hardEvictions = 0
        var slotReuses = 0
        for seed in UInt64(1)...60 {
            var model = SoftLimitModel(seed: seed &* 7919 &+ UInt64(replay), replay: replay)
            for step in 0..<500 {
                // Seconds of work under a sanitizer: let the tests beside it run now and then.
                if step % 25 == 0 { await Task.yield() }
                if let problem = model.step() {
                    Issue.record("seed \(seed), replay \(replay): \(problem)")
                    return
                }
            }
            softEvictions += model.softEvictions
            hardEvictions += model.hardEvictions
            slotReuses += model.slotReuses
        }
        // The runs reached what they are about.
        #expect(softEvictions > 50)
        #expect(hardEvictions > 50)
        #expect(slotReuses > 50)
    }

    @Test(
        "soft limit .above(n, for: .zero) evicts exactly as a hard limit n, whatever the other hard limit and the clock"
    )
    func zeroDurationIsASecondHardLimit() {
        // Two machines, the same steps: one `.evicting(n)`, one `.evicting(big, softLimit: .above(n, for: .zero))`.
        for seed in UInt64(1)...40 {
            var rng = LCG(seed: seed)
            let time = CountedTime()
            let n = Int.random(in: 1...5, using: &rng)
            var hard = Machine(policy: .evicting(n), replay: 0, mode: .push)
            var soft = Machine(policy: .evicting(n + 7), replay: 0, mode: .push)
            let hardPolicy = SharedBufferingPolicy.evicting(n)
            let softPolicy = SharedBufferingPolicy.evicting(n + 7, softLimit: .above(n, for: .zero))
            var pairs: [(SubscriberID, SubscriberID)] = []
            var position = 0
            for step in 0..<400 {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0:
                    pairs.append((hard.subscriberJoined(policy: hardPolicy), soft.subscriberJoined(policy: softPolicy)))
                case 1...4:
                    guard !pairs.isEmpty else { continue }
                    let k = Int.random(in: 0..<pairs.count, using: &rng)
                    var (hr, sr) = (ReadReport(), ReadReport())
                    var (hb, sb): ([Int]?, [Int]?) = (nil, nil)
                    let a = hard.nextRequested(pairs[k].0, batch: &hb, report: &hr)
                    let b = soft.nextRequested(pairs[k].1, batch: &sb, report: &sr)
                    let same: Bool
                    switch (a, b) {
                    case (.element(let x, _), .element(let y, _)): same = x == y
                    case (.nothingReady, .nothingReady): same = true
                    case (.ended, .ended): same = hr.evicted == sr.evicted
                    default: same = false
                    }
                    guard same, hr.evicted == sr.evicted else {
                        Issue.record("seed \(seed), n \(n), step \(step): \(a) vs \(b)")
                        return
                    }
                    if case .ended = a { pairs.remove(at: k) }
                case 5:
                    time.advance(by: .seconds(Int64.random(in: 0...3, using: &rng)))
                default:
                    hard.push(position, clock: time.now)
                    soft.push(position, clock: time.now)
                    position += 1
                }
                for (h, s) in pairs {
                    let (x, y) = (hard.backlog(of: h), soft.backlog(of: s))
                    guard x?.count == y?.count, x?.highWaterMark == y?.highWaterMark else {
                        Issue.record(
                            "seed \(seed), n \(n), step \(step): backlogs \(String(describing: x)) vs \(String(describing: y))"
                        )
                        return
                    }
                }
                #expect(soft.invariantViolation() == nil)
            }
        }
    }

    // MARK: Through the public faces

    @Test(
        "`.above(count, for: .zero)` on a subject: count held is kept, count + 1 evicts at once, the clock never moving"
    )
    func zeroDurationOnASubject() async throws {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(10, softLimit: .above(3, for: .zero)), clock: clock)
        let stalled = subject.subscribe()
        let watcher = try await startWatchers(1, of: stalled, storage: subject.storage)[0]
        for n in 1...3 { subject.send(n) }
        #expect(stalled.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        #expect(subject.storage.evictionWatcherCount == 1)
        subject.send(4)
        #expect(await watcher.value)
        #expect(stalled.backlog == nil)
        var events = stalled.events.makeAsyncIterator()
        #expect(
            await events.next()?.eviction?.reason == .softLimit, "its buffer was released: the eviction comes first")
        #expect(await events.next() == nil)
    }

    @Test(
        "count 0: a subscriber waiting in next() is never evicted however long between elements; one not reading is, once the duration is over"
    )
    func countZero() async throws {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(100, softLimit: .above(0, for: .seconds(5))), clock: clock)
        let stalled = subject.subscribe()
        let reader = subject.subscribe()
        // (No watcher on the reader here: see waitingSubscriberNotReportedEvictedOneLane.)
        let stalledWatcher = try await startWatchers(1, of: stalled, storage: subject.storage)[0]
        let received = Tally()
        let readerTask = Task {
            var got: [Int] = []
            for await n in reader {
                got.append(n)
                received.add()
            }
            return got
        }
        // The reader waits in next() at each element: it holds nothing, whatever the clock says.
        try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
        subject.send(1)  // t = 0: the stalled subscriber holds 1 > 0, measured from now
        await received.wait(for: 1)
        for n in 2...20 {
            try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
            clock.advance(by: n == 2 ? .milliseconds(4999) : .seconds(1000))
            subject.send(n)
            await received.wait(for: n)
            if n == 2 {
                #expect(stalled.backlog?.count == 2, "4.999 s of 5: kept")
                #expect(subject.storage.evictionWatcherCount == 1)
            }
        }
        #expect(await stalledWatcher.value, "evicted by the first element after its 5 s")
        #expect(stalled.backlog == nil)
        #expect(reader.backlog != nil, "the reader waited at each element: never past the soft count")
        #expect(subject.storage.evictionWatcherCount == 0)
        // A long silence evicts too: the soft limit is a deadline, timed without elements.
        let silent = subject.subscribe()
        try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
        subject.send(21)
        await received.wait(for: 21)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1_000_000))
        #expect(await silent.waitForEviction() != nil, "nothing produced since: evicted at its deadline")
        subject.finish()
        #expect(await readerTask.value == Array(1...21))
    }

    /// Another subscriber is evicted while `healthy` waits in `next()` with a watcher: the
    /// watcher must go on waiting. `extraLane` adds a subscriber of another policy, which
    /// sends `append` through its general pass instead of the one-lane path.
    private func evictionNextToAWaitingWatchedSubscriber(extraLane: Bool) async throws -> Bool? {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let stalled = subject.subscribe()
        let healthy = subject.subscribe()
        let other = extraLane ? subject.subscribe(buffering: .unbounded) : nil
        let reader = SubscriberBox(healthy.makeAsyncIterator())
        let first = reader.startNext()
        try await waitUntil("healthy waits") { subject.storage.waitingCount == 1 }
        subject.send(1)  // handed to `healthy`; `stalled` holds 1
        #expect(await first.value == 1)
        let watcher = try await startWatchers(1, of: healthy, storage: subject.storage)[0]
        let second = reader.startNext()
        try await waitUntil("healthy waits again") { subject.storage.waitingCount == 1 }
        subject.send(2)  // `stalled` holds 2 > 1: evicted; `healthy` is handed 2
        #expect(await second.value == 2)
        #expect(await stalled.waitForEviction() != nil)
        #expect(healthy.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        let stillWaiting = subject.storage.evictionWatcherCount == 1
        #expect(stillWaiting, "healthy was not evicted: its watcher must still wait")
        subject.finish()
        #expect(await reader.next() == nil)
        _ = other
        return await watcher.value
    }

    @Test("with two lanes, a subscriber waiting in next() is not reported evicted when another one is")
    func waitingSubscriberNotReportedEvictedTwoLanes() async throws {
        #expect(try await self.evictionNextToAWaitingWatchedSubscriber(extraLane: true) == false)
    }

    @Test(
        "one lane: a subscriber waiting in next() is not reported evicted when another one is")
    func waitingSubscriberNotReportedEvictedOneLane() async throws {
        #expect(try await self.evictionNextToAWaitingWatchedSubscriber(extraLane: false) == false)
    }

    @Test(
        "a server's healthy clients, waiting for the next event, are not closed when one stalled client is evicted"
    )
    func healthyClientsKeepTheirConnections() async throws {
        let feed = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(4, softLimit: .above(1, for: .zero)))
        let stalled = feed.subscribe()
        let clients = (0..<20).map { _ in feed.subscribe() }
        let closed = Tally()
        // The ServingClients pattern: a task per client closes it when it is evicted.
        let closers = clients.map { client in
            Task {
                let evicted = await client.waitForEviction() != nil
                if evicted { closed.add() }
                return evicted
            }
        }
        try await waitUntil("20 watchers") { feed.storage.evictionWatcherCount == 20 }
        let received = Tally()
        let readers = clients.map { client in
            Task {
                var count = 0
                for await _ in client {
                    count += 1
                    received.add()
                }
                return count
            }
        }
        for n in 1...3 {
            try await waitUntil("every client waits") { feed.storage.waitingCount == 20 }
            feed.send(n)  // the stalled one goes at the 2nd
            await received.wait(for: 20 * n)
        }
        #expect(stalled.backlog == nil)
        #expect(closed.count == 0, "no healthy client was closed")
        feed.finish()
        for reader in readers { #expect(await reader.value == 3) }
        for closer in closers { #expect(await closer.value == false) }
    }

    @Test(
        "count = hard - 1 with a duration never evicts on its own: the element that would time it out passes the hard limit first"
    )
    func countHardMinusOne() async throws {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(4, softLimit: .above(3, for: .seconds(1))), clock: clock)
        let stalled = subject.subscribe()
        let oscillating = subject.subscribe()
        var iterator = oscillating.makeAsyncIterator()
        // `oscillating` reads one element per element sent, holding 3 then 4, for hours.
        for n in 1...3 { subject.send(n) }
        var expected = 1
        for n in 4...200 {
            clock.advance(by: .seconds(60))
            subject.send(n)  // it holds 4 > 3: past the soft count for a minute each time
            #expect(oscillating.backlog != nil, "element \(n)")
            if n == 4 {
                #expect(stalled.backlog == SubscriberBacklog(count: 4, highWaterMark: 4), "held 4 for 0 s")
            }
            // Read one (the iterator's batch takes at most 2 of `.evicting(4)`, so read until it
            // holds 3 again, as the held count shows).
            while let backlog = oscillating.backlog, backlog.count > 3 {
                #expect(await iterator.next() == expected)
                expected += 1
            }
        }
        #expect(stalled.backlog == nil, "the 5th element passed its hard limit")
        #expect(await stalled.waitForEviction() != nil)
        #expect(oscillating.backlog != nil, "never evicted")
    }

    @Test(
        "huge durations saturate: .seconds(Int64.max) and Duration's largest; a clock jumping near the limits does not trap"
    )
    func hugeDurations() async throws {
        let clock = ScriptedClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(100, softLimit: .above(1, for: .seconds(Int64.max))), clock: clock)
        let stalled = subject.subscribe()
        subject.send(1)
        subject.send(2)  // t = 0: past 1, measured from now, for Int64.max seconds
        clock.jump(to: Duration.seconds(Int64.max) - Duration(attoseconds: 1))
        subject.send(3)
        #expect(stalled.backlog?.count == 3, "one attosecond short")
        clock.jump(to: Duration.seconds(Int64.max))
        subject.send(4)
        #expect(stalled.backlog == nil, "the whole duration went by")

        // The largest duration: never reached from a reading below the limit.
        let otherClock = ScriptedClock()
        let other = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(100, softLimit: .above(0, for: Duration(attoseconds: .max))), clock: otherClock)
        let held = other.subscribe()
        otherClock.jump(to: .seconds(1))
        other.send(1)  // 1 s + the largest duration: saturated
        otherClock.jump(to: Duration(attoseconds: .max - 1))
        other.send(2)
        #expect(held.backlog?.count == 2, "deadline saturated to the largest Duration, reading one below it")
        otherClock.jump(to: Duration(attoseconds: .min))  // the far past: no overflow either way
        other.send(3)
        #expect(held.backlog?.count == 3)
        let early = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(100, softLimit: .above(0, for: .seconds(Int64.max))), clock: otherClock)
        let earlyHeld = early.subscribe()
        early.send(1)  // at the smallest reading: no overflow
        otherClock.jump(to: Duration(attoseconds: .min) + .seconds(Int64.max))
        early.send(2)
        #expect(earlyHeld.backlog == nil, "the whole duration went by, from the smallest reading")
        // A hard limit and a soft count at Int's limits.
        let wide = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(Int.max, softLimit: .above(Int.max - 1, for: .zero)), clock: clock)
        let wideSubscriber = wide.subscribe()
        for n in 1...100 { wide.send(n) }
        #expect(wideSubscriber.backlog == SubscriberBacklog(count: 100, highWaterMark: 100))
        var iterator = wideSubscriber.makeAsyncIterator()
        #expect(await iterator.take(100) == Array(1...100))
    }

    @Test(
        "a soft deadline saturated at Duration's largest value is not reached by a clock reading that value")
    func saturatedDeadlineAtTheLimit() async throws {
        let clock = ScriptedClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(100, softLimit: .above(0, for: .seconds(60))), clock: clock)
        let stalled = subject.subscribe()
        clock.jump(to: Duration(attoseconds: .max))
        subject.send(1)  // past 0 at the clock's largest reading: measured from now, for 60 s
        #expect(stalled.backlog?.count == 1, "0 s of 60 went by")
    }

    @Test(
        "a clock set back: the later deadlines come down to the current one; a clock jumping ahead evicts everyone timed out, with no element"
    )
    func clockSetBackAndJumps() async throws {
        let clock = ScriptedClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(1000, softLimit: .above(2, for: .seconds(10))), clock: clock)
        clock.jump(to: .seconds(100))
        let a = subject.subscribe()
        for n in 1...3 { subject.send(n) }  // a past 2 at t = 100: until 110
        let b = subject.subscribe()
        clock.jump(to: .seconds(1))  // set back
        for n in 4...6 { subject.send(n) }  // b past 2 at t = 1: until 11, and a's 110 comes down to 11
        clock.jump(to: .seconds(10))
        subject.send(7)
        #expect(a.backlog != nil && b.backlog != nil)
        clock.jump(to: .seconds(11))
        subject.send(8)
        #expect(a.backlog == nil && b.backlog == nil, "both measured until 11: no deadline outlives the jump back")
        // Jumps ahead: everyone past the soft count and timed out goes at the jump, with no element.
        let c = subject.subscribe()
        let d = subject.subscribe()
        for n in 9...11 { subject.send(n) }  // c and d past 2 at t = 11
        var reader = d.makeAsyncIterator()
        #expect(await reader.next() == 9)  // d holds 2 (one in its batch at most): not past
        while let backlog = d.backlog, backlog.count > 2 { _ = await reader.next() }
        clock.jump(to: .seconds(1_000_000))
        #expect(await c.waitForEviction() != nil, "no element since the jump: the timer evicted it")
        subject.send(12)
        #expect(d.backlog?.count == 1, "d read its three: it holds only the element just produced")
    }

    @Test(
        "a clock set back after a spike does not delay the soft limit of a subscriber that falls behind after it")
    func clockSpikeDoesNotDisableTheSoftLimit() async throws {
        let clock = ScriptedClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(1000, softLimit: .above(2, for: .seconds(10))), clock: clock)
        let straggler = subject.subscribe()  // stays past the soft count
        clock.jump(to: .seconds(1_000_000))  // a wall clock set a week ahead by mistake ...
        for n in 1...3 { subject.send(n) }
        clock.jump(to: .seconds(100))  // ... and corrected
        #expect(straggler.backlog != nil)
        let late = subject.subscribe()
        for n in 4...6 { subject.send(n) }  // `late` past 2 at t = 100: due at 110
        clock.jump(to: .seconds(200))
        subject.send(7)
        #expect(late.backlog == nil, "past its soft count for 100 s of 10")
    }

    @Test(
        "lanes with different soft limits through buffering(_:) views on one share(): each evicted on its own clock rule"
    )
    func lanesOnOneShare() async throws {
        let clock = ManualClock()
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let shared = stream.share(buffering: .unbounded, clock: clock)
        let policies: [SharedBufferingPolicy] = [
            .evicting(50, softLimit: .above(2, for: .seconds(5))),  // 0
            .evicting(50, softLimit: .above(4, for: .seconds(10))),  // 1
            .evicting(50, softLimit: .above(2, for: .zero)),  // 2
            .evicting(50),  // 3
            .evicting(6, softLimit: .above(2, for: .seconds(5))),  // 4
            .evicting(50, softLimit: .above(2, for: .seconds(5))),  // 5: the same lane as 0, reading
        ]
        let subscriptions = policies.map { shared.buffering($0).subscribe() }
        var watchers: [Task<Bool, Never>] = []
        for subscription in subscriptions {
            watchers += try await startWatchers(1, of: subscription, storage: shared.storage)
        }
        let received = Tally()
        let reader = Task {
            var got: [Int] = []
            for await n in shared {
                got.append(n)
                received.add()
            }
            return got
        }
        var readsFive = subscriptions[5].makeAsyncIterator()
        func produce(_ values: ClosedRange<Int>) async {
            for n in values { feed.yield(n) }
            await received.wait(for: values.upperBound)
        }
        func alive() -> [Bool] { subscriptions.map { $0.backlog != nil } }

        await produce(1...3)  // t = 0: 0, 4, 5 past 2 (until 5); 2 evicted at once
        #expect(alive() == [true, true, false, true, true, true])
        #expect(await readsFive.next() == 1)  // its batch takes 2 and 3: 5 holds nothing
        #expect(subscriptions[5].backlog?.count == 0)
        clock.advance(by: .seconds(4))
        await produce(4...5)  // t = 4: 1 past 4 (until 14); 5 holds 2
        #expect(alive() == [true, true, false, true, true, true])
        clock.advance(by: .seconds(1))
        await produce(6...6)  // t = 5: 0 and 4 time out (4 holds 6, its hard limit); 5 past 2 (until 10)
        #expect(alive() == [false, true, false, true, false, true])
        clock.advance(by: .seconds(4))
        await produce(7...7)  // t = 9
        #expect(alive() == [false, true, false, true, false, true])
        clock.advance(by: .seconds(1))
        await produce(8...8)  // t = 10: 5 times out, though its lane-mate 0 went earlier
        #expect(alive() == [false, true, false, true, false, false])
        clock.advance(by: .seconds(4))
        await produce(9...9)  // t = 14: 1 times out
        #expect(alive() == [false, false, false, true, false, false])
        #expect(subscriptions[3].backlog == SubscriberBacklog(count: 9, highWaterMark: 9))
        #expect(await finished(Array(watchers[0..<3]) + Array(watchers[4...])) == [true, true, true, true, true])
        #expect(shared.storage.evictionWatcherCount == 1, "the hard-only lane's watcher waits")
        feed.finish()
        #expect(await reader.value == Array(1...9))
        var hardOnly = subscriptions[3].makeAsyncIterator()
        #expect(await hardOnly.take(10) == Array(1...9))
        #expect(await watchers[3].value == false)
        #expect(shared.storage.invariantViolation == nil)
    }

    @Test("replay greetings count against no soft limit, even .above(0, for: .zero); what comes after joining is timed")
    func softLimitUnderReplayGreetings() async throws {
        let clock = ManualClock()
        let subject = AsyncReplaySubject<Int, Never>(
            replay: 5, buffering: .evicting(10, softLimit: .above(2, for: .seconds(5))), clock: clock)
        for n in 1...5 { subject.send(n) }
        let greeted = subject.subscribe()
        let strict = subject.buffering(.evicting(10, softLimit: .above(0, for: .zero))).subscribe()
        #expect(greeted.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        #expect(strict.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        clock.advance(by: .seconds(100))  // the greeting starts no clock
        // `strict` reads its whole greeting (it holds nothing), and waits.
        let strictReader = SubscriberBox(strict.makeAsyncIterator())
        for n in 1...5 { #expect(await strictReader.next() == n) }
        let waiting = strictReader.startNext()
        try await waitUntil("strict waits") { subject.storage.waitingCount == 1 }
        subject.send(6)  // handed to `strict`; `greeted` holds 1
        #expect(await waiting.value == 6)
        subject.send(7)  // greeted holds 2: at the soft count; `strict` (not waiting) holds 1 > 0: evicted
        #expect(strict.backlog == nil)
        #expect(greeted.backlog?.count == 2)
        subject.send(8)  // greeted past 2 at t = 100: until 105
        clock.advance(by: .milliseconds(4999))
        subject.send(9)
        #expect(greeted.backlog == SubscriberBacklog(count: 4, highWaterMark: 4))
        clock.advance(by: .milliseconds(1))
        subject.send(10)
        #expect(greeted.backlog == nil)
        var events = greeted.events.makeAsyncIterator()
        #expect(await events.next()?.eviction?.reason == .softLimit, "its greeting went with its buffer")
        #expect(await events.next() == nil)
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test(
        "multicast() with its connection: a soft limit of zero duration evicts; a disconnect keeps evicted ones evicted and lets the others drain"
    )
    func multicastAndConnect() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(replay: 2, buffering: .evicting(8, softLimit: .above(2, for: .zero)))
        let strict = multicast.subscribe()
        let lenient = multicast.subscribe(buffering: .evicting(8, softLimit: .above(3, for: .zero)))
        let strictWatcher = try await startWatchers(1, of: strict, storage: multicast.storage)[0]
        let lenientWatcher = try await startWatchers(1, of: lenient, storage: multicast.storage)[0]
        let connection = multicast.connect()
        for n in 1...3 { feed.yield(n) }
        #expect(await strictWatcher.value, "held 3 > 2")
        try await waitUntil("lenient holds 3") { lenient.backlog?.count == 3 }
        #expect(multicast.storage.evictionWatcherCount == 1)
        connection.cancel()
        #expect(await strict.waitForEviction() != nil, "still evicted after the connection ended")
        #expect(lenient.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        #expect(multicast.storage.evictionWatcherCount == 1, "lenient still has to drain")
        var lenientReader = lenient.makeAsyncIterator()
        #expect(await lenientReader.take(4) == [1, 2, 3])
        #expect(await lenientWatcher.value == false, "it ended without being evicted")
        var strictReader = strict.events.makeAsyncIterator()
        #expect(await strictReader.next()?.eviction?.reason == .softLimit)

        // Connected again (the stream ended with its cancelled iteration): a new subscriber is
        // greeted with the replay (2, 3), then the end.
        let later = multicast.subscribe()
        #expect(later.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        let laterWatcher = try await startWatchers(1, of: later, storage: multicast.storage)[0]
        _ = multicast.connect()
        var laterReader = later.makeAsyncIterator()
        #expect(await laterReader.take(5) == [2, 3])
        #expect(await laterWatcher.value == false)
        #expect(multicast.storage.invariantViolation == nil)
    }

    @Test(
        "a multicast disconnect does not turn a replaying evicting subscriber's unread greeting into its backlog")
    func disconnectKeepsTheGreetingOutOfTheBacklog() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(replay: 3, buffering: .evicting(10))
        let connection = multicast.connect()
        for n in 1...3 { feed.yield(n) }
        try await waitUntil("the replay cache holds 1...3") { multicast.replayCache == [1, 2, 3] }
        let greeted = multicast.subscribe()
        feed.yield(4)
        try await waitUntil("4 held") { greeted.backlog?.count == 1 }
        connection.cancel()
        #expect(greeted.backlog == SubscriberBacklog(count: 1, highWaterMark: 1))
    }

    // MARK: Watchers

    @Test(
        "watchers racing the subscriber's eviction, its leave and their own cancellation: each returns once, none is left behind"
    )
    func watchersRaceEvictionLeaveAndCancellation() async throws {
        // 300 races: the hang guard is a watchdog that each race feeds.
        try await withProgressWatchdog("the races") { progress in
            var outcomes = [0, 0]
            for iteration in 0..<300 {
                progress.tick()
                let evicts = iteration % 3 != 1
                let leaves = iteration % 3 != 0
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
                let subscription = subject.subscribe()
                let start = Latch()
                let watchers = (0..<8).map { _ in
                    Task {
                        await start.wait()
                        return await subscription.waitForEviction() != nil
                    }
                }
                let cancelled = Set((0..<8).filter { ($0 + iteration) % 3 == 0 })
                let evictor = Task {
                    await start.wait()
                    if evicts {
                        subject.send(1)
                        subject.send(2)
                    }
                }
                let leaver = Task {
                    await start.wait()
                    if leaves { _ = subscription.makeAsyncIterator() }  // taken and released: it leaves
                }
                let canceller = Task {
                    await start.wait()
                    for index in cancelled { watchers[index].cancel() }
                }
                start.release()
                await evictor.value
                await leaver.value
                await canceller.value
                for (index, watcher) in watchers.enumerated() {
                    let value = await watcher.value
                    outcomes[value ? 1 : 0] += 1
                    if cancelled.contains(index) { continue }
                    if !evicts { #expect(value == false, "never evicted: iteration \(iteration)") }
                    if !leaves { #expect(value, "evicted, never left: iteration \(iteration)") }
                }
                #expect(subject.storage.evictionWatcherCount == 0, "iteration \(iteration)")
                #expect(subject.storage.invariantViolation == nil)
            }
            #expect(outcomes[0] > 0 && outcomes[1] > 0)
        }
    }

    @Test(
        "watchers racing the cancellation of the task iterating the subscriber and its eviction: the reader ends, each watcher returns, none is left"
    )
    func watchersRaceIterationCancellationAndEviction() async throws {
        // 200 races: the hang guard is a watchdog that each race feeds.
        try await withProgressWatchdog("the races") { progress in
            var endings: [String: Int] = [:]
            for iteration in 0..<200 {
                progress.tick()
                let subject = AsyncPassthroughSubject<Int, Never>(
                    buffering: .evicting(2, softLimit: .above(1, for: .zero)))
                let subscription = subject.subscribe()
                let tookFirst = Signal<Void>()
                let hold = Latch()
                let reader = Task { () -> String in
                    var events = subscription.events.makeAsyncIterator()
                    guard await events.next() == .element(0) else { return "no first element" }
                    tookFirst.send(())
                    await hold.wait()  // holding: it can be evicted now
                    while let event = await events.next() {
                        if event.eviction != nil { return "evicted" }
                    }
                    return "ended"
                }
                subject.send(0)
                _ = await tookFirst.next("the reader took 0")
                let start = Latch()
                let watchers = (0..<6).map { _ in
                    Task {
                        await start.wait()
                        return await subscription.waitForEviction() != nil
                    }
                }
                let evictor = Task {
                    await start.wait()
                    if iteration % 4 != 3 {
                        subject.send(1)
                        subject.send(2)  // holds 2 > 1: evicted
                    }
                }
                let canceller = Task {
                    await start.wait()
                    if iteration % 4 == 2 {
                        await evictor.value  // not cancelled: it reads once evicted, or would wait forever
                    } else {
                        reader.cancel()
                    }
                    hold.release()
                }
                start.release()
                await evictor.value
                await canceller.value
                let ending = await reader.value
                endings[ending, default: 0] += 1
                if iteration % 4 == 3 { #expect(ending == "ended", "never evicted") }
                if iteration % 4 == 2 { #expect(ending == "evicted", "never cancelled") }
                if iteration % 4 == 3 {
                    for watcher in watchers { #expect(await watcher.value == false) }
                }
                for watcher in watchers { _ = await watcher.value }
                subject.finish()
                #expect(subject.storage.evictionWatcherCount == 0, "iteration \(iteration)")
                #expect(subject.subscriberCount == 0, "iteration \(iteration)")
                // It has left. Evicted before it left (its iteration learned it, or was
                // cancelled after the eviction): a late watcher still gets the eviction.
                let late = await subscription.waitForEviction()
                if ending == "evicted" { #expect(late != nil, "its iteration ended by its eviction") }
                if iteration % 4 == 3 { #expect(late == nil, "never evicted") }
            }
            #expect(endings["evicted", default: 0] > 0 && endings["ended", default: 0] > 0, "\(endings)")
        }
    }

    @Test("slot reuse: a watcher of a subscriber that left never hears of the eviction of the next one in its slot")
    func slotReuse() async throws {
        // Deterministic: the old id, watched after it left, answers false at once.
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let old = subject.subscribe()
        _ = old.makeAsyncIterator()  // taken and released: it left
        let new = subject.subscribe()
        #expect(new.subscriber.id.slot == old.subscriber.id.slot, "the slot is reused")
        #expect(await old.waitForEviction() == nil)
        #expect(subject.storage.evictionWatcherCount == 0, "nothing stored for the old id")
        let newWatcher = try await startWatchers(1, of: new, storage: subject.storage)[0]
        subject.send(1)
        subject.send(2)
        #expect(await newWatcher.value)
        #expect(await old.waitForEviction() == nil)
        #expect(old.backlog == nil, "the old id does not read the new subscriber's backlog")

        // Raced: old's watchers start as it leaves and the next subscriber joins its slot and
        // is evicted.
        // 300 races: the hang guard is a watchdog that each race feeds.
        try await withProgressWatchdog("the slot races") { progress in
            var reused = 0
            for _ in 0..<300 {
                progress.tick()
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
                let old = subject.subscribe()
                let start = Latch()
                let oldWatchers = (0..<4).map { _ in
                    Task {
                        await start.wait()
                        return await old.waitForEviction() != nil
                    }
                }
                let churn = Task {
                    await start.wait()
                    _ = old.makeAsyncIterator()  // leaves
                    let new = subject.subscribe()
                    subject.send(1)
                    subject.send(2)
                    return new
                }
                start.release()
                let new = await churn.value
                if new.subscriber.id.slot == old.subscriber.id.slot { reused += 1 }
                for watcher in oldWatchers { #expect(await watcher.value == false) }
                #expect(await new.waitForEviction() != nil)
                #expect(subject.storage.evictionWatcherCount == 0)
            }
            #expect(reused == 300)
        }
    }

    @Test("thousands of watchers: all of an evicted subscriber's get true, all of a leaving one's get false")
    func thousandsOfWatchers() async throws {
        let (subject, (_, evictedWatchers), (leaving, leavingWatchers)) =
            try await evictingSubjectWithTwoWatchedSubscriptions(limit: 2, watchers: (3000, 3000))
        var reader = leaving.makeAsyncIterator()
        for n in 1...3 {
            subject.send(n)
            #expect(await reader.next() == n)
        }
        #expect(await finished(evictedWatchers).allSatisfy { $0 })
        #expect(subject.storage.evictionWatcherCount == 3000)
        subject.finish()
        #expect(await reader.next() == nil)
        #expect(await finished(leavingWatchers).allSatisfy { !$0 })
        #expect(subject.storage.evictionWatcherCount == 0)
    }

    @Test(
        "a copy of the subscription, watched after the iteration took it: true on eviction, and still after the iteration learnt it"
    )
    func copyWatchedAfterTheIterationTookIt() async throws {
        let subject = AsyncPassthroughSubject<Int, any Error>(buffering: .evicting(2))
        let subscription = subject.subscribe()
        let copy = subscription
        let tookFirst = Signal<Int>()
        let resume = Latch()
        let reader = Task { () -> String in
            var iterator = subscription.makeAsyncIterator()
            do {
                guard let first = try await iterator.next() else { return "ended" }
                tookFirst.send(first)
                await resume.wait()
                while try await iterator.next() != nil {}
                return "ended"
            } catch is SubscriberEvictedError {
                return "evicted"
            } catch {
                return "\(error)"
            }
        }
        subject.send(1)
        #expect(await tookFirst.next("the reader took 1") == 1)
        // A second iteration of the copy ends at once: the subscriber is taken.
        var again = copy.makeAsyncIterator()
        #expect(try await again.next() == nil)
        #expect(subject.subscriberCount == 1, "the second iteration was of nothing")
        let watcher = try await startWatchers(1, of: copy, storage: subject.storage)[0]
        #expect(copy.backlog == SubscriberBacklog(count: 0, highWaterMark: 1), "it held 1 when it read it")
        subject.send(2)
        subject.send(3)
        #expect(copy.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        subject.send(4)
        #expect(await watcher.value)
        #expect(await copy.waitForEviction() != nil, "evicted, not yet learnt")
        resume.release()
        #expect(await reader.value == "evicted")
        #expect(await copy.waitForEviction() != nil, "it has left by its eviction: still true")
        #expect(copy.backlog == nil)
        #expect(subject.subscriberCount == 0)
    }

    @Test("a subscription nobody iterates, watched then released by all: it leaves once the last watcher is cancelled")
    func unwatchedUniteratedLeaves() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(3, softLimit: .above(1, for: .zero)))
        var subscription: SharedSubscription<Int, Never>? = subject.subscribe()
        let watchers = try await startWatchers(50, of: subscription!, storage: subject.storage)
        subscription = nil
        subject.send(1)
        #expect(subject.subscriberCount == 1)
        for watcher in watchers.dropLast() { watcher.cancel() }
        #expect(await finished(Array(watchers.dropLast())).allSatisfy { !$0 })
        #expect(subject.subscriberCount == 1, "one watcher still holds it")
        subject.send(2)  // held 2 > 1 with zero duration: evicted
        #expect(await watchers.last!.value)
        try await waitUntil("released by its last holder") { subject.subscriberCount == 0 }
    }

    // MARK: Echo

    @Test(
        "echo: watchers that send into their own subject when told of an eviction evict the next subscriber, in a chain"
    )
    func watcherEchoChain() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(10))
        var subscriptions: [SharedSubscription<Int, Never>] = []
        // Subscriber i joins after i elements: with 10 sent, subscriber i holds 10 - i.
        for i in 0..<10 {
            subscriptions.append(subject.subscribe())
            subject.send(i)
        }
        let watchers = subscriptions.enumerated().map { index, subscription in
            Task {
                let evicted = await subscription.waitForEviction() != nil
                if evicted { subject.send(100 + index) }  // the echo: from the watcher's task
                return evicted
            }
        }
        try await waitUntil("10 watchers stored") { subject.storage.evictionWatcherCount == 10 }
        let observer = subject.buffering(.unbounded).subscribe()
        var observerReader = observer.makeAsyncIterator()
        subject.send(10)  // subscriber 0 holds 11: evicted; its watcher's send evicts 1; ...
        #expect(await finished(watchers) == Array(repeating: true, count: 10))
        for expected in [10] + Array(100..<110) {
            #expect(await observerReader.next() == expected)
        }
        #expect(subscriptions.allSatisfy { $0.backlog == nil })
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test(
        "echo from the loop: a subscriber answering each element into its own subject survives a soft count of 1; answering twice evicts it, and its watcher's send reaches the others"
    )
    func loopEcho() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(4, softLimit: .above(1, for: .zero)))
        let single = subject.subscribe()
        let observer = subject.buffering(.unbounded).subscribe()
        let singleTask = Task {
            var count = 0
            for await n in single {
                count += 1
                if n < 1000 { subject.send(n + 1) } else { break }
            }
            return count
        }
        subject.send(1)
        #expect(await singleTask.value == 1000, "holding 1 at a time: never evicted")

        let double = subject.subscribe()
        let doubleWatcher = Task {
            let evicted = await double.waitForEviction() != nil
            if evicted { subject.send(-1) }  // the watcher's own echo
            return evicted
        }
        try await waitUntil("the watcher is stored") { subject.storage.evictionWatcherCount == 1 }
        let doubleTask = Task {
            var count = 0
            for await n in double {
                count += 1
                subject.send(n * 10)
                subject.send(n * 10 + 1)
            }
            return count
        }
        subject.send(5000)
        #expect(await doubleWatcher.value)
        let readByDouble = await doubleTask.value
        #expect(readByDouble >= 1 && readByDouble < 10)
        var observerReader = observer.makeAsyncIterator()
        var seen: [Int] = []
        while let n = await observerReader.next() {
            seen.append(n)
            if n == -1 { break }
        }
        #expect(seen.prefix(1000) == ArraySlice(1...1000))
        #expect(seen.last == -1)
        #expect(subject.storage.invariantViolation == nil)
    }

    // MARK: The backlog under concurrency

    @Test(
        "the backlog read from several tasks while several tasks send and one reads: consistent samples, exact totals")
    func backlogUnderConcurrentSends() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(1_000_000, softLimit: .above(500_000, for: .seconds(3600))))
        let read = subject.subscribe()
        let unread = subject.subscribe()
        let watchers = try await startWatchers(4, of: unread, storage: subject.storage)
        let senders = 4
        let perSender = 3000
        let total = senders * perSender
        let done = LockedFlag()
        let readerTask = Task {
            var count = 0
            for await _ in read {
                count += 1
                if count == total { break }
                if count % 500 == 0 { await Task.yield() }
            }
            return count
        }
        let samplers = (0..<2).map { _ in
            Task { () -> (samples: Int, maxCount: Int, problems: [String]) in
                var lastMark = 0
                var samples = 0
                var maxCount = 0
                var problems: [String] = []
                // At least one pass, also for a sampler that first runs after the senders are
                // done: the unread subscriber is always there to sample.
                repeat {
                    for subscription in [read, unread] {
                        guard let backlog = subscription.backlog else {
                            // The reader leaves once it has read everything.
                            if subscription.subscriber.id != read.subscriber.id { problems.append("a backlog was nil") }
                            continue
                        }
                        samples += 1
                        if backlog.count > backlog.highWaterMark { problems.append("\(backlog)") }
                        if backlog.count > total { problems.append("more than sent: \(backlog)") }
                        if subscription.subscriber.id == read.subscriber.id {
                            if backlog.highWaterMark < lastMark { problems.append("mark went down: \(backlog)") }
                            lastMark = backlog.highWaterMark
                            maxCount = Swift.max(maxCount, backlog.count)
                        }
                    }
                    await Task.yield()
                } while !done.isSet
                return (samples, maxCount, problems)
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    for n in 0..<perSender {
                        subject.send(sender * perSender + n)
                        if n % 256 == 0 { await Task.yield() }
                    }
                }
            }
        }
        #expect(await readerTask.value == total)
        done.set()
        var maxSampled = 0
        for sampler in samplers {
            let (samples, maxCount, problems) = await sampler.value
            #expect(samples > 0)
            #expect(problems.isEmpty, "\(problems.prefix(5))")
            maxSampled = Swift.max(maxSampled, maxCount)
        }
        let final = read.backlog
        #expect(final?.count == 0 || final == nil, "the reader took everything, then left")
        #expect(unread.backlog == SubscriberBacklog(count: total, highWaterMark: total))
        #expect(subject.storage.evictionWatcherCount == 4, "nobody evicted")
        for watcher in watchers { watcher.cancel() }
        #expect(await finished(watchers) == [false, false, false, false])
        #expect(subject.storage.invariantViolation == nil)
    }

    // MARK: Preconditions

    @Test func negativeSoftCount() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(buffering: .evicting(4, softLimit: .above(-1, for: .seconds(1))))
        }
        expectMessage(
            result, contains: "buffering: .evicting(4, softLimit: .above(-1, ...)) needs a soft limit from 0 to 3")
    }

    @Test func softCountAtTheHardLimit() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncPassthroughSubject<Int, Never>().subscribe(
                buffering: .evicting(4, softLimit: .above(4, for: .zero)))
        }
        expectMessage(
            result,
            contains: "subscribe(buffering:): .evicting(4, softLimit: .above(4, ...)) needs a soft limit from 0 to 3")
    }

    @Test func softCountAboveTheHardLimit() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncReplaySubject<Int, Never>(replay: 1).buffering(.evicting(1, softLimit: .above(9, for: .zero)))
        }
        expectMessage(
            result, contains: "buffering(_:): .evicting(1, softLimit: .above(9, ...)) needs a soft limit from 0 to 0")
    }

    @Test func negativeSoftDuration() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncPassthroughSubject<Int, Never>().events(
                buffering: .evicting(4, softLimit: .above(1, for: .milliseconds(-1))))
        }
        expectMessage(
            result,
            contains:
                "events(buffering:): .evicting(4, softLimit: .above(1, for: -0.001 seconds)) needs a duration of at least zero"
        )
    }

    @Test func hardLimitZeroWithASoftLimit() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1].async.multicast(buffering: .evicting(0, softLimit: .above(0, for: .zero)))
        }
        expectMessage(result, contains: "buffering: .evicting(0, softLimit: ...) needs a hard limit of at least 1")
    }

    @Test func invalidSoftLimitOnASubject() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncCurrentValueSubject<Int, Never>(
                0, buffering: .evicting(2, softLimit: .above(1, for: .seconds(-5))))
        }
        expectMessage(
            result,
            contains:
                "buffering: .evicting(2, softLimit: .above(1, for: -5.0 seconds)) needs a duration of at least zero")
    }

    @Test("the smallest valid soft limit is accepted and works")
    func smallestValidSoftLimit() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1, softLimit: .above(0, for: .zero)))
        let subscription = subject.subscribe()
        subject.send(1)
        #expect(subscription.backlog == nil, "held 1 > 0 with zero duration")
        #expect(
            SharedBufferingPolicy.evicting(1, softLimit: .above(0, for: .zero)).description
                == "evicting(1, softLimit: .above(0, for: 0.0 seconds))")
    }
}
