// The keep-alive and replay-expiry timer on a `ScriptedClock` (Support/ScriptedClock.swift),
// each sleep scripted: sleeps that throw, return early, late or at once, clocks set back or
// jumping forward at the moment a sleep returns, clocks that creep, windows longer than a day,
// rapid joining and leaving (Guides/Replay.md, "Keeping the upstream alive"). Part of the
// serialized suite of MisbehavingClockTimerTests.swift.
//
// Order comes from gates (the scripted clock's sleepers, `waitUntil` on public state);
// deadlines are hang guards only. Races are looped.
//
// Found, and fixed: after one failed sleep, every later window timed by the same task (a
// re-armed keep-alive window, a replay expiry window longer than a day) closed at that task's
// next wake-up. A window chained after a trusted sleep (the expiry window after the keep-alive)
// was timed from the trusted instant, not from the clock's reading, so a clock set back as the
// sleep returned delayed it. (That the next sleep of a long window may be longer than a day
// after such a set-back is decided, and checked as such.) A sleep that throws without
// cancellation now closes only the window open at that moment.

import Testing

@testable import AsyncMulticast

/// The instant `offset` after a `ScriptedClock` was created.
private func at(_ offset: Duration) -> ScriptedClock.Instant { scriptedInstant(offset) }
private let day = Duration.seconds(86_400)

/// Moves `clock` through a window from `start` to `end`, one sleep of at most a day at a time,
/// each once the timer sleeps toward it; just before `end`, checks `beforeTheEnd`.
private func timeWindow(
    from start: Duration, to end: Duration, on clock: ScriptedClock, beforeTheEnd: () -> Void
) async throws {
    var time = start
    while time < end {
        let next = min(end, time + day)
        try await clock.waitForWakes([at(next)])
        if next == end {
            clock.jump(to: next - .nanoseconds(1))
            await letOthersRun()
            beforeTheEnd()
        }
        clock.jump(to: next)
        time = next
    }
}

/// A subscriber joins `replayed`, reads the first iteration's 0 and leaves; the clock reaches
/// the end of its 10 s keep-alive window, and that iteration is cancelled.
private func visitUntilTheKeepAliveEnds(
    _ replayed: AsyncShareSequence<Int, Never>, _ clock: ScriptedClock, _ log: ScriptedLog,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    #expect(try await visitScripted(replayed, sourceLocation: sourceLocation) == 0, sourceLocation: sourceLocation)
    try await clock.waitForWakes([at(.seconds(10))], sourceLocation: sourceLocation)
    clock.jump(to: .seconds(10))
    #expect(
        try await log.waitForEnd(of: 0, sourceLocation: sourceLocation) == .cancelled, sourceLocation: sourceLocation)
}

extension MisbehavingClockTimerTests {
    @Test("replay: after a failed sleep, a keep-alive window re-armed on the same timer is cut short")
    func failedSleepLeaksIntoARearmedWindow() async throws {
        let clock = ScriptedClock { $0 == 0 ? .throwFailure : .normal }
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(100), on: clock)
        #expect(try await visitScripted(replayed) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "the failed sleep closed the keep-alive at once")
        try await clock.waitForWakes([at(.seconds(100))])  // the expiry window, on the same timer
        clock.jump(to: .seconds(95))
        #expect(
            try await visitScripted(replayed, taking: 2) == [0, 1], "the cache, then the restarted iteration's first")
        try await waitUntil("iteration 1") { log.starts == 2 }
        // Leaving at 95 opened the keep-alive window 95…105; the timer sleeping toward 100 is
        // kept and re-armed (Replay.md: "One timer serves a shared sequence").
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            log.end(of: 1) != nil || clock.sleeperWakes == [at(.seconds(105))]
        }
        // Expected (Replay.md): "a sleep(until:) that throws without its task being cancelled
        // closes the open window at once ...; the next windows are timed as usual". The
        // window 95…105 opened long after the failure.
        // Before the fix: the upstream is stopped at 100, when the timer's (successful) sleep toward
        // the old expiry deadline returns: `runDeadlineTimer` never resets `sleepFailed`.
        #expect(log.end(of: 1) == nil, "closed at 100, 5 s before its deadline")
        if log.end(of: 1) == nil {
            clock.jump(to: .seconds(105))
            #expect(try await log.waitForEnd(of: 1) == .cancelled)
        }
        #expect(log.overlaps == 0)
    }

    @Test("AsyncSharedSource: after a failed sleep, a re-armed keep-alive window stops the session early")
    func failedSleepLeaksIntoARearmedSourceWindow() async throws {
        let clock = ScriptedClock { $0 == 0 ? .throwFailure : .normal }
        let sessions = SourceSessions()
        let source = sessions.makeSource(
            replay: 1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
        #expect(try await visitScripted(source) == 0)
        try await sessions.waitForStops(1)
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(95))
        #expect(try await visitScripted(source, taking: 2) == [0, 1], "the cache, then session 1's first")
        try await waitUntil("session 1") { sessions.starts == 2 }
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            sessions.stops.count == 2 || clock.sleeperWakes == [at(.seconds(105))]
        }
        // Expected (the `clock:` doc of `AsyncSharedSource.init`): "A sleep that throws without
        // being cancelled closes the open window at once ...; the next windows are timed as
        // usual." Before the fix: session 1 stopped at 100 instead of 105.
        #expect(sessions.stops.count == 1, "stopped at 100, 5 s before the window's deadline")
        if sessions.stops.count == 1 {
            clock.jump(to: .seconds(105))
            try await sessions.waitForStops(2)
        }
        sessions.expectOrderly(running: false)
    }

    @Test("replay: after a failed keep-alive sleep, an expiry window longer than a day ends after one day")
    func failedSleepCutsALongExpiryWindow() async throws {
        // The control: a clock that behaves. The 3-day window is timed in three sleeps.
        do {
            let clock = ScriptedClock()
            let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: day * 3, on: clock)
            try await visitUntilTheKeepAliveEnds(replayed, clock, log)
            for chunk in 1...2 {
                try await clock.waitForWakes([at(.seconds(10) + day * chunk)])
                clock.jump(to: .seconds(10) + day * chunk)
            }
            try await clock.waitForWakes([at(.seconds(10) + day * 3)])
            #expect(replayed.replayCache == [0], "still cached after two days")
            clock.jump(to: .seconds(10) + day * 3)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            #expect(clock.longestSleep <= day, "never more than a day at once")
        }
        // The first sleep throws: the keep-alive closes at once, the 3-day expiry window opens.
        let clock = ScriptedClock { $0 == 0 ? .throwFailure : .normal }
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: day * 3, on: clock)
        #expect(try await visitScripted(replayed) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForWakes([at(day)])
        clock.jump(to: day)
        try await waitUntil("the timer to act after a day") {
            replayed.replayCache.isEmpty || clock.sleeperWakes == [at(day * 2)]
        }
        // Expected (Replay.md): "the next windows are timed as usual": the cache expires 3
        // days after the stop. Before the fix: it expires after 1 day, at the first wake-up of the
        // expiry window (`sleepFailed` is still set in `runDeadlineTimer`).
        #expect(replayed.replayCache == [0], "expired after 1 day of 3")
    }

    @Test("replay: the clock set back as the keep-alive sleep returns: the expiry window opened then is delayed")
    func setBackAsTheSleepReturnsDelaysTheExpiryWindow() async throws {
        // The sleep returns at 10 (its deadline), but the clock reads 0 when the timer looks.
        let (clock, replayed) = try await self.keepAliveSleepReturned(reading: .zero)
        #expect(clock.now == at(.zero))
        // Expected (Replay.md): "a clock set back does not delay a window opened after the
        // jump: it ends when the clock reads its own deadline". The expiry window opened when
        // the clock read 0: its deadline is 100. Before the fix: 110 — the window is timed from the
        // trusted instant of the previous sleep (`now = max(clock.now(), sleptUntil)` in
        // `runDeadlineTimer`), i.e. delayed by however far the clock was set back.
        #expect(clock.sleeperWakes == [at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            replayed.replayCache.isEmpty || clock.sleeperWakes == [at(.seconds(110))]
        }
        #expect(replayed.replayCache.isEmpty, "the cache outlives its 100 s window")
        clock.jump(to: .seconds(110))
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
    }

    @Test(
        "a 3-day window, the clock set back 30 days as a sleep returns: the next sleep is toward a day past the trusted instant"
    )
    func setBackDuringALongWindowStretchesASleep() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: day * 3, on: clock)
        #expect(try await visitScripted(shared) == 0)
        try await clock.waitForWakes([at(day)])
        clock.setBackOnNextWake(to: at(.zero - day * 30))
        clock.jump(to: day)
        try await waitUntil("the timer's second sleep") { clock.sleepCalls == 2 && clock.sleeperCount == 1 }
        #expect(log.end(of: 0) == nil, "the window, opened before the set-back, stays open")
        let asked = clock.now.duration(to: clock.sleeperWakes[0]!)
        // Decided (`longestTimerSleep`'s doc): the timer keeps the time its returned sleep
        // vouched for (day 1), so its next sleep is at most a day past that instant: toward
        // day 2, which on a clock set back to -30 days is one sleep of 32 days. Measuring it
        // from the clock's reading instead would make a creeping clock poll again.
        #expect(clock.sleeperWakes == [at(day * 2)])
        #expect(asked == day * 32)
        log.finishLatest()
        #expect(try await log.waitForEnd(of: 0) == .finished)
        try await waitUntil("the timer cancelled") { clock.sleeperCount == 0 }
    }

    @Test("windows of days on a clock whose sleep returns at once: each closes after a bounded number of sleeps")
    func longWindowsOnASleepThatReturnsAtOnce() async throws {
        do {
            let clock = ScriptedClock { _ in .returnAtOnce }
            let (log, shared) = scriptedShare(keepAlive: day * 10, on: clock)
            #expect(try await visitScripted(shared) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            #expect(clock.sleepCalls <= 11, "one sleep per day of the window at most: \(clock.sleepCalls)")
        }
        do {
            let clock = ScriptedClock { _ in .returnAtOnce }
            let (log, replayed) = scriptedReplay(1, keepAlive: day * 3, replayExpiration: day * 5, on: clock)
            #expect(try await visitScripted(replayed) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            #expect(clock.sleepCalls <= 10, "\(clock.sleepCalls) sleeps")
            // A restart after it: a fresh iteration, no stale greeting.
            #expect(try await visitScripted(replayed) == 1)
        }
        do {
            // Just under forever: timed, in sleeps of at most a day; and 2^40 s is never timed.
            let clock = ScriptedClock()
            let (log, shared) = scriptedShare(keepAlive: .seconds(Int64(1) << 40) - .nanoseconds(1), on: clock)
            #expect(try await visitScripted(shared) == 0)
            try await clock.waitForWakes([at(day)])
            clock.jump(to: day)
            try await clock.waitForWakes([at(day * 2)])
            #expect(log.end(of: 0) == nil)
            log.finishLatest()
            #expect(try await log.waitForEnd(of: 0) == .finished)
            try await waitUntil("the timer cancelled") { clock.sleeperCount == 0 }
            let forever = ScriptedClock { _ in .returnAtOnce }
            let log2 = ScriptedLog()
            let shared2 = ScriptedBase(log: log2).replay(
                1, keepAlive: .seconds(Int64(1) << 40), replayExpiration: .seconds(Int64(1) << 40), clock: forever)
            #expect(try await visitScripted(shared2) == 0)
            await letOthersRun()
            #expect(forever.sleepCalls == 0 && log2.end(of: 0) == nil, "never timed")
            log2.finishLatest()
            #expect(try await log2.waitForEnd(of: 0) == .finished)
        }
    }

    @Test("sleeps that return late, early, or throw, in turn: each window closes when its sleep returns or fails")
    func lateEarlyAndThrowingSleepsInTurn() async throws {
        let plans: [ScriptedClock.Sleep] = [.late(by: .seconds(5)), .early(by: .seconds(3)), .throwFailure, .normal]
        let clock = ScriptedClock { plans[$0 % plans.count] }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        for session in 0..<8 {
            #expect(try await visitScripted(shared) == session)
            let left = clock.now
            switch plans[session % plans.count] {
            case .throwFailure:
                #expect(try await log.waitForEnd(of: session) == .cancelled, "a failed sleep closes at once")
                continue
            case .late(let late):
                try await clock.waitForWakes([left.advanced(by: .seconds(10) + late)])
            case .early(let early):
                try await clock.waitForWakes([left.advanced(by: .seconds(10) - early)])
            default:
                try await clock.waitForWakes([left.advanced(by: .seconds(10))])
            }
            let wake = clock.sleeperWakes[0]!
            clock.jump(to: wake.advanced(by: .nanoseconds(-1)))
            await letOthersRun()
            #expect(log.end(of: session) == nil, "session \(session): open until its sleep returns")
            clock.jump(to: wake)
            #expect(try await log.waitForEnd(of: session) == .cancelled, "session \(session)")
        }
        #expect(log.overlaps == 0)
        #expect(clock.sleepCalls == 8, "one sleep per window")
    }

    @Test("replay: rapid concurrent join/leave while a misbehaving clock moves both ways; nothing overlaps or leaks")
    func churnOnAMisbehavingClock() async throws {
        try await withTimeout(seconds: 400) {
            var generator = LCG(seed: 37)
            let planSeed = UInt64.random(in: 0...1_000, using: &generator)
            let clock = ScriptedClock { index in
                var local = LCG(seed: planSeed &+ UInt64(index))
                switch Int.random(in: 0..<6, using: &local) {
                case 0: return .throwFailure
                case 1: return .returnAtOnce
                case 2: return .early(by: .seconds(2))
                case 3: return .late(by: .seconds(2))
                default: return .normal
                }
            }
            let log = ScriptedLog()
            let replayed = ScriptedBase(log: log).replay(
                1, buffering: .bufferingNewest(4), keepAlive: .seconds(10), replayExpiration: .seconds(30), clock: clock
            )
            for round in 0..<150 {
                let visitors = Int.random(in: 1...3, using: &generator)
                let moves = (0..<3).map { _ in Duration.seconds(Int.random(in: -15...25, using: &generator)) }
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors {
                        group.addTask { try await visitScripted(replayed) }
                    }
                    for move in moves {
                        clock.advance(by: move)
                        await Task.yield()
                    }
                    for try await value in group {
                        #expect(value != nil, "round \(round): a visit got an element")
                    }
                }
            }
            // Everyone left: far ahead, in steps, until the last iteration stopped and the cache
            // expired (a late sleep may need a second step).
            try await waitUntil("every iteration stopped, the cache expired") {
                if log.stops != log.starts || !replayed.replayCache.isEmpty { clock.advance(by: .seconds(1_000)) }
                return log.stops == log.starts && replayed.replayCache.isEmpty
            }
            #expect(log.starts >= 10 && clock.sleepCalls >= 20, "the churn restarted the upstream and timed windows")
            #expect(log.overlaps == 0, "two iterations of the base at once")
            #expect(log.endReports == log.stops, "an iteration ended twice")
            try await waitUntil("no timer left") { clock.sleeperCount == 0 }
            #expect(replayed.subscriberCount == 0)
        }
    }

    @Test(
        "AsyncSharedSource: rapid concurrent join/leave on a misbehaving clock; stop once per start, never overlapping")
    func sourceChurnOnAMisbehavingClock() async throws {
        try await withTimeout(seconds: 400) {
            var generator = LCG(seed: 41)
            let clock = ScriptedClock { index in
                switch index % 5 {
                case 0: return .normal
                case 1: return .throwFailure
                case 2: return .early(by: .seconds(1))
                case 3: return .returnAtOnce
                default: return .late(by: .seconds(1))
                }
            }
            let sessions = SourceSessions()
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(3), replayExpiration: .seconds(7), clock: clock)
            for round in 0..<150 {
                let visitors = Int.random(in: 1...3, using: &generator)
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors {
                        group.addTask { try await visitScripted(source) }
                    }
                    clock.advance(by: .seconds(Int.random(in: -5...9, using: &generator)))
                    for try await value in group {
                        #expect(value != nil, "round \(round)")
                    }
                }
                #expect(sessions.overlaps == 0 && sessions.doubleStops == 0, "round \(round)")
            }
            try await waitUntil("the last session stopped and the cache expired") {
                if sessions.isRunning || !source.replayCache.isEmpty { clock.advance(by: .seconds(100)) }
                return !sessions.isRunning && source.replayCache.isEmpty
            }
            try await waitUntil("every session stopped") { sessions.stops.count == sessions.starts }
            #expect(sessions.starts >= 10 && clock.sleepCalls >= 20, "the churn restarted sessions and timed windows")
            sessions.expectOrderly(running: false)
        }
    }

    @Test("share: a sleep failing in the middle of a 3-day keep-alive closes it; the next 3-day window is timed fully")
    func failureInTheMiddleOfALongWindow() async throws {
        let clock = ScriptedClock { $0 == 1 ? .throwFailure : .normal }
        let (log, shared) = scriptedShare(keepAlive: day * 3, on: clock)
        #expect(try await visitScripted(shared) == 0)
        try await clock.waitForWakes([at(day)])
        clock.jump(to: day)
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "the second sleep failed: closed at once")
        try await waitUntil("the timer gone") { clock.sleeperCount == 0 }
        // A new window, opened at day 1, long after the failure: timed as usual.
        #expect(try await visitScripted(shared) == 1)
        for chunk in 2...3 {
            try await clock.waitForWakes([at(day * chunk)])
            clock.jump(to: day * chunk)
            await letOthersRun()
            #expect(log.end(of: 1) == nil, "closed before its deadline (day \(chunk) of 4)")
        }
        try await clock.waitForWakes([at(day * 4)])
        try await log.expectEnds(1, cancelled: at(day * 4), notBefore: at(day * 4 - .nanoseconds(1)), on: clock)
        #expect(clock.longestSleep <= day)
        #expect(log.overlaps == 0)
    }

    @Test(
        "replay: a sleep failing in the middle of a 3-day expiry window expires the cache; the next windows are timed")
    func failureInTheMiddleOfAChainedWindow() async throws {
        // Sleeps: 0 keep-alive (to 10 s), 1 expiry (to 10 s + 1 day), 2 expiry: fails.
        let clock = ScriptedClock { $0 == 2 ? .throwFailure : .normal }
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: day * 3, on: clock)
        try await visitUntilTheKeepAliveEnds(replayed, clock, log)
        try await clock.waitForWakes([at(.seconds(10) + day)])
        clock.jump(to: .seconds(10) + day)
        try await waitUntil("the cache expired by the failed sleep") { replayed.replayCache.isEmpty }
        try await waitUntil("the timer gone") { clock.sleeperCount == 0 }
        // Later: a fresh iteration, no stale greeting; its windows are timed as usual.
        let t0 = Duration.seconds(10) + day
        #expect(try await visitScripted(replayed) == 1, "no stale greeting")
        try await clock.waitForWakes([at(t0 + .seconds(10))])
        try await log.expectEnds(1, cancelled: at(t0 + .seconds(10)), notBefore: at(t0 + .seconds(9)), on: clock)
        let stopped = t0 + .seconds(10)
        for chunk in 1...2 {
            try await clock.waitForWakes([at(stopped + day * chunk)])
            clock.jump(to: stopped + day * chunk)
            await letOthersRun()
            #expect(replayed.replayCache == [1], "expired after \(chunk) of 3 days")
        }
        try await clock.waitForWakes([at(stopped + day * 3)])
        clock.jump(to: stopped + day * 3)
        try await waitUntil("the cache expired after 3 days") { replayed.replayCache.isEmpty }
    }

    @Test("AsyncSharedSource: the first sleep fails; the 3-day expiry window chained after it is timed in full")
    func sourceFailureThenLongExpiry() async throws {
        let clock = ScriptedClock { $0 == 0 ? .throwFailure : .normal }
        let sessions = SourceSessions()
        let source = sessions.makeSource(replay: 1, keepAlive: .seconds(10), replayExpiration: day * 3, clock: clock)
        #expect(try await visitScripted(source) == 0)
        try await sessions.waitForStops(1)
        for chunk in 1...2 {
            try await clock.waitForWakes([at(day * chunk)])
            clock.jump(to: day * chunk)
            await letOthersRun()
            #expect(source.replayCache == [0], "expired after \(chunk) of 3 days")
        }
        try await clock.waitForWakes([at(day * 3)])
        clock.jump(to: day * 3)
        try await waitUntil("the cache expired") { source.replayCache.isEmpty }
        #expect(try await visitScripted(source) == 1, "a fresh session, no stale greeting")
        try await sessions.waitForStops(1)
        sessions.expectOrderly(running: true)
        // Its keep-alive (10 s, from day 3) is timed.
        try await clock.waitForWakes([at(day * 3 + .seconds(10))])
        clock.jump(to: day * 3 + .seconds(10))
        try await sessions.waitForStops(2)
        sessions.expectOrderly(running: false)
    }

    @Test("share: a sleep failing while a subscriber is back (no window open) stops nothing; the next window is timed")
    func failureWhileNoWindowIsOpen() async throws {
        let clock = ScriptedClock { $0 == 0 ? .failWhenReleased : .normal }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visitScripted(shared) == 0)
        try await waitUntil("the keep-alive sleep held") { clock.pendingFailures == 1 }
        let reader = await SubscriberTask.join { shared.makeAsyncIterator() }
        reader.request()
        await letOthersRun()
        clock.releaseFailures()  // fails while a subscriber is present: no window is open
        await letOthersRun()
        #expect(log.end(of: 0) == nil, "the upstream stopped under a present subscriber")
        #expect(log.starts == 1)
        log.send(7)
        let got = await reader.response()
        #expect(got == .success(7))
        await reader.leave()
        // The window opened now is timed as usual.
        try await clock.waitForWakes([at(.seconds(10))])
        try await log.expectEnds(0, cancelled: at(.seconds(10)), notBefore: at(.seconds(9)), on: clock)
    }

    @Test("replay/source: failing sleeps at random positions, 60 rounds each: every later window is timed exactly")
    func randomFailurePositions() async throws {
        try await withTimeout(seconds: 150) {
            var generator = LCG(seed: 404)
            for round in 0..<60 {
                let halfDays = (Int.random(in: 1...3, using: &generator), Int.random(in: 1...5, using: &generator))
                let keepAlive = Duration.seconds(halfDays.0 * 43_200)
                let expiry = Duration.seconds(halfDays.1 * 43_200)
                // A failure among the sleeps of session 0 (each window takes one sleep per day).
                let failing = Int.random(in: 0..<((halfDays.0 + 1) / 2 + (halfDays.1 + 1) / 2), using: &generator)
                let clock = ScriptedClock { $0 == failing ? .throwFailure : .normal }
                let (log, replayed) = scriptedReplay(1, keepAlive: keepAlive, replayExpiration: expiry, on: clock)
                // Session 0: its windows, with the failure somewhere (or later).
                #expect(try await visitScripted(replayed) == 0)
                try await waitUntil("round \(round): cycle 0 done") {
                    if clock.sleeperCount == 1 { clock.jump(to: clock.sleeperWakes[0]!) }
                    return replayed.replayCache.isEmpty && clock.sleeperCount == 0 && log.stops == 1
                }
                // Session 1, after the failure: each window timed exactly, in sleeps of a day.
                let begin = clock.reading.offset
                #expect(try await visitScripted(replayed) == 1, "round \(round)")
                let context = "round \(round), \(halfDays) half-days, sleep \(failing) failed"
                let keepAliveEnd = begin + keepAlive
                try await timeWindow(from: begin, to: keepAliveEnd, on: clock) {
                    #expect(log.end(of: 1) == nil, "\(context): the keep-alive closed early")
                }
                #expect(try await log.waitForEnd(of: 1) == .cancelled, "\(context)")
                try await timeWindow(from: keepAliveEnd, to: keepAliveEnd + expiry, on: clock) {
                    #expect(replayed.replayCache == [1], "\(context): the cache expired early")
                }
                try await waitUntil("\(context): the cache to expire") { replayed.replayCache.isEmpty }
                #expect(log.overlaps == 0)
            }
        }
    }

    /// replay(1, keepAlive: 10 s, replayExpiration: 100 s) on a `ScriptedClock`, visited once:
    /// the keep-alive sleep returns at 10 and the clock then reads `reading`. Checks that the
    /// returned sleep closed the keep-alive window (documented: it is trusted) and waits for
    /// the expiry timer's sleep.
    private func keepAliveSleepReturned(
        reading: Duration
    ) async throws -> (ScriptedClock, AsyncShareSequence<Int, Never>) {
        let clock = ScriptedClock()
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(100), on: clock)
        #expect(try await visitScripted(replayed) == 0)
        try await clock.waitForWakes([at(.seconds(10))])
        clock.setBackOnNextWake(to: at(reading))
        clock.jump(to: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "a returned sleep closes the window: it is trusted")
        try await waitUntil("the expiry timer asleep") { clock.sleeperCount == 1 }
        return (clock, replayed)
    }

    /// The keep-alive sleep returns at 10 and the clock then reads `reading`: the expiry
    /// window must end at `reading + 100`.
    private func chainedWindowAfterAJump(to reading: Duration) async throws {
        let (clock, replayed) = try await self.keepAliveSleepReturned(reading: reading)
        #expect(clock.sleeperWakes == [at(reading + .seconds(100))], "clock read \(reading)")
        let expected = reading + .seconds(100)
        clock.jump(to: expected - .nanoseconds(1))
        await letOthersRun()
        #expect(replayed.replayCache == [0], "expired before its deadline (read \(reading))")
        clock.jump(to: expected)
        try await waitUntil("the cache to expire at \(expected)") { replayed.replayCache.isEmpty }
    }

    @Test("the clock set back more than the expiry window as the keep-alive sleep returns: expiry at reading + window")
    func setBackMoreThanTheExpiryWindow() async throws {
        try await self.chainedWindowAfterAJump(to: .seconds(-1_000))
    }

    @Test("the clock set back less than the expiry window as the keep-alive sleep returns: expiry at reading + window")
    func setBackLessThanTheExpiryWindow() async throws {
        try await self.chainedWindowAfterAJump(to: .seconds(5))
    }

    @Test("the clock jumping forward as the keep-alive sleep returns: expiry at reading + window")
    func forwardJumpAsTheSleepReturns() async throws {
        try await self.chainedWindowAfterAJump(to: .seconds(1_000))
    }

    @Test("the clock set back a day at every wake, sleeps returning at once: both windows close after bounded sleeps")
    func creepingAndSetBack() async throws {
        for (keepAlive, expiry) in [
            (day * 2, day * 3), (Duration.seconds(10), day * 4), (day * 5, .seconds(1)),
        ] {
            let clock = ScriptedClock { _ in .returnAtOnce }
            clock.setCreep(.milliseconds(1))
            clock.setOnEveryWake { $0.advanced(by: .zero - day) }
            let (log, replayed) = scriptedReplay(1, keepAlive: keepAlive, replayExpiration: expiry, on: clock)
            #expect(try await visitScripted(replayed) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            let bound = Int(keepAlive / day) + Int(expiry / day) + 4
            #expect(clock.sleepCalls <= bound, "\(keepAlive), \(expiry): \(clock.sleepCalls) sleeps, at most \(bound)")
            #expect(try await visitScripted(replayed) == 1, "a fresh iteration afterwards")
            try await waitUntil("it stops again") { log.stops == 2 }
        }
    }

    @Test("a creeping clock (1 ns per reading) whose sleeps return at once: a bounded number of sleeps per window")
    func creepingClockDoesNotPoll() async throws {
        for round in 0..<20 {
            let clock = ScriptedClock { _ in .returnAtOnce }
            clock.setCreep(.nanoseconds(1))
            let sessions = SourceSessions()
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(10 + round), replayExpiration: day * 2, clock: clock)
            #expect(try await visitScripted(source) == 0)
            try await sessions.waitForStops(1)
            try await waitUntil("round \(round): the cache to expire") { source.replayCache.isEmpty }
            #expect(clock.sleepCalls <= 6, "round \(round): \(clock.sleepCalls) sleeps for 10 s + 2 days")
            sessions.expectOrderly(running: false)
        }
    }

    @Test("forward jumps past both windows as a sleep returns, 100 rounds with churn: no overlap, exact expiry")
    func forwardJumpsWithChurn() async throws {
        try await withTimeout(seconds: 150) {
            var generator = LCG(seed: 4_4)
            let clock = ScriptedClock()
            let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(50), on: clock)
            var cached = false
            for round in 0..<100 {
                // A cached value greets without starting the upstream: read one more to start it.
                let values = try await visitScripted(replayed, taking: cached ? 2 : 1)
                #expect(values.count == (cached ? 2 : 1), "round \(round)")
                let wake = clock.reading.advanced(by: .seconds(10))
                try await clock.waitForWakes([wake])
                let jump = Duration.seconds(Int.random(in: -200...200, using: &generator))
                clock.setBackOnNextWake(to: wake.advanced(by: jump))
                clock.jump(to: wake)
                try await waitUntil("round \(round): the upstream stopped") { log.stops == log.starts }
                let reading = clock.reading
                try await clock.waitForWakes([reading.advanced(by: .seconds(50))])
                cached = true
                if Bool.random(using: &generator) {
                    clock.jump(to: reading.advanced(by: .seconds(50)))
                    try await waitUntil("round \(round): expired") { replayed.replayCache.isEmpty }
                    cached = false
                }
            }
            #expect(log.overlaps == 0)
            #expect(log.endReports == log.stops)
        }
    }

    @Test("replay: a replaced timer whose sleep ignores cancellation and then throws: the newer window is not closed")
    func replacedTimerFailingLate() async throws {
        for round in 0..<30 {
            let clock = ScriptedClock { $0 == 1 ? .failWhenReleasedIgnoringCancellation : .normal }
            let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(100), on: clock)
            try await visitUntilTheKeepAliveEnds(replayed, clock, log)
            try await waitUntil("round \(round): the expiry sleep held") { clock.pendingFailures == 1 }
            // Back within the expiry window: the cache, then a restarted iteration; leaving
            // opens a keep-alive 10…20, ending before the held sleep's 110: the task is replaced.
            #expect(try await visitScripted(replayed, taking: 2) == [0, 1], "round \(round)")
            try await clock.waitForWakes([at(.seconds(20))])
            clock.releaseFailures()  // the replaced task's sleep throws now, its task cancelled
            await letOthersRun()
            #expect(log.end(of: 1) == nil, "round \(round): the replaced timer's failure closed the new window")
            #expect(replayed.replayCache == [1])
            clock.jump(to: .seconds(20))
            #expect(try await log.waitForEnd(of: 1) == .cancelled)
            try await clock.waitForWakes([at(.seconds(120))])
            clock.jump(to: .seconds(120))
            try await waitUntil("round \(round): expired") { replayed.replayCache.isEmpty }
        }
    }
}
