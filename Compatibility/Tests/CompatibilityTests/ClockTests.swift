import AsyncMulticast
import Clocks
import Testing

/// swift-clocks' `TestClock` and `ImmediateClock` passed as the library's `clock:`, as a user
/// tests a screen that leaves and comes back without waiting real seconds.
///
/// No test waits for the library's timer task to be asleep on the clock before advancing
/// it, and none needs to: a window's deadline is fixed when the window opens (from the
/// clock's reading when the last subscriber leaves), the timer compares it with the clock
/// before sleeping, and `TestClock.sleep(until:)` returns at once for a deadline already
/// passed. So advancing before the timer sleeps and advancing after both end the window at
/// the same point; only *when* the timer task notices varies, and the tests wait for what
/// it does (the upstream run ending), not for the timer.
@Suite("swift-clocks", .timeLimit(.minutes(2)))
struct ClockTests {
    @Test("TestClock times keepAlive: back within the window continues the run, past it the run stops")
    func keepAliveOnTestClock() async {
        let clock = TestClock()
        let probe = UpstreamProbe()
        let location = probe.sequence.replay(1, keepAlive: .seconds(5), clock: clock)

        do {  // the screen appears, reads the first fix, and goes away: the window opens at 0 s
            var screen = location.makeAsyncIterator()
            #expect(await screen.next() == 1)
        }
        #expect(location.subscriberCount == 0)

        await clock.advance(by: .seconds(4))
        do {  // back at 4 s: the cache greets it, and run 1 still feeds it
            var screen = location.makeAsyncIterator()
            #expect(await screen.next() == 1)
            #expect(probe.send(11, toRun: 1), "run 1 was stopped within its keep-alive window")
            #expect(await screen.next() == 11)
        }
        #expect(probe.runCount == 1)

        // Left again at 4 s: the window now ends at 9 s, not at the first window's 5 s.
        await clock.advance(by: .seconds(4))
        #expect(probe.log.events == [.started(run: 1)])
        await clock.advance(by: .seconds(2))
        await probe.log.expect(.ended(run: 1))

        do {  // the next visit starts run 2; run 1's cache expired with it (replayExpiration .zero)
            var screen = location.makeAsyncIterator()
            #expect(await screen.next() == 2)
        }
        await clock.advance(by: .seconds(5))
        await probe.log.expect(.ended(run: 2))
        #expect(probe.log.events == [.started(run: 1), .ended(run: 1), .started(run: 2), .ended(run: 2)])
    }

    @Test("TestClock times replayExpiration: the cache outlives the run for the window, then expires")
    func replayExpirationOnTestClock() async {
        let clock = TestClock()
        let probe = UpstreamProbe()
        let state = probe.sequence.replay(1, replayExpiration: .seconds(10), clock: clock)

        do {
            var screen = state.makeAsyncIterator()
            #expect(await screen.next() == 1)
            probe.send(11, toRun: 1)
            #expect(await screen.next() == 11)
        }
        // No keep-alive: the run stops as the last subscriber leaves, at 0 s.
        await probe.log.expect(.ended(run: 1))
        #expect(state.replayCache == [11])

        await clock.advance(by: .seconds(9))
        #expect(state.replayCache == [11])
        do {  // within the expiry window: greeted by the cache, then the restarted run
            var screen = state.makeAsyncIterator()
            #expect(await screen.next() == 11)
            #expect(await screen.next() == 2)
        }
        await probe.log.expect(.ended(run: 2))
        #expect(state.replayCache == [2])

        // Run 2 stopped at 9 s: its cache lives until 19 s.
        await clock.advance(by: .seconds(9))
        #expect(state.replayCache == [2])
        await clock.advance(by: .seconds(2))
        // The expiry happens in the library's timer task, with no event to wait for.
        await waitUntil("the replay cache expired at 19 s") { state.replayCache.isEmpty }

        do {  // no stale greeting: the first element is run 3's
            var screen = state.makeAsyncIterator()
            #expect(await screen.next() == 3)
        }
        await probe.log.expect(.ended(run: 3))
    }

    @Test("TestClock times keepAlive and then replayExpiration, one after the other")
    func keepAliveThenReplayExpiration() async {
        let clock = TestClock()
        let probe = UpstreamProbe()
        let state = probe.sequence.replay(1, keepAlive: .seconds(5), replayExpiration: .seconds(10), clock: clock)

        do {
            var screen = state.makeAsyncIterator()
            #expect(await screen.next() == 1)
        }
        await clock.advance(by: .seconds(6))
        await probe.log.expect(.ended(run: 1))
        // The expiry window opened when the timer found the keep-alive over: at 5 or 6 s
        // (whichever the clock read then), so it ends at 15 or 16 s.
        await clock.advance(by: .seconds(8))  // 14 s
        #expect(state.replayCache == [1])
        await clock.advance(by: .seconds(3))  // 17 s
        await waitUntil("the replay cache expired") { state.replayCache.isEmpty }
        #expect(probe.runCount == 1)
    }

    @Test("ImmediateClock ends an hour-long keep-alive at once")
    func keepAliveOnImmediateClock() async {
        let probe = UpstreamProbe()
        let shared = probe.sequence.share(keepAlive: .seconds(3600), clock: ImmediateClock())
        do {
            var screen = shared.makeAsyncIterator()
            #expect(await screen.next() == 1)
        }
        await probe.log.expect(.ended(run: 1))
        #expect(probe.runCount == 1)
    }

    @Test("TestClock times a hosted service's whileSubscribed(keepAlive:)")
    func sharedServiceStopTimeout() async throws {
        let clock = TestClock()
        let probe = UpstreamProbe()
        let service = probe.sequence.sharedService(
            replay: 1, started: .whileSubscribed(keepAlive: .seconds(5)), clock: clock)
        let hosting = Task { await service.run() }

        do {
            var screen = service.makeAsyncIterator()
            #expect(await screen.next() == 1)
        }
        await clock.advance(by: .seconds(4))
        #expect(probe.send(11, toRun: 1), "run 1 was stopped before its keepAlive")
        await clock.advance(by: .seconds(2))
        await probe.log.expect(.ended(run: 1))

        hosting.cancel()
        let returned: Void? = await withHangGuard { await hosting.value }
        #expect(returned != nil, "run() did not return after its task was cancelled")
        #expect(probe.runCount == 1)
    }
}
