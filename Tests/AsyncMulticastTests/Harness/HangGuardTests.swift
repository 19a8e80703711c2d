// The no-progress watchdog of Support/HangGuards.swift: a body that keeps ticking, however
// slowly, is never stopped; one that stops ticking fails after exactly one stall window of
// looks without a tick; a look that comes late counts as two looks at most. Timed on a
// ManualClock, so that every look is one the test made; one run on the real clock checks that
// the default clock fires too.

import Testing

@testable import AsyncMulticast

@Suite("Hang guards: withProgressWatchdog", .timeLimit(.minutes(3)))
struct HangGuardTests {
    /// A stall window of 0.2 s: the watchdog looks every 20 ms.
    static let window = 0.2
    static let look = Duration.milliseconds(20)

    @Test("a body that ticks slowly but keeps moving is never stopped, however long it runs")
    func aSlowButMovingBodyPasses() async throws {
        let clock = ManualClock()
        let result = try await withProgressWatchdog("a slow body", stalledFor: Self.window, clock: clock) {
            progress in
            // 100 looks (ten stall windows) with a tick before every ninth: never more than
            // eight in a row without one. Each tick comes while the watchdog is asleep, so the
            // next look sees it.
            for look in 1...100 {
                await clock.waitForSleepers(count: 1)
                if look % 9 == 0 { progress.tick() }
                clock.advance(by: Self.look)
            }
            return progress.count
        }
        #expect(result == 11)
    }

    @Test("the body's result and its own error come through unchanged")
    func resultAndErrorComeThrough() async throws {
        #expect(try await withProgressWatchdog("a quick body") { _ in 42 } == 42)
        await #expect(throws: TestError.boom) {
            try await withProgressWatchdog("a failing body") { _ in throw TestError.boom }
        }
    }

    /// Starts a body under the watchdog that ticks once, after the watchdog went to sleep
    /// (so its first look sees that tick), then waits only for its cancellation, which sets
    /// `cancelled`. The returned run expects the watchdog to fire. Returns once the body ticked.
    private func startStalledBody(
        on clock: ManualClock, cancelled: LockedFlag
    ) async throws -> Task<Void, any Error> {
        let ticked = LockedFlag()
        let run = Task {
            // `rethrows` an error that does not match; the watchdog's own error matches.
            try await withKnownIssue("the watchdog fires") {
                try await withProgressWatchdog("a stalled body", stalledFor: Self.window, clock: clock) { progress in
                    await clock.waitForSleepers(count: 1)
                    progress.tick()
                    ticked.set()
                    do {
                        // Not a deadline: only the watchdog's cancellation ends this sleep.
                        try await Task.sleep(for: .seconds(3_600))
                    } catch {
                        cancelled.set()
                    }
                }
            } matching: { issue in
                issue.error is TimeoutError
                    || issue.comments.contains { $0.rawValue.hasPrefix("Stalled: a stalled body reported no progress") }
            }
        }
        try await waitUntil("the body's tick") { ticked.isSet }
        return run
    }

    /// Moves the clock by each of `steps` in turn, one look of the watchdog each (waiting until
    /// it is asleep again before the next), and returns the step whose look fired it (1 for the
    /// first), or `nil` if none did; it then takes more looks until it fires, so that the run
    /// ends. A watchdog that fired has cancelled the body instead of going back to sleep.
    private func stepThatFires(_ clock: ManualClock, _ cancelled: LockedFlag, steps: [Duration]) async throws -> Int? {
        for (index, step) in steps.enumerated() {
            try await waitUntil("the watchdog asleep, or fired") { clock.sleeperCount == 1 || cancelled.isSet }
            if cancelled.isSet { return index }
            clock.advance(by: step)
        }
        try await waitUntil("the watchdog asleep, or fired") { clock.sleeperCount == 1 || cancelled.isSet }
        if cancelled.isSet { return steps.count }
        for _ in 0..<1_000 where !cancelled.isSet {
            clock.advance(by: Self.look)
            try await waitUntil("the watchdog asleep, or fired") { clock.sleeperCount == 1 || cancelled.isSet }
        }
        return nil
    }

    @Test("a body that stops ticking fails after exactly one window of looks without a tick, and is cancelled")
    func aStalledBodyFails() async throws {
        let clock = ManualClock()
        let cancelled = LockedFlag()
        let run = try await self.startStalledBody(on: clock, cancelled: cancelled)
        // The first look sees the tick; the ten after it see none.
        let fired = try await self.stepThatFires(clock, cancelled, steps: Array(repeating: Self.look, count: 11))
        #expect(fired == 11)
        try await run.value
    }

    @Test("a look that comes late counts as two looks at most: time the process was not running is not a stall")
    func aLateLookCountsAsTwo() async throws {
        let clock = ManualClock()
        let cancelled = LockedFlag()
        let run = try await self.startStalledBody(on: clock, cancelled: cancelled)
        // The first look sees the tick; the second comes 3,000 looks late and counts as two;
        // eight more make ten.
        let steps = [Self.look, .seconds(60)] + Array(repeating: Self.look, count: 8)
        let fired = try await self.stepThatFires(clock, cancelled, steps: steps)
        #expect(fired == 10)
        try await run.value
    }

    @Test("on the real clock, a body that never ticks fails too")
    func aStalledBodyFailsOnTheRealClock() async throws {
        try await withKnownIssue("the watchdog fires") {
            try await withProgressWatchdog("a body that never ticks", stalledFor: Self.window) { _ in
                // Not a deadline: only the watchdog's cancellation ends this sleep.
                try await Task.sleep(for: .seconds(3_600))
            }
        } matching: { issue in
            issue.error is TimeoutError
                || issue.comments.contains {
                    $0.rawValue.hasPrefix("Stalled: a body that never ticks reported no progress")
                }
        }
    }
}
