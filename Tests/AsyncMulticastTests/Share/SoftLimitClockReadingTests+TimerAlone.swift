// The soft limit's timer alone: a member that stays past its soft count is evicted once the
// duration has passed with no element sent after it went past: when that eviction takes the
// last subscriber of a share() (a leave, which the eviction's own reading answers), when the
// clock's sleeps fail, when deadlines and wake-ups interleave, and when the element that took
// it past was a waiting sender's, appended by another subscriber's read or by the sender's
// cancellation (critical sections other than a send's, which must still ask for the reading).
//
// Time is a `ManualClock`: a test waits for the timer to sleep on it, then moves it. Order
// comes from gates; timeouts are hang guards only.

import Testing

@testable import AsyncMulticast

@Suite("Soft limits: the timer alone evicts a member that stays past its soft count", .timeLimit(.minutes(2)))
struct SoftLimitTimerAloneTests {
    static let soft = SharedBufferingPolicy.evicting(64, softLimit: .above(2, for: .seconds(10)))

    /// A `share()` of a stream fed by the test, on `clock`: its one subscriber has read the
    /// first element (its demand started the upstream), then holds 3 > 2 from `clock`'s 0 s
    /// on. Returns once the timer sleeps toward the deadline, 10 s.
    private func shareWithAStalledSubscriber(
        keepAlive: Duration, clock: ManualClock, stopped: Signal<Void>
    ) async -> (
        AsyncShareSequence<Int, Never>, AsyncShareSequence<Int, Never>.AsyncIterator, AsyncStream<Int>.Continuation
    ) {
        let (upstream, feed) = AsyncStream.makeStream(of: Int.self)
        feed.onTermination = { _ in stopped.send(()) }
        let shared = upstream.share(buffering: Self.soft, keepAlive: keepAlive, clock: clock)
        var stalled = shared.makeAsyncIterator()
        feed.yield(1)
        #expect(await stalled.next() == 1)
        for n in 2...4 { feed.yield(n) }  // the third takes it past 2: the timer starts
        await clock.waitForSleepers(count: 1)
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(10)])
        return (shared, stalled, feed)
    }

    @Test("share(): the timer's eviction of the last subscriber stops the upstream, nothing produced after")
    func timersEvictionOfTheLastSubscriberStopsTheUpstream() async {
        let clock = ManualClock()
        let stopped = Signal<Void>()
        var (shared, stalled, feed) = await self.shareWithAStalledSubscriber(
            keepAlive: .zero, clock: clock, stopped: stopped)
        clock.advance(by: .seconds(10))
        _ = await stopped.next("the upstream stopped at the soft deadline")
        #expect(shared.subscriberCount == 0)
        #expect(await stalled.next() == nil, "it learns it was evicted")
        feed.finish()
    }

    @Test("share(keepAlive:): the timer's eviction of the last subscriber opens the window at the deadline")
    func timersEvictionOfTheLastSubscriberOpensTheKeepAliveWindow() async throws {
        let clock = ManualClock()
        let stopped = Signal<Void>()
        var (shared, stalled, feed) = await self.shareWithAStalledSubscriber(
            keepAlive: .seconds(30), clock: clock, stopped: stopped)
        clock.advance(by: .seconds(10))
        try await waitUntil("the timer sleeps toward the window's end, 40 s") {
            clock.sleeperDeadlines.map(\.offset) == [.seconds(40)]
        }
        #expect(shared.subscriberCount == 0)
        clock.advance(by: .milliseconds(29_999))
        let lingers: Bool
        if case .lingering = shared.storage.upstreamState { lingers = true } else { lingers = false }
        #expect(lingers, "39.999 s: the upstream lingers")
        clock.advance(by: .milliseconds(1))
        _ = await stopped.next("the upstream stopped when the window closed")
        #expect(await stalled.next() == nil)
        feed.finish()
    }

    @Test("a subject on a clock whose every sleep fails: each member past its soft count goes, and the timer ends")
    func everySleepFailingEvictsEachMemberPastItsSoftCount() async throws {
        let clock = ManualClock()
        clock.failEverySleep()
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.soft, clock: clock)
        let first = subject.subscribe()
        for n in 0..<3 { subject.send(n) }  // holds 3 > 2: the timer cannot sleep, so it is due at once
        #expect(await first.waitForEviction()?.reason == .softLimit)
        let second = subject.subscribe()
        for n in 3..<6 { subject.send(n) }
        #expect(await second.waitForEviction()?.reason == .softLimit, "a later member too")
        try await waitUntil("the timer task ended") { subject.storage.state.withLock { $0.timerTask == nil } }
        #expect(subject.subscriberCount == 0)
        #expect(subject.storage.invariantViolation == nil)
        subject.finish()
    }

    @Test("a subject: after one failed sleep, a member that goes past later is timed in full")
    func aFailedSleepDoesNotMakeALaterDeadlineDue() async throws {
        let clock = ManualClock()
        clock.failNextSleeps(1)
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.soft, clock: clock)
        let first = subject.subscribe()
        for n in 0..<3 { subject.send(n) }
        #expect(await first.waitForEviction()?.reason == .softLimit, "its timer's sleep failed: due at once")
        try await waitUntil("the timer task ended") { subject.storage.state.withLock { $0.timerTask == nil } }
        let second = subject.subscribe()
        for n in 3..<6 { subject.send(n) }  // t = 0: holds 3 > 2
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .milliseconds(9_999))
        #expect(second.backlog?.count == 3, "9.999 s of 10: kept")
        clock.advance(by: .milliseconds(1))
        #expect(await second.waitForEviction()?.reason == .softLimit)
        subject.finish()
    }

    @Test("a subject: members past their soft count at different times go each at its own deadline, by the timer alone")
    func membersPastAtDifferentTimesGoEachAtItsDeadline() async throws {
        let clock = ManualClock()
        let (subject, first, second) = subjectWithTwoMembers(on: clock)
        subject.send(2)  // t = 0: the first holds 3 > 2
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        subject.send(3)  // t = 5: the second holds 3 > 2; nothing is sent after this
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(10)])
        clock.advance(by: .seconds(5))
        #expect(await first.waitForEviction()?.reason == .softLimit, "at 10 s")
        try await waitUntil("the timer sleeps toward 15 s") {
            clock.sleeperDeadlines.map(\.offset) == [.seconds(15)]
        }
        #expect(second.backlog?.count == 3, "10 s: it went past at 5 s")
        clock.advance(by: .milliseconds(4_999))
        #expect(second.backlog?.count == 3, "14.999 s: kept")
        clock.advance(by: .milliseconds(1))
        #expect(await second.waitForEviction()?.reason == .softLimit, "at 15 s")
        #expect(subject.storage.invariantViolation == nil)
        subject.finish()
    }

    @Test("a subject: send(waitingForRoom:) that finds room starts the soft deadline")
    func aSendThatFindsRoom() async {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.soft, clock: clock)
        let stalled = subject.subscribe()
        for n in 0..<3 { await subject.send(waitingForRoom: n) }  // holds 3 > 2
        await clock.waitForSleepers(count: 1)
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(10)])
        clock.advance(by: .seconds(10))
        #expect(await stalled.waitForEviction()?.reason == .softLimit)
        subject.finish()
    }

    @Test("a current-value subject: update(_:) starts the soft deadline")
    func aCurrentValueUpdate() async {
        let clock = ManualClock()
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: Self.soft, clock: clock)
        let stalled = subject.subscribe()  // its greeting (0) counts against no limit
        for _ in 0..<3 { subject.update { $0 + 1 } }  // holds 3 > 2
        await clock.waitForSleepers(count: 1)
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(10)])
        clock.advance(by: .seconds(10))
        #expect(await stalled.waitForEviction()?.reason == .softLimit)
        subject.finish()
    }

    /// A subject whose default subscribers hold at most one element, with a soft-limited
    /// subscriber that holds 2 and a reader that holds 1, and a sender waiting for the reader
    /// to make room with the element that takes the soft-limited subscriber past 2.
    private func subjectWithAWaitingSender(
        clock: ManualClock
    ) async throws -> (
        AsyncPassthroughSubject<Int, Never>, SharedSubscription<Int, Never>, SharedIterator<Int, Never>,
        Task<Void, Never>
    ) {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1), clock: clock)
        var reader = subject.subscribe().makeAsyncIterator()
        let stalled = subject.subscribe(buffering: Self.soft)
        subject.send(1)
        #expect(await reader.next() == 1)
        subject.send(2)  // the reader is full; the stalled subscriber holds 2
        let sending = Task { await subject.send(waitingForRoom: 3) }
        try await waitUntil("the sender waits for room") { subject.storage.producersWaitingForRoom == 1 }
        #expect(subject.storage.state.withLock { $0.timerTask == nil }, "nobody past a soft count yet")
        return (subject, stalled, reader, sending)
    }

    @Test("a subject: a waiting sender's element appended by another subscriber's read starts the soft deadline")
    func aSendersElementAppendedByARead() async throws {
        let clock = ManualClock()
        var (subject, stalled, reader, sending) = try await self.subjectWithAWaitingSender(clock: clock)
        #expect(await reader.next() == 2)  // room: the sender's 3 goes in, the stalled one holds 3 > 2
        await sending.value
        await expectTheTimerEvicts(stalled, after: .seconds(10), on: clock)
        subject.finish()
        #expect(await reader.next() == 3)
    }

    @Test("a subject: a waiting sender's element appended by its cancellation starts the soft deadline")
    func aSendersElementAppendedByItsCancellation() async throws {
        let clock = ManualClock()
        let (subject, stalled, _, sending) = try await self.subjectWithAWaitingSender(clock: clock)
        sending.cancel()  // its element goes in past the bound: the stalled one holds 3 > 2
        await sending.value
        await expectTheTimerEvicts(stalled, after: .seconds(10), on: clock)
        subject.finish()
    }
}

/// The timer sleeps toward `deadline` and, when `clock` gets there, evicts `stalled` at its
/// soft limit, with nothing sent.
private func expectTheTimerEvicts(
    _ stalled: SharedSubscription<Int, Never>, after deadline: Duration, on clock: ManualClock
) async {
    await clock.waitForSleepers(count: 1)
    #expect(clock.sleeperDeadlines.map(\.offset) == [deadline])
    clock.advance(by: deadline)
    #expect(await stalled.waitForEviction()?.reason == .softLimit)
}
