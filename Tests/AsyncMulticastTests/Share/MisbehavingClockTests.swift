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
    /// One subscriber starts the upstream, reads `values`, and leaves.
    private func startReadAndLeave(
        _ shared: AsyncShareSequence<FedSource>, _ source: FedSource, _ values: Int...,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let a = await SubscriberTask.join({ shared.makeAsyncIterator() }, sourceLocation: sourceLocation)
        var read: [Int] = []
        if let first = await a.startIteration(of: source, yielding: values, sourceLocation: sourceLocation) {
            read.append(first)
        }
        read += await a.take(values.count - 1, sourceLocation: sourceLocation)
        #expect(read == values, sourceLocation: sourceLocation)
        await a.leave(sourceLocation: sourceLocation)
        #expect(shared.subscriberCount == 0, sourceLocation: sourceLocation)
    }

    /// A subscriber restarts the stopped upstream (iteration `iteration`), reads `value` from
    /// it, and leaves.
    private func restartReadAndLeave(
        _ shared: AsyncShareSequence<FedSource>, _ source: FedSource, iteration: Int, value: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let b = await SubscriberTask.join({ shared.makeAsyncIterator() }, sourceLocation: sourceLocation)
        b.request()
        await source.control.waitForStart(of: iteration, sourceLocation: sourceLocation)
        source.control.yield(value)
        #expect(await b.answer(sourceLocation: sourceLocation) == value, sourceLocation: sourceLocation)
        await b.leave(sourceLocation: sourceLocation)
    }

    /// The instant `offset` after the clock was created.
    private func at(_ offset: Duration) -> ManualClock.Instant { ManualClock.Instant(offset: offset) }

    // MARK: A sleep that throws

    @Test("a clock whose sleep throws once: that window closes at once, and the next one at its own deadline")
    func sleepThrowsOnce() async {
        let clock = ManualClock()
        clock.failNextSleeps(1)
        let source = FedSource()
        let shared = source.share(keepAlive: .seconds(10), clock: clock)
        await self.startReadAndLeave(shared, source, 1)
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled, "a window its clock cannot time closes at once")
        #expect(clock.failedSleeps == 1)
        #expect(clock.now == self.at(.zero), "without the clock moving")
        #expect(shared.storage.timer == .idle, "the timer ended, and the machine knows it")

        await self.restartReadAndLeave(shared, source, iteration: 1, value: 2)
        #expect(await clock.waitForSleepers(count: 1), "a new window, timed as usual")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(10))])
        clock.advance(by: .seconds(10) - .nanoseconds(1))
        #expect(clock.sleeperCount == 1, "not before its deadline")
        #expect(source.control.end(of: 1) == nil)
        clock.advance(by: .nanoseconds(1))
        let endedAgain = await source.control.waitForEnd()
        #expect(endedAgain?.iteration == 1)
        #expect(endedAgain?.end == .cancelled, "at its deadline")
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
                await self.startReadAndLeave(replayed, source, 1)
            } else {
                #expect(replayed.replayCache.isEmpty, "a restarted upstream greets nobody with the old cache")
                await self.restartReadAndLeave(replayed, source, iteration: iteration, value: iteration + 1)
            }
            let ended = await source.control.waitForEnd()
            #expect(ended?.iteration == iteration)
            #expect(ended?.end == .cancelled, "the upstream is stopped at once")
            try await waitUntil("the replay cache to expire") { replayed.replayCache.isEmpty }
            #expect(replayed.storage.timer == .idle, "no timer left, and the machine knows it")
            #expect(clock.failedSleeps == 2 * (iteration + 1), "one failed sleep per window")
        }
    }

    // MARK: A sleep that does not return

    @Test(
        "a clock that is never advanced: the window stays open; the upstream ending cancels the timer's sleep and ends it"
    )
    func sleepNeverReturns() async throws {
        let clock = ManualClock()
        let source = FedSource()
        let shared = source.share(keepAlive: .seconds(10), clock: clock)
        await self.startReadAndLeave(shared, source, 1)
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
            switch (state.machine.keepAliveTimerIsRunning, state.timerTask != nil) {
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
