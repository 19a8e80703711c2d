// The eviction records each `.evicting` lane keeps (`Lane.evictions`) until its evicted members
// have left, seen through what they report (`SubscriberEviction`): several lanes and both
// limits evicting in one append, soft deadlines of one tail sharing a record, zero-duration
// soft limits, replay greetings, members released before they read, watchers that leave or
// are cancelled, a multicast connection that ends after an eviction and a reconnect, a slot
// taken again by a new subscriber, records bounded by the evicted members while one of them
// never reads, and concurrent senders.
//
// Time is a `ManualClock`; order comes from gates (the clock's sleepers, stored watchers,
// waiting subscribers), never from sleeps.

import Testing

@testable import AsyncMulticast

/// A subject on a new manual clock whose members follow `.evicting(hard)` with a soft limit
/// of 1 for 10 s: the clock, the policy (whose lane keeps the records) and the subject.
private func softLimitedSubject(
    hard: Int
) -> (ManualClock, SharedBufferingPolicy, AsyncPassthroughSubject<Int, Never>) {
    let clock = ManualClock()
    let policy = SharedBufferingPolicy.evicting(hard, softLimit: .above(1, for: .seconds(10)))
    return (clock, policy, AsyncPassthroughSubject<Int, Never>(buffering: policy, clock: clock))
}

@Suite("Eviction records across lanes, greetings, leaves and connections", .timeLimit(.minutes(2)))
struct EvictionRecordTests {
    /// The hard limit the record tests share: a member's third unread element evicts it.
    static let hardTwo = SharedBufferingPolicy.evicting(2)

    @Test("one append: a hard limit and a zero-duration soft limit of two lanes, each with its own reason")
    func hardAndSoftInOneAppend() async {
        let hard = SharedBufferingPolicy.evicting(3)
        let soft = SharedBufferingPolicy.evicting(10, softLimit: .above(2, for: .zero))
        let subject = AsyncPassthroughSubject<Int, Never>()
        let far = subject.subscribe(buffering: hard)
        var reader = subject.makeAsyncIterator()
        subject.send(1)
        let near = subject.subscribe(buffering: soft)
        for n in 2...3 { subject.send(n) }
        #expect(far.backlog == SubscriberBacklog(count: 3, highWaterMark: 3))
        #expect(near.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        #expect(subject.subscriberCount == 3)
        subject.send(4)  // far would hold 4 > 3, near holds 3 > 2: both go, in this append
        #expect(subject.subscriberCount == 1)
        #expect(subject.storage.evictionRecords(hard) == [RecordSummary(reason: .hardLimit, heldAt: 3, members: 1)])
        #expect(subject.storage.evictionRecords(soft) == [RecordSummary(reason: .softLimit, heldAt: 4, members: 1)])
        #expect(await far.waitForEviction() == .hardLimit(3))
        #expect(await near.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 3, highWaterMark: 3))
        for n in 1...4 { #expect(await reader.next() == n) }
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("one lane: the hard limit evicts one member, its soft deadline another; each keeps its own record")
    func hardThenSoftOnOneLane() async {
        let (clock, policy, subject) = softLimitedSubject(hard: 3)
        let far = subject.subscribe()
        for n in 1...2 { subject.send(n) }  // far holds 2 > 1 from t = 0
        let near = subject.subscribe()
        for n in 3...4 { subject.send(n) }  // far would hold 4 > 3: hard; near holds 2 > 1 from t = 0
        #expect(await far.waitForEviction() == .hardLimit(3))
        #expect(near.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        let nearEviction = SubscriberEviction(reason: .softLimit, backlog: 2, highWaterMark: 2)
        #expect(await near.waitForEviction() == nearEviction)
        #expect(
            subject.storage.evictionRecords(policy) == [
                RecordSummary(reason: .hardLimit, heldAt: 3, members: 1),
                RecordSummary(reason: .softLimit, heldAt: 4, members: 1),
            ])
        // The older record goes with its member; the newer one still answers.
        var farEvents = far.events.makeAsyncIterator()
        #expect(await farEvents.next() == .evicted(.hardLimit(3)))
        #expect(subject.storage.evictionRecords(policy) == [RecordSummary(reason: .softLimit, heldAt: 4, members: 1)])
        var nearEvents = near.events.makeAsyncIterator()
        #expect(await nearEvents.next() == .evicted(nearEviction))
        #expect(subject.storage.evictionRecords(policy) == [])
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("two soft deadlines at one tail share a record; each member keeps its distance, whoever leaves first")
    func softDeadlinesOfOneTailShareARecord() async {
        let (clock, policy, subject) = softLimitedSubject(hard: 16)
        let first = subject.subscribe()
        subject.send(1)
        let second = subject.subscribe()
        subject.send(2)  // first holds 2 > 1: its deadline is t = 10
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        subject.send(3)  // second holds 2 > 1: its deadline is t = 15; the tail stays at 3
        clock.advance(by: .seconds(5))
        #expect(await first.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 3, highWaterMark: 3))
        #expect(second.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        let secondEviction = SubscriberEviction(reason: .softLimit, backlog: 2, highWaterMark: 2)
        #expect(await second.waitForEviction() == secondEviction)
        #expect(subject.storage.evictionRecords(policy) == [RecordSummary(reason: .softLimit, heldAt: 3, members: 2)])
        var firstEvents = first.events.makeAsyncIterator()
        #expect(
            await firstEvents.next() == .evicted(SubscriberEviction(reason: .softLimit, backlog: 3, highWaterMark: 3)))
        #expect(subject.storage.evictionRecords(policy) == [RecordSummary(reason: .softLimit, heldAt: 3, members: 1)])
        #expect(await second.waitForEviction() == secondEviction)
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("a zero-duration soft limit of 0: a member caught up but not waiting goes with the next element")
    func zeroSoftCountWithoutDuration() async throws {
        let policy = SharedBufferingPolicy.evicting(4, softLimit: .above(0, for: .zero))
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy)
        let idle = subject.subscribe()
        let waiting = Task {
            var iterator = subject.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("a subscriber waits") { subject.storage.waitingCount == 1 }
        subject.send(1)
        #expect(await waiting.value == 1, "a waiting member takes the element at once: it holds nothing")
        #expect(await idle.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 1, highWaterMark: 1))
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("a replay greeting counts against no limit, and the eviction drops it")
    func replayGreetingIsNotHeld() async {
        let subject = AsyncReplaySubject<Int, Never>(replay: 3, buffering: .evicting(2))
        for n in 1...3 { subject.send(n) }
        let client = subject.subscribe()
        #expect(client.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        for n in 4...5 { subject.send(n) }
        #expect(client.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        subject.send(6)
        var events = client.events.makeAsyncIterator()
        #expect(await events.next() == .evicted(.hardLimit(2)), "the unread greeting went with the eviction")
        #expect(await events.next() == nil)
        #expect(subject.storage.evictionRecords(.evicting(2)) == [])
    }

    @Test("a greeting read with the shared elements behind it: the soft eviction keeps the burst's high-water mark")
    func greetingThenSoftDeadline() async {
        let clock = ManualClock()
        let policy = SharedBufferingPolicy.evicting(8, softLimit: .above(1, for: .seconds(10)))
        let subject = AsyncReplaySubject<Int, Never>(replay: 2, buffering: policy, clock: clock)
        for n in 1...2 { subject.send(n) }
        let client = subject.subscribe()
        for n in 3...7 { subject.send(n) }  // holds 5 > 1 from t = 0 (the greeting not counted)
        #expect(client.backlog == SubscriberBacklog(count: 5, highWaterMark: 5))
        var events = client.events.makeAsyncIterator()
        // One read takes the greeting and, in its batch (4), the first 3 shared elements.
        for n in 1...5 { #expect(await events.next() == .element(n)) }
        #expect(client.backlog == SubscriberBacklog(count: 2, highWaterMark: 5))
        await expectEvictedAtTheSoftDeadline(
            client, events: &events, clock: clock, after: .seconds(10),
            SubscriberEviction(reason: .softLimit, backlog: 2, highWaterMark: 5))
    }

    @Test("a current-value subject: the current value is a greeting, not held")
    func currentValueGreeting() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .evicting(2))
        let client = subject.subscribe()
        #expect(client.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        for n in 1...2 { subject.send(n) }
        #expect(client.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        subject.send(3)
        #expect(await client.waitForEviction() == .hardLimit(2))
        var events = client.events.makeAsyncIterator()
        #expect(await events.next() == .evicted(.hardLimit(2)))
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("members evicted together, then released before reading: the record goes with the last of them")
    func releasedBeforeReading() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.hardTwo)
        let kept = subject.subscribe()
        var released = [subject.makeAsyncIterator(), subject.makeAsyncIterator()]
        for n in 1...3 { subject.send(n) }
        #expect(
            subject.storage.evictionRecords(Self.hardTwo) == [RecordSummary(reason: .hardLimit, heldAt: 2, members: 3)])
        #expect(subject.storage.evictedCount(Self.hardTwo) == 3)
        released.removeLast()
        #expect(
            subject.storage.evictionRecords(Self.hardTwo) == [RecordSummary(reason: .hardLimit, heldAt: 2, members: 2)])
        released.removeAll()
        #expect(
            subject.storage.evictionRecords(Self.hardTwo) == [RecordSummary(reason: .hardLimit, heldAt: 2, members: 1)])
        #expect(subject.storage.invariantViolation == nil)
        #expect(await kept.waitForEviction() == .hardLimit(2))
        #expect(subject.subscriberCount == 0)
    }

    @Test("watchers: one cancelled, one resolved by the eviction, one by a leave; none is left stored")
    func watchersRacingLeaveAndCancel() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))
        let evicted = subject.subscribe()
        let leaving = subject.subscribe()
        let cancelled = Task { await evicted.waitForEviction() }
        let told = Task { await evicted.waitForEviction() }
        let toldOfTheLeave = Task { await leaving.waitForEviction() }
        try await waitUntil("three watchers stored") { subject.storage.evictionWatcherCount == 3 }
        cancelled.cancel()
        #expect(await cancelled.value == nil, "a cancelled watcher learns nothing")
        #expect(subject.storage.evictionWatcherCount == 2)
        var iterator = leaving.makeAsyncIterator()
        subject.send(1)
        #expect(await iterator.next() == 1)
        _ = consume iterator  // it leaves, not evicted
        #expect(await toldOfTheLeave.value == nil)
        for n in 2...3 { subject.send(n) }
        #expect(await told.value == .hardLimit(2))
        #expect(subject.storage.evictionWatcherCount == 0)
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("a multicast connection ends after an eviction, the next one evicts a subscriber in a freed slot")
    func connectionEndsThenReconnects() async throws {
        let relay = Relay()
        let room = relay.multicast(buffering: Self.hardTwo)
        let stalled = room.subscribe()
        var reader = room.makeAsyncIterator()
        let first = room.connect()
        try await waitUntil("the first iteration started") { relay.iterations == 1 }
        for n in 1...3 {
            relay.yield(n, to: 0)
            #expect(await reader.next() == n)
        }
        #expect(await stalled.waitForEviction() == .hardLimit(2))
        first.cancel()
        #expect(await reader.next() == nil)
        #expect(
            room.storage.evictionRecords(Self.hardTwo) == [],
            "the ended connection took the record to the private queue")
        #expect(await stalled.waitForEviction() == .hardLimit(2))

        let late = room.subscribe()  // in the reader's slot
        let second = room.connect()
        try await waitUntil("the second iteration started") { relay.iterations == 2 }
        for n in 10...12 { relay.yield(n, to: 1) }
        #expect(await late.waitForEviction() == .hardLimit(2))
        #expect(room.subscriberCount == 0)
        var events = stalled.events.makeAsyncIterator()
        #expect(await events.next() == .evicted(.hardLimit(2)))
        #expect(await events.next() == nil)
        #expect(room.storage.invariantViolation == nil)
        second.cancel()
    }

    @Test("a soft-limited member watched when the connection ends is told it left once it drains")
    func connectionEndsBeforeTheDeadline() async throws {
        let clock = ManualClock()
        let relay = Relay()
        let room = relay.multicast(buffering: .evicting(8, softLimit: .above(1, for: .seconds(10))), clock: clock)
        let client = room.subscribe()
        let watcher = Task { await client.waitForEviction() }
        try await waitUntil("the watcher is stored") { room.storage.evictionWatcherCount == 1 }
        let connection = room.connect()
        try await waitUntil("the iteration started") { relay.iterations == 1 }
        for n in 1...3 { relay.yield(n, to: 0) }
        try await waitUntil("the client holds 3") { client.backlog?.count == 3 }
        await clock.waitForSleepers(count: 1)
        connection.cancel()  // the client leaves its lane at once, with a private copy of the 3
        clock.advance(by: .seconds(10))  // past the deadline: its connection ended, nothing evicts it
        var iterator = client.makeAsyncIterator()
        for n in 1...3 { #expect(await iterator.next() == n) }
        #expect(await iterator.next() == nil)
        #expect(await watcher.value == nil)
    }

    @Test("a new subscriber in an evicted one's slot starts from nothing: its own backlog and high-water mark")
    func slotTakenAgain() async {
        let clock = ManualClock()
        let policy = SharedBufferingPolicy.evicting(16, softLimit: .above(3, for: .seconds(10)))
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy, clock: clock)
        let old = subject.subscribe()
        var oldEvents = old.events.makeAsyncIterator()
        for n in 1...10 { subject.send(n) }
        for n in 1...10 { #expect(await oldEvents.next() == .element(n)) }
        for n in 11...14 { subject.send(n) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        let oldEviction = SubscriberEviction(reason: .softLimit, backlog: 4, highWaterMark: 10)
        #expect(await old.waitForEviction() == oldEviction, "at the deadline (the timer task acts on its own)")
        #expect(await oldEvents.next() == .evicted(oldEviction))

        let new = subject.subscribe()
        #expect(new.subscriber.id.slot == old.subscriber.id.slot, "the freed slot is taken again")
        #expect(new.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        for n in 15...18 { subject.send(n) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        #expect(await new.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 4, highWaterMark: 4))
        #expect(await old.waitForEviction() == oldEviction, "the old subscription still answers with its own")
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("one evicted member never reads: the records stay as many as the evicted members not gone")
    func recordsStayBounded() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.hardTwo)
        let stuck = subject.subscribe()
        for n in 1...3 { subject.send(n) }
        for round in 0..<50 {
            let client = subject.subscribe()
            for n in 0..<3 { subject.send(100 * round + n) }
            #expect(subject.storage.evictionRecords(Self.hardTwo).count == 2)
            var events = client.events.makeAsyncIterator()
            #expect(await events.next() == .evicted(.hardLimit(2)))
            #expect(
                subject.storage.evictionRecords(Self.hardTwo) == [
                    RecordSummary(reason: .hardLimit, heldAt: 2, members: 1)
                ])
        }
        // Evicted members that stay: one record each, none more.
        var staying: [SharedSubscription<Int, Never>] = []
        for round in 0..<5 {
            staying.append(subject.subscribe())
            for n in 0..<3 { subject.send(1000 * round + n) }
        }
        let records = subject.storage.evictionRecords(Self.hardTwo)
        #expect(records.count == 6)
        #expect(records.map(\.members) == [1, 1, 1, 1, 1, 1])
        #expect(subject.storage.evictedCount(Self.hardTwo) == 6)
        #expect(subject.storage.invariantViolation == nil)
        for client in staying { #expect(await client.waitForEviction() == .hardLimit(2)) }
        #expect(await stuck.waitForEviction() == .hardLimit(2))
    }

    @Test("concurrent senders: every stalled subscriber's eviction is exact, every watcher told once")
    func concurrentSenders() async {
        let hard = SharedBufferingPolicy.evicting(8)
        let soft = SharedBufferingPolicy.evicting(16, softLimit: .above(3, for: .zero))
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
        let hardStalled = (0..<4).map { _ in subject.subscribe(buffering: hard) }
        let softStalled = (0..<4).map { _ in subject.subscribe(buffering: soft) }
        let watchers = (hardStalled + softStalled).map { client in Task { await client.waitForEviction() } }
        let reader = subject.subscribe()
        let reading = Task {
            var sum = 0
            for await n in reader { sum += n }
            return sum
        }
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for n in 1...50 { subject.send(sender * 1000 + n) }
                }
            }
        }
        subject.finish()
        let expectedSum = (0..<4).reduce(0) { $0 + $1 * 1000 * 50 + 50 * 51 / 2 }
        #expect(await reading.value == expectedSum)
        var told: [SubscriberEviction?] = []
        for watcher in watchers { told.append(await watcher.value) }
        #expect(
            told
                == Array(repeating: .hardLimit(8), count: 4)
                + Array(repeating: SubscriberEviction(reason: .softLimit, backlog: 4, highWaterMark: 4), count: 4))
        #expect(subject.storage.evictionRecords(hard).map(\.members).reduce(0, +) == 4)
        #expect(subject.storage.evictionRecords(soft).map(\.members).reduce(0, +) == 4)
        #expect(subject.storage.invariantViolation == nil)
    }
}

/// One eviction record of a lane, as the tests compare it.
struct RecordSummary: Equatable, CustomStringConvertible {
    let reason: SubscriberEviction.Reason
    let heldAt: Int
    let members: Int

    var description: String { "\(self.reason)@\(self.heldAt)×\(self.members)" }
}

extension MulticastStorage {
    /// The eviction records of `policy`'s lane, oldest first (none without such a lane).
    fileprivate func evictionRecords(_ policy: SharedBufferingPolicy) -> [RecordSummary] {
        self.state.withLock { state in
            let lane = state.machine.lanes.first { $0.policy == policy }
            return (lane?.evictions ?? []).map {
                RecordSummary(reason: $0.reason, heldAt: $0.heldAt, members: $0.members)
            }
        }
    }
}
