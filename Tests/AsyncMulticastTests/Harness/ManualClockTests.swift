// The test clock of Support/ManualClock.swift: time moves only when advanced, sleepers wake
// when their deadline is reached and not before, and a cancelled sleeper throws at once. It
// misbehaves only when told: a jump back in time, sleeps that throw.

import Testing

@testable import AsyncMulticast

@Suite("ManualClock", .timeLimit(.minutes(3)))
struct ManualClockTests {
    /// A task sleeping on `clock` until `deadline`: its outcome, `nil` if it was cancelled.
    private func sleeper(
        on clock: ManualClock, until deadline: ManualClock.Instant
    ) -> Task<ManualClock.Instant?, Never> {
        Task {
            do {
                try await clock.sleep(until: deadline)
                return clock.now
            } catch is CancellationError {
                return nil
            } catch {
                Issue.record("unexpected error \(error)")
                return nil
            }
        }
    }

    private func outcome(_ task: Task<ManualClock.Instant?, Never>) async -> ManualClock.Instant?? {
        await withTimeoutOrNil("the sleeper") { await task.value }
    }

    @Test("time moves only when advanced, by a duration or to an instant")
    func timeMovesWhenAdvanced() {
        let clock = ManualClock()
        let start = clock.now
        #expect(start.offset == .zero)
        #expect(clock.now == start, "nothing moves it by itself")
        clock.advance(by: .seconds(3))
        #expect(clock.now == start.advanced(by: .seconds(3)))
        clock.advance(to: start.advanced(by: .seconds(10)))
        #expect(start.duration(to: clock.now) == .seconds(10))
        clock.advance(by: .zero)
        #expect(start.duration(to: clock.now) == .seconds(10))
    }

    @Test("a sleeper wakes when the time reaches its deadline, not before")
    func sleeperWakesAtDeadline() async {
        let clock = ManualClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        let task = self.sleeper(on: clock, until: deadline)
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [deadline])

        clock.advance(by: .seconds(5) - .nanoseconds(1))
        await letOthersRun()
        #expect(clock.sleeperCount == 1, "one nanosecond early: still asleep")

        clock.advance(by: .nanoseconds(1))
        #expect(clock.sleeperCount == 0, "advancing wakes it before returning")
        #expect(await self.outcome(task) == .some(deadline), "woke at its deadline, without an error")
    }

    @Test("advancing wakes exactly the sleepers whose deadline it reached")
    func advanceWakesOnlyDueSleepers() async {
        let clock = ManualClock()
        let early = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(1)))
        let late = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(3)))
        #expect(await clock.waitForSleepers(count: 2))

        clock.advance(by: .seconds(2))
        #expect(await self.outcome(early) == .some(clock.now), "past its deadline")
        #expect(clock.sleeperDeadlines == [ManualClock.Instant(offset: .seconds(3))], "the later one still sleeps")

        clock.advance(by: .seconds(60))
        #expect(await self.outcome(late) == .some(ManualClock.Instant(offset: .seconds(62))))
        #expect(clock.sleeperCount == 0)
    }

    @Test("a deadline already reached returns at once, through the Clock API too")
    func pastDeadlineReturnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(10))
        try await clock.sleep(until: clock.now)
        try await clock.sleep(until: ManualClock.Instant(offset: .seconds(1)))
        try await clock.sleep(for: .zero)
        #expect(clock.sleeperCount == 0, "none of them registered")
    }

    @Test("a sleeping task that is cancelled throws CancellationError at once, and stops counting as a sleeper")
    func cancelledSleeperThrows() async {
        let clock = ManualClock()
        let task = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(60)))
        #expect(await clock.waitForSleepers(count: 1))
        task.cancel()
        #expect(await self.outcome(task) == .some(nil), "CancellationError, without advancing the clock")
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(60))  // resumes nothing a second time
        #expect(clock.sleeperCount == 0)
    }

    @Test("a task cancelled before it sleeps throws at once and never registers")
    func alreadyCancelledThrows() async {
        let clock = ManualClock()
        let start = Latch()
        let task = Task {
            await start.wait()
            do {
                try await clock.sleep(until: clock.now.advanced(by: .seconds(1)))
                return false
            } catch {
                return error is CancellationError
            }
        }
        task.cancel()
        start.release()
        #expect(await withTimeoutOrNil("the cancelled sleeper") { await task.value } == true)
        #expect(clock.sleeperCount == 0)
    }

    @Test("cancelling and advancing at the same time resume each sleeper exactly once")
    func cancelRacesAdvance() async {
        let clock = ManualClock()
        var woken = 0
        var cancelled = 0
        for round in 1...100 {
            let task = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(1)))
            if round.isMultiple(of: 2) { #expect(await clock.waitForSleepers(count: 1)) }
            await race {
                task.cancel()
            } against: {
                clock.advance(by: .seconds(1))
            }
            switch await self.outcome(task) {
            case .some(.some): woken += 1
            case .some(.none): cancelled += 1
            case .none: break
            }
            #expect(clock.sleeperCount == 0, "round \(round): nobody left asleep")
        }
        #expect(woken + cancelled == 100, "each sleeper ended exactly once")
    }

    @Test("waitForSleepers returns at once when enough tasks sleep, else when the last of them falls asleep")
    func waitForSleepers() async {
        let clock = ManualClock()
        #expect(await clock.waitForSleepers(count: 0), "zero sleepers: at once")
        let released = LockedFlag()
        let watcher = Task { () -> Bool in
            defer { released.set() }
            return await clock.waitForSleepers(count: 2)
        }
        let first = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(1)))
        #expect(await clock.waitForSleepers(count: 1))
        await letOthersRun()
        #expect(!released.isSet, "one sleeper of two")
        let second = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(2)))
        #expect(await withTimeoutOrNil("the watcher") { await watcher.value } == true, "released by the second sleeper")
        #expect(clock.sleeperCount == 2)
        clock.advance(by: .seconds(2))
        #expect(await self.outcome(first) == .some(ManualClock.Instant(offset: .seconds(2))))
        #expect(await self.outcome(second) == .some(ManualClock.Instant(offset: .seconds(2))))
    }

    @Test("jump(to:) sets the time back without waking anyone, and forward waking the sleepers it passes")
    func jumpBackAndForth() async {
        let clock = ManualClock()
        clock.advance(by: .seconds(100))
        let task = self.sleeper(on: clock, until: ManualClock.Instant(offset: .seconds(110)))
        #expect(await clock.waitForSleepers(count: 1))

        clock.jump(to: ManualClock.Instant(offset: .seconds(95)))
        #expect(clock.now == ManualClock.Instant(offset: .seconds(95)), "the time went back")
        #expect(clock.sleeperDeadlines == [ManualClock.Instant(offset: .seconds(110))], "still asleep")

        clock.advance(by: .seconds(14))
        #expect(clock.sleeperCount == 1, "at 109: still before the deadline")
        clock.jump(to: ManualClock.Instant(offset: .seconds(200)))
        #expect(await self.outcome(task) == .some(ManualClock.Instant(offset: .seconds(200))))
    }

    @Test("failNextSleeps(_:) makes that many sleeps throw at once; the sleeps after them work")
    func failNextSleeps() async throws {
        let clock = ManualClock()
        clock.failNextSleeps(2)
        for attempt in 1...2 {
            await #expect(throws: ManualClock.SleepFailure.self, "sleep \(attempt)") {
                try await clock.sleep(until: clock.now.advanced(by: .seconds(60)))
            }
        }
        #expect(clock.failedSleeps == 2)
        #expect(clock.sleeperCount == 0, "a failed sleep never registers")

        let task = self.sleeper(on: clock, until: clock.now.advanced(by: .seconds(1)))
        #expect(await clock.waitForSleepers(count: 1), "the third sleep sleeps")
        clock.advance(by: .seconds(1))
        #expect(await self.outcome(task) == .some(ManualClock.Instant(offset: .seconds(1))))
        #expect(clock.failedSleeps == 2)
    }

    @Test("failEverySleep() makes every later sleep throw, even one whose deadline passed")
    func failEverySleep() async {
        let clock = ManualClock()
        clock.failEverySleep()
        for _ in 0..<5 {
            await #expect(throws: ManualClock.SleepFailure.self) {
                try await clock.sleep(until: clock.now)
            }
        }
        #expect(clock.failedSleeps == 5)
    }

    @Test("returnEverySleepAtOnce() makes every later sleep return at once, without an error or the time moving")
    func returnEverySleepAtOnce() async throws {
        let clock = ManualClock()
        clock.returnEverySleepAtOnce()
        for _ in 0..<5 {
            try await clock.sleep(until: clock.now.advanced(by: .seconds(60)))
        }
        #expect(clock.now == ManualClock.Instant(offset: .zero))
        #expect(clock.failedSleeps == 5)
        #expect(clock.sleeperCount == 0)
    }
}
