// The keep-alive and replay-expiry windows timed on a clock that misbehaves, as a user's clock
// may: its sleep throws without the task being cancelled, its time goes back, jumps far
// ahead, or never reaches the deadline. What the library then does is documented with the
// `clock:` parameters and in Guides/Replay.md ("Keeping the upstream alive").
//
// Every window is timed on a ManualClock told to misbehave (Support/ManualClock.swift). No
// test waits for real time.

import Testing

@testable import AsyncMulticast

@Suite("keepAlive on a misbehaving clock", .timeLimit(.minutes(2)))
struct MisbehavingClockTests {
    /// The instant `offset` after the clock was created.
    private func at(_ offset: Duration) -> ManualClock.Instant { ManualClock.Instant(offset: offset) }

    /// `share(keepAlive: 10 s)` of a new `FedSource` on `clock`, visited once at `start`: a
    /// subscriber read 1 and left, so the window is open.
    private func visited(
        on clock: ManualClock, at start: Duration = .zero
    ) async -> (FedSource, AsyncShareSequence<Int, Never>) {
        let source = FedSource()
        let shared = source.share(keepAlive: .seconds(10), clock: clock)
        clock.advance(to: self.at(start))
        await startReadAndLeave(shared, source, 1)
        return (source, shared)
    }

    /// `visited(on:at:)`, then the timer sleeps toward the window's end.
    private func visitedAndTimed(
        on clock: ManualClock, at start: Duration = .zero, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (FedSource, AsyncShareSequence<Int, Never>) {
        let visited = await self.visited(on: clock, at: start)
        #expect(await clock.waitForSleepers(count: 1), sourceLocation: sourceLocation)
        return visited
    }

    // MARK: A sleep that throws

    @Test("a clock whose sleep throws once: that window closes at once, and the next one at its own deadline")
    func sleepThrowsOnce() async {
        let clock = ManualClock()
        clock.failNextSleeps(1)
        let (source, shared) = await self.visited(on: clock)
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled, "a window its clock cannot time closes at once")
        #expect(clock.failedSleeps == 1)
        #expect(clock.now == self.at(.zero), "without the clock moving")
        #expect(shared.storage.timer == .idle, "the timer ended, and the machine knows it")

        await restartReadAndLeave(shared, source, iteration: 1, value: 2)
        #expect(await clock.waitForSleepers(count: 1), "a new window, timed as usual")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(10))])
        await expectCancelledAtTheDeadline(self.at(.seconds(10)), clock: clock, source: source, iteration: 1)
        #expect(shared.storage.timer == .idle)
    }

    @Test(
        "a clock whose sleep always throws: every window closes at once, the keep-alive's and then the replay cache's expiry"
    )
    func sleepAlwaysThrows() async throws {
        let clock = ManualClock()
        clock.failEverySleep()
        let source = FedSource()
        let replayed = source.replay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), clock: clock)
        for iteration in 0..<3 {
            if iteration == 0 {
                await startReadAndLeave(replayed, source, 1)
            } else {
                #expect(replayed.replayCache.isEmpty, "a restarted upstream greets nobody with the old cache")
                await restartReadAndLeave(replayed, source, iteration: iteration, value: iteration + 1)
            }
            let ended = await source.control.waitForEnd()
            #expect(ended?.iteration == iteration)
            #expect(ended?.end == .cancelled, "the upstream is stopped at once")
            try await waitUntil("the replay cache to expire") { replayed.replayCache.isEmpty }
            #expect(replayed.storage.timer == .idle, "no timer left, and the machine knows it")
            #expect(clock.failedSleeps == 2 * (iteration + 1), "one failed sleep per window")
        }
    }

    @Test(
        "a clock whose sleep returns at once without the time moving: the window closes at once instead of the timer spinning"
    )
    func sleepReturnsAtOnce() async {
        let clock = ManualClock()
        clock.returnEverySleepAtOnce()
        let (source, shared) = await self.visited(on: clock)
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled, "a window its clock cannot time closes at once")
        #expect(clock.failedSleeps == 1, "after one sleep: the timer did not spin")
        #expect(shared.storage.timer == .idle)
    }

    // MARK: A clock that jumps

    @Test("a clock set back: a window opened after the jump ends at its own deadline, not at the earlier window's")
    func clockSetBackThenNewWindow() async {
        let clock = ManualClock()
        let (source, shared) = await self.visitedAndTimed(on: clock, at: .seconds(100))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(110))], "the first window: 100 to 110")

        clock.jump(to: self.at(.seconds(95)))
        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        source.control.yield(2)
        #expect(await b.next() == 2, "back inside the first window: the same iteration")
        await b.leave()  // the second window: 95 to 105
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(105))], "the timer sleeps toward the second window's end")
        #expect(shared.storage.timer == .running)

        await expectCancelledAtTheDeadline(
            self.at(.seconds(105)), clock: clock, source: source, iteration: 0, "at 105, the second window's deadline")
        #expect(clock.sleeperCount == 0, "one timer: none is left sleeping toward 110")
        #expect(shared.storage.timer == .idle)
    }

    @Test(
        "a clock set back: a replay cache's expiry window opened after the jump ends at its own deadline, not at the earlier one's"
    )
    func clockSetBackThenNewExpiryWindow() async throws {
        let clock = ManualClock()
        let source = FedSource()
        let replayed = source.replay(1, replayExpiration: .seconds(10), clock: clock)
        clock.advance(to: self.at(.seconds(100)))
        await startReadAndLeave(replayed, source, 1)
        #expect(await source.control.waitForEnd()?.end == .cancelled, "no keep-alive: stopped at once")
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(110))], "the cache expires at 110")

        clock.jump(to: self.at(.seconds(95)))
        // Stopped again: the cache's second expiry window, 95 to 105.
        await restartReadAndLeave(replayed, source, iteration: 1, value: 2, replayed: 1)
        #expect(await source.control.waitForEnd()?.iteration == 1)
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [self.at(.seconds(105))], "the new cache expires at 105")

        clock.advance(to: self.at(.seconds(105) - .nanoseconds(1)))
        #expect(replayed.replayCache == [2], "not before its deadline")
        clock.advance(by: .nanoseconds(1))
        try await waitUntil("the cache to expire at 105") { replayed.replayCache.isEmpty }
        #expect(clock.sleeperCount == 0)
        #expect(replayed.storage.timer == .idle)
    }

    @Test("a clock set back, and no new window: the window ends when the clock reaches its deadline again")
    func clockSetBackSameWindow() async {
        let clock = ManualClock()
        let (source, _) = await self.visited(on: clock, at: .seconds(100))
        #expect(await clock.waitForSleepers(count: 1))

        clock.jump(to: self.at(.seconds(50)))
        await expectCancelledAtTheDeadline(
            self.at(.seconds(110)), clock: clock, source: source, iteration: 0, "once the clock reads 110 again")
    }

    @Test("a clock that jumps far past the deadline: the window closes when the timer wakes")
    func clockJumpsAhead() async {
        let clock = ManualClock()
        let (source, shared) = await self.visited(on: clock)
        #expect(await clock.waitForSleepers(count: 1))
        clock.jump(to: self.at(.seconds(86_400 * 365 * 100)))
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)
        #expect(shared.storage.timer == .idle)
    }

    @Test("a clock set back many times: each new window replaces the sleeping timer, one timer task at a time")
    func clockSetBackManyTimes() async {
        let clock = ManualClock()
        let (source, shared) = await self.visited(on: clock, at: .seconds(1_000))
        for back in 1...50 {
            #expect(await clock.waitForSleepers(count: 1))
            #expect(clock.sleeperCount == 1, "one sleeping timer")
            let now = self.at(.seconds(1_000 - back))
            clock.jump(to: now)
            var iterator: SharedIterator<Int, Never>? = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 1)
            iterator = nil  // leaves: a new window, one second earlier than the last
            _ = iterator
            #expect(await clock.waitForSleepers(count: 1))
            #expect(clock.sleeperDeadlines == [now.advanced(by: .seconds(10))])
        }
        #expect(source.control.end(of: 0) == nil)
        clock.advance(to: self.at(.seconds(960)))
        #expect(await source.control.waitForEnd()?.end == .cancelled, "at the last window's deadline, 950 + 10")
        #expect(shared.storage.timer == .idle)
    }

    // MARK: A sleep that does not return

    @Test(
        "a clock that is never advanced: the window stays open; the upstream ending cancels the timer's sleep and ends it"
    )
    func sleepNeverReturns() async throws {
        let clock = ManualClock()
        let (source, shared) = await self.visited(on: clock)
        #expect(await clock.waitForSleepers(count: 1))
        #expect(shared.storage.timer == .running)

        source.control.finish(0)
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .finished)
        // The upstream task reports its end to the storage after its base finished.
        try await waitUntil("the storage to see the end") { shared.storage.upstreamState == .terminated(.finished) }
        #expect(shared.storage.timer == .idle, "cancelled with the upstream, and the machine knows it")
        #expect(clock.sleeperCount == 0, "its sleep was cancelled")
    }
}

extension MulticastStorage {
    /// The keep-alive timer as the machine and the storage see it: they must agree.
    fileprivate var timer: TimerState {
        self.state.withLock { state in
            switch (state.machine.timer.isRunning, state.timerTask != nil) {
            case (false, false): return .idle
            case (true, true): return .running
            case (true, false), (false, true): return .disagreement
            }
        }
    }
}

private enum TimerState: Equatable {
    /// No timer task, and the machine knows it.
    case idle
    /// A timer task, and the machine knows it.
    case running
    /// The machine believes a timer runs and the storage has none, or the other way round.
    case disagreement
}
