// The soft limit as a deadline, through the public faces: a subscriber above its soft count is
// evicted when the duration ends, timed on the face's clock, with no element produced after
// it stopped reading; it stops counting as a subscriber at that moment; and the eviction of
// `share()`'s last subscriber is a leave for the upstream.
//
// Time is a `ManualClock`: the test waits for the timer task to sleep on it, then moves it.
// Order comes from gates (the clock's sleepers, waitForEviction, signals); deadlines are hang
// guards only.

import Testing

@testable import AsyncMulticast

@Suite("Soft limits are deadlines; an eviction is a leave", .timeLimit(.minutes(2)))
struct SoftLimitDeadlineTests {
    static let soft = SharedBufferingPolicy.evicting(64, softLimit: .above(3, for: .seconds(10)))

    @Test("a subject: a non-reading subscriber above its soft count goes at the deadline, nothing sent after")
    func subjectEvictsAtTheDeadline() async {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.soft, clock: clock)
        let stalled = subject.subscribe()
        let reader = subject.subscribe()
        for n in 1...4 { subject.send(n) }  // t = 0: the stalled subscriber holds 4 > 3
        var iterator = reader.makeAsyncIterator()
        for n in 1...4 { #expect(await iterator.next() == n) }
        // The timer task sleeps until the deadline; nothing is sent from here on.
        await clock.waitForSleepers(count: 1)
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(10)])
        #expect(subject.subscriberCount == 2)
        clock.advance(by: .milliseconds(9_999))
        #expect(stalled.backlog?.count == 4, "9.999 s of 10: no sleeper woke, it is kept")
        clock.advance(by: .milliseconds(1))
        #expect(await stalled.waitForEviction()?.reason == .softLimit, "evicted at the deadline, with nothing produced")
        #expect(subject.subscriberCount == 1, "it stopped counting when it was evicted")
        #expect(subject.storage.invariantViolation == nil)
        subject.send(5)
        #expect(await iterator.next() == 5, "the reader lost nothing")
        subject.finish()
        #expect(await iterator.next() == nil)
    }

    @Test("share(): a non-reading subscriber above its soft count goes at the deadline, nothing produced after")
    func shareEvictsAtTheDeadline() async {
        let clock = ManualClock()
        let (upstream, feed) = AsyncStream.makeStream(of: Int.self)
        let shared = upstream.share(buffering: Self.soft, clock: clock)
        let stalled = shared.subscribe()
        var reader = shared.makeAsyncIterator()
        feed.yield(1)
        #expect(await reader.next() == 1)  // its demand started the upstream
        for n in 2...4 { feed.yield(n) }
        for n in 2...4 { #expect(await reader.next() == n) }
        // The stalled subscriber holds 4 > 3 since the fourth element; the upstream stays quiet.
        await clock.waitForSleepers(count: 1)
        #expect(shared.subscriberCount == 2)
        clock.advance(by: .seconds(10))
        #expect(await stalled.waitForEviction()?.reason == .softLimit)
        #expect(shared.subscriberCount == 1)
        feed.yield(5)
        #expect(await reader.next() == 5)
        feed.finish()
        #expect(await reader.next() == nil)
    }

    @Test("multicast(clock:): a non-reading subscriber above its soft count goes at the deadline")
    func multicastEvictsAtTheDeadline() async {
        let clock = ManualClock()
        let (upstream, feed) = AsyncStream.makeStream(of: Int.self)
        let room = upstream.multicast(buffering: Self.soft, clock: clock)
        let stalled = room.subscribe()
        let reader = room.subscribe()
        let connection = room.connect()
        var iterator = reader.makeAsyncIterator()
        for n in 1...4 { feed.yield(n) }
        for n in 1...4 { #expect(await iterator.next() == n) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        #expect(await stalled.waitForEviction()?.reason == .softLimit)
        #expect(room.subscriberCount == 1)
        connection.cancel()
    }

    @Test("a subscriber that reads back down to its soft count before the deadline is kept")
    func readingBackDownKeepsTheSubscriber() async throws {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.soft, clock: clock)
        let slow = subject.subscribe()
        for n in 1...5 { subject.send(n) }  // holds 5 > 3
        await clock.waitForSleepers(count: 1)
        var iterator = slow.makeAsyncIterator()
        #expect(await iterator.next() == 1)
        #expect(await iterator.next() == 2)  // holds 3 or fewer (its batch took the rest)
        clock.advance(by: .seconds(10))
        // The timer woke and found nobody past the soft count: it ended, evicting nobody.
        try await waitUntil("the timer task ended") { subject.storage.state.withLock { $0.timerTask == nil } }
        #expect(slow.backlog != nil)
        #expect(subject.subscriberCount == 1)
        subject.finish()
        let rest = await iterator.readAll()
        #expect(rest == [3, 4, 5])
    }

    @Test("share(): the eviction of the last subscriber stops the upstream, as its leave would")
    func evictingTheLastSubscriberStopsTheUpstream() async {
        let stopped = Signal<Void>()
        let (upstream, feed) = AsyncStream.makeStream(of: Int.self)
        feed.onTermination = { _ in stopped.send(()) }
        let shared = upstream.share(buffering: .evicting(2))
        var stalled = shared.makeAsyncIterator()
        feed.yield(1)
        #expect(await stalled.next() == 1)  // its demand started the upstream; it reads no more
        for n in 2...4 { feed.yield(n) }  // the third unread element evicts it
        _ = await stopped.next("the upstream stopped")
        #expect(shared.subscriberCount == 0)
        #expect(await stalled.next() == nil, "it learns it was evicted")
    }

    @Test("share(keepAlive:): the eviction of the last subscriber opens the keep-alive window")
    func evictingTheLastSubscriberOpensTheKeepAliveWindow() async {
        let clock = ManualClock()
        let stopped = Signal<Void>()
        let (upstream, feed) = AsyncStream.makeStream(of: Int.self)
        feed.onTermination = { _ in stopped.send(()) }
        let shared = upstream.share(buffering: .evicting(2), keepAlive: .seconds(30), clock: clock)
        var stalled = shared.makeAsyncIterator()
        feed.yield(1)
        #expect(await stalled.next() == 1)
        for n in 2...4 { feed.yield(n) }
        await clock.waitForSleepers(count: 1)
        #expect(clock.sleeperDeadlines.map(\.offset) == [.seconds(30)], "the window opened at the eviction")
        #expect(shared.subscriberCount == 0)
        clock.advance(by: .seconds(30))
        _ = await stopped.next("the upstream stopped when the window closed")
        #expect(await stalled.next() == nil)
    }

    @Test("waitForSubscribers and subscriberCounts see an eviction at once")
    func countsSeeTheEviction() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let stalled = subject.subscribe()
        let other = subject.subscribe()
        var counts = subject.subscriberCounts.makeAsyncIterator()
        #expect(await counts.next() == 2)
        subject.send(1)
        subject.send(2)  // both hold 2 > 1: both evicted
        #expect(await counts.next() == 0)
        #expect(await stalled.waitForEviction() == .hardLimit(1))
        #expect(await other.waitForEviction() == .hardLimit(1))
    }
}
