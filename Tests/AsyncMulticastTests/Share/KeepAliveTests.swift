// keepAlive — share(buffering:keepAlive:) and replay(_:buffering:keepAlive:).
//
// Every window is timed on a ManualClock (Support/ManualClock.swift): the test waits until the
// timer sleeps on it, then moves the time to just before the deadline (nothing happens) or to
// the deadline (the upstream is cancelled). No test waits for real time. The transitions
// behind the window are checked in Engine/StateMachineKeepAliveTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("keepAlive", .timeLimit(.minutes(2)))
struct KeepAliveTests {
    /// The instant `offset` after the clock was created (when the shared sequence was made).
    private func at(_ offset: Duration) -> ManualClock.Instant { ManualClock.Instant(offset: offset) }

    @Test(
        "share(keepAlive:): a subscriber arriving before the deadline continues the same iteration; leaving again moves the deadline"
    )
    func shareArrivalInsideWindowContinues() async {
        let (clock, source, shared) = await openWindow(reading: 1, 2) {
            $0.share(keepAlive: .seconds(10), clock: $1)
        }
        #expect(await clock.waitForSleepers(count: 1), "the timer sleeps until the window's deadline")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(10))])

        clock.advance(by: .seconds(10) - .nanoseconds(1))
        #expect(clock.sleeperCount == 1, "one nanosecond before the deadline: the timer still sleeps")
        #expect(source.control.end(of: 0) == nil, "still running inside the window")

        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        source.control.yield(3)
        #expect(await b.next() == 3, "elements continue from the same base iterator")
        #expect(source.control.iteratorCount == 1, "no restart")
        await b.leave()  // a new window: 10 s from now

        clock.advance(by: .nanoseconds(1))  // the first deadline
        #expect(await clock.waitForSleepers(count: 1), "the timer woke, found the deadline moved, and sleeps again")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(20) - .nanoseconds(1))])
        #expect(source.control.end(of: 0) == nil, "leaving again opened a new window")

        await expectCancelledAtTheDeadline(
            self.at(.seconds(20) - .nanoseconds(1)), clock: clock, source: source, iteration: 0,
            "cancelled at the second window's deadline")
        #expect(source.control.iteratorCount == 1)
    }

    @Test(
        "share(buffering:keepAlive:): the upstream is cancelled exactly when the window ends; the next subscriber restarts it"
    )
    func shareCancelledWhenWindowEnds() async {
        let (clock, source, shared) = await openWindow(reading: 1) {
            $0.share(buffering: .unbounded, keepAlive: .seconds(5), clock: $1)
        }
        #expect(await clock.waitForSleepers(count: 1))
        await expectCancelledAtTheDeadline(
            self.at(.seconds(5)), clock: clock, source: source, iteration: 0,
            "onTermination(.cancelled) at the window's end")
        #expect(clock.sleeperCount == 0, "share() has no replay cache to time: the timer ended")

        await restartReadAndLeave(shared, source, iteration: 1, value: 7)
        #expect(source.control.iteratorCount == 2)
        #expect(await clock.waitForSleepers(count: 1), "a new window, timed by a new timer task")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(10))])
        #expect(source.control.end(of: 1) == nil)
        clock.advance(by: .seconds(5))
        let endedAgain = await source.control.waitForEnd()
        #expect(endedAgain?.iteration == 1)
        #expect(endedAgain?.end == .cancelled)
    }

    @Test("replay(_:buffering:keepAlive:): before the deadline, the replay then the same iteration's elements")
    func replayArrivalInsideWindowContinues() async {
        let (clock, source, replayed) = await openWindow(reading: 1, 2) {
            $0.replay(1, keepAlive: .seconds(10), clock: $1)
        }
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(10) - .nanoseconds(1))
        #expect(clock.sleeperCount == 1)

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 2, "the replayed element")
        source.control.yield(3)
        #expect(await b.next() == 3)
        #expect(source.control.iteratorCount == 1, "no restart")
        #expect(source.control.end(of: 0) == nil)
        await b.leave()
    }

    @Test("replay(_:buffering:keepAlive:): cancelled when the window ends; a cache that never expires survives")
    func replayCancelledWhenWindowEnds() async {
        let (clock, source, replayed) = await openWindow(reading: 1, 2) {
            $0.replay(
                1, buffering: .unbounded, keepAlive: .seconds(5), replayExpiration: .seconds(Int64.max), clock: $1)
        }
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(5))
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)
        #expect(clock.sleeperCount == 0, "a cache kept for good has no expiry to time")
        clock.advance(by: .seconds(86_400 * 365))
        #expect(replayed.replayCache == [2], "a year later")

        await restartReadAndLeave(replayed, source, iteration: 1, value: 5, replayed: 2)  // the cache survived
    }

    @Test(
        "replay(_:keepAlive:replayExpiration:): a keep-alive window opened while the timer times a longer expiry window ends at its own deadline"
    )
    func keepAliveWindowInsideLongerExpiryWindow() async throws {
        let (clock, source, replayed) = await openWindow(reading: 1) {
            $0.replay(1, keepAlive: .seconds(5), replayExpiration: .seconds(60), clock: $1)
        }
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(5))
        #expect(await source.control.waitForEnd()?.end == .cancelled, "the keep-alive window closed at 5")
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(65))], "the cache expires at 65")

        clock.advance(to: self.at(.seconds(10)))
        // The cache has not expired; leaving opens a keep-alive window, 10 to 15.
        await restartReadAndLeave(replayed, source, iteration: 1, value: 2, replayed: 1)
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(15))], "the timer sleeps toward the keep-alive's end")

        await expectCancelledAtTheDeadline(
            self.at(.seconds(15)), clock: clock, source: source, iteration: 1, "at 15, not at 65")
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(75))], "then the cache expires 60 s later")
        #expect(replayed.replayCache == [2])
        clock.advance(to: self.at(.seconds(75)))
        try await waitUntil("the cache to expire at 75") { replayed.replayCache.isEmpty }
    }

    @Test("the upstream keeps running inside the window: what it produces meanwhile is replayed to the next subscriber")
    func upstreamKeepsRunningInsideWindow() async throws {
        let (_, source, replayed) = await openWindow(reading: 1, 2) {
            $0.replay(1, keepAlive: .seconds(10), clock: $1)
        }
        // Nobody is subscribed; the upstream is waiting in its next() call.
        let pulls = source.control.nextCalls
        source.control.yield(3)
        // Once the upstream asks for the element after 3, 3 has been produced.
        try await waitUntil("the upstream produced 3 and pulled again") { source.control.nextCalls > pulls }

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 3, "produced inside the window by the same iteration")
        source.control.yield(4)
        #expect(await b.next() == 4)
        #expect(source.control.iteratorCount == 1)
        await b.leave()
    }

    @Test(
        "leaving and coming back 2,000 times inside the window re-arms one timer task, which ends the window last opened"
    )
    func oneTimerTaskForManyDepartures() async {
        let (clock, source, shared) = await openWindow(reading: 1) {
            $0.share(keepAlive: .seconds(3_600), clock: $1)
        }
        let timer = shared.storage.state.withLock { $0.timerTask }
        #expect(timer != nil, "the first departure started the timer")
        #expect(await clock.waitForSleepers(count: 1))
        for _ in 0..<2_000 {
            clock.advance(by: .seconds(1))  // never reaches the deadline: each departure moves it
            var iterator: SharedIterator<Int, Never>? = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 1)
            iterator = nil  // leaves: a new window opens
            _ = iterator
        }
        #expect(shared.storage.state.withLock { $0.timerTask } == timer, "still the first timer task")
        #expect(clock.sleeperCount == 1, "one sleeping timer")
        #expect(source.control.iteratorCount == 1, "the same iteration throughout")
        #expect(source.control.end(of: 0) == nil)

        clock.advance(to: self.at(.seconds(3_600)))  // the first deadline
        #expect(await clock.waitForSleepers(count: 1), "the timer sleeps again, until the last window's deadline")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(5_600))])
        #expect(source.control.end(of: 0) == nil)
        clock.advance(to: self.at(.seconds(5_600)))
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)
    }

    @Test(
        "a keep-alive as long as forever starts no timer: however far the clock jumps, the iteration goes on",
        arguments: [
            Duration.seconds(1 << 40),
            Duration.seconds(Int64.max),
            Duration(secondsComponent: .max, attosecondsComponent: 999_999_999_999_999_999),
            Duration.seconds(1e19),
        ])
    func keepAliveForeverHasNoTimer(keepAlive: Duration) async {
        let (clock, source, shared) = await openWindow(reading: 1) {
            $0.share(keepAlive: keepAlive, clock: $1)
        }
        #expect(shared.storage.state.withLock { $0.timerTask } == nil, "no window to time")
        #expect(clock.sleeperCount == 0)

        // Far past any deadline a timer could have computed (2^40 s is the longest window).
        clock.advance(by: .seconds(1 << 41))
        let b = await source.expectANewSubscriberContinuesIterationZero(
            "subscribers leaving never stop the upstream", receiving: 2
        ) { shared.makeAsyncIterator() }
        await b.leave()
        #expect(shared.storage.state.withLock { $0.timerTask } == nil)
        #expect(source.control.end(of: 0) == nil)
    }
}
