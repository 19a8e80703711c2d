// The keep-alive and replay-expiry timer, driven by clocks that misbehave (the scripted clock of
// Support/ScriptedClock.swift, and a real-time clock written here): a sleep that throws (once, always, every other time, `CancellationError` without
// being cancelled), never returns (with or without honouring cancellation), returns early or
// at once; a `now` that moves on every read; jumps forward (2^41 s, up to `Duration`'s limits)
// and back; a clock that wakes its sleepers on another thread, and one that sleeps in real time
// on a Dispatch queue. More of them, each sleep scripted, in +ScriptedSleeps.swift. The spec is the documentation of the `clock:` parameters and
// Guides/Replay.md ("Keeping the upstream alive").
//
// Everything is observed through the public API: a base whose iterations record their start
// and end (through their `AsyncStream`'s `onTermination`), an `AsyncSharedSource` whose start
// and stop closures record their sessions, subscriber counts, replay caches, and sentinels
// that tell when the shared storage (and so its upstream and timer tasks) is gone. Order comes
// from gates and from driving the clock; deadlines are hang guards only.
//
// Found, and fixed: a clock read near `Duration`'s upper limit trapped the timer's
// arithmetic (fixed: it saturates; the three child-process tests); a sleep that returned at
// once while `now` crept made the timer poll the clock until the deadline, and a clock that
// passed the deadline but was set back before the timer read it kept the window open (both
// fixed by one rule: a sleep that returns means its instant came).

import Dispatch
import Testing

// `@testable` only for `Lock`, the library's pthread-backed lock, which ThreadSanitizer
// understands (it does not model `Synchronization.Mutex` on Linux). Every assertion goes
// through the public API.
@testable import AsyncMulticast

// MARK: - Clocks

/// A clock on real time (`ContinuousClock`) whose sleeps are timed and ended by a Dispatch
/// queue: each sleep returns on a Dispatch thread.
private struct DispatchSleepClock: Clock, Sendable {
    typealias Duration = Swift.Duration
    typealias Instant = ContinuousClock.Instant

    var now: Instant { ContinuousClock.now }
    var minimumResolution: Duration { .zero }

    /// Resumes its continuation once: on time, or on cancellation.
    private final class Once: Sendable {
        private let continuation = Lock<CheckedContinuation<Void, any Error>?>(nil)
        private let cancelled = Lock(false)

        func set(_ continuation: CheckedContinuation<Void, any Error>) {
            let cancelledFirst = self.cancelled.withLock { $0 }
            self.continuation.withLock { $0 = continuation }
            if cancelledFirst { self.resume(.failure(CancellationError())) }
        }

        func cancel() {
            self.cancelled.withLock { $0 = true }
            self.resume(.failure(CancellationError()))
        }

        func resume(_ result: Result<Void, any Error>) {
            let continuation = self.continuation.withLock { continuation in
                defer { continuation = nil }
                return continuation
            }
            continuation?.resume(with: result)
        }
    }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let once = Once()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                once.set(continuation)
                let remaining = ContinuousClock.now.duration(to: deadline).components
                let nanoseconds = max(0, remaining.seconds * 1_000_000_000 + remaining.attoseconds / 1_000_000_000)
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
                    once.resume(.success(()))
                }
            }
        } onCancel: {
            once.cancel()
        }
    }
}

/// The instant `offset` after a `ScriptedClock` was created.
private func at(_ offset: Duration) -> ScriptedClock.Instant { ScriptedClock.Instant(offset: offset) }

/// 2^40 s: a window this long or longer is forever.
private let forever = Duration.seconds(Int64(1) << 40)
/// 2^41 s: a jump past any timed window.
private let farJump = Duration.seconds(Int64(1) << 41)

// MARK: - Recorded upstreams

/// A lock-protected list of strings, appended from any task.
private final class StringLog: Sendable {
    private let state = Lock<[String]>([])
    func append(_ value: String) { self.state.withLock { $0.append(value) } }
    var values: [String] { self.state.withLock { $0 } }
}

// MARK: - Subscribers

/// A subscriber that joins, reads one element and leaves (its iterator is released), under a
/// hang guard.
private func visit<S: AsyncSequence & Sendable>(
    _ sequence: S, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Int? where S.AsyncIterator == SharedIterator<Int, Never> {
    try await withTimeout("a visit", seconds: 300, sourceLocation: sourceLocation) {
        var iterator = sequence.makeAsyncIterator()
        return await iterator.next()
    }
}

/// A subscriber that joins; once it has joined, `feed` runs; then it reads one element and
/// leaves. For an iteration kept alive by a window, whose elements reach only the
/// subscribers present when they are produced.
private func visit<S: AsyncSequence & Sendable>(
    _ sequence: S, feeding feed: @Sendable () -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> Int? where S.AsyncIterator == SharedIterator<Int, Never> {
    let subscriber = await SubscriberTask.join({ sequence.makeAsyncIterator() }, sourceLocation: sourceLocation)
    subscriber.request()
    feed()
    let value = await subscriber.answer(sourceLocation: sourceLocation)
    await subscriber.leave(sourceLocation: sourceLocation)
    return value
}

// MARK: - Near Duration's upper limit (run in child processes)

/// The window's deadline is an hour minus 10 s before the limit: representable.
private func nearLimitTimerChunk() async throws {
    let clock = ScriptedClock()
    let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
    clock.jump(to: Duration(attoseconds: .max) - .seconds(3_600))
    _ = try await visit(shared)
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(10))
    _ = try await log.waitForEnd(of: 0)
}

/// The last subscriber leaves a second before the limit.
private func nearLimitLeave() async throws {
    let clock = ScriptedClock()
    let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
    clock.jump(to: Duration(attoseconds: .max) - .seconds(1))
    _ = try await visit(shared)
    clock.advance(by: .seconds(10))  // saturates at the limit, past the deadline
    _ = try await log.waitForEnd(of: 0)
}

/// The clock jumps a second before the limit while the keep-alive window is open: the window
/// closes, and the replay cache's expiry window opens.
private func nearLimitExpiry() async throws {
    let clock = ScriptedClock()
    let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
    _ = try await visit(replayed)
    try await clock.waitForSleepers(1)
    clock.jump(to: Duration(attoseconds: .max) - .seconds(1))
    _ = try await log.waitForEnd(of: 0)
    clock.advance(by: .seconds(60))  // saturates at the limit, past the deadline
    try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
}

// MARK: - Tests

/// Serialized: one test spins a timer that never suspends (holding a thread of the
/// cooperative pool), another blocks a pool thread in a slow `stop`; together, on two cores,
/// they would starve the pool. Each test is short.
@Suite("Misbehaving clocks: the keep-alive and replay-expiry timer", .serialized, .timeLimit(.minutes(15)))
struct MisbehavingClockTimerTests {
    // MARK: Sleeps that throw

    @Test("share: a sleep that throws every other time closes every other window at once, the others at their deadline")
    func sleepThrowsEveryOtherTime() async throws {
        let clock = ScriptedClock { $0 % 2 == 0 ? .throwFailure : .normal }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        for session in 0..<6 {
            #expect(try await visit(shared) == session, "a new iteration each time, greeted with its index")
            #expect(shared.subscriberCount == 0)
            if session % 2 == 0 {
                #expect(try await log.waitForEnd(of: session) == .cancelled, "a failed sleep closes the window at once")
                #expect(clock.sleepCalls == session + 1)
            } else {
                try await clock.waitForSleepers(1)
                #expect(clock.sleeperWakes == [clock.reading.advanced(by: .seconds(10))])
                clock.advance(by: .seconds(10) - .nanoseconds(1))
                await letOthersRun()
                #expect(log.end(of: session) == nil, "not before its deadline")
                clock.advance(by: .nanoseconds(1))
                #expect(try await log.waitForEnd(of: session) == .cancelled, "at its deadline")
            }
        }
        #expect(clock.sleepCalls == 6, "one sleep per window")
        #expect(log.overlaps == 0)
        #expect(log.starts == 6)
    }

    @Test("replay: a sleep throwing CancellationError although not cancelled closes the keep-alive and expiry windows")
    func sleepThrowsCancellationErrorUncancelled() async throws {
        let clock = ScriptedClock { _ in .throwCancellation }
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        for session in 0..<3 {
            #expect(replayed.replayCache.isEmpty, "no stale cache greets a restarted upstream")
            #expect(try await visit(replayed) == session, "the fresh iteration's first element, not a stale one")
            #expect(try await log.waitForEnd(of: session) == .cancelled, "the keep-alive window closed at once")
            try await waitUntil("the cache to expire at once") { replayed.replayCache.isEmpty }
            #expect(clock.sleepCalls == 2 * (session + 1), "one sleep per window")
        }
        #expect(log.overlaps == 0)
    }

    @Test("replay: a sleep that throws once closes the keep-alive window at once; the expiry window is timed as usual")
    func replaySleepThrowsOnce() async throws {
        let clock = ScriptedClock { $0 == 0 ? .throwFailure : .normal }
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        #expect(try await visit(replayed) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForSleepers(1)
        #expect(clock.sleeperWakes == [at(.seconds(60))], "the cache expires 60 s after the stop")
        #expect(replayed.replayCache == [0])
        clock.advance(by: .seconds(60) - .nanoseconds(1))
        await letOthersRun()
        #expect(replayed.replayCache == [0], "not before its deadline")
        clock.advance(by: .nanoseconds(1))
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
        #expect(clock.sleeperCount == 0)
    }

    @Test("AsyncSharedSource: a sleep that always throws stops each session at once and expires its cache")
    func sourceSleepAlwaysThrows() async throws {
        let clock = ScriptedClock { _ in .throwFailure }
        let sessions = SourceSessions()
        let source = sessions.makeSource(
            replay: 1, keepAlive: .seconds(10), replayExpiration: .seconds(60), clock: clock)
        for session in 0..<4 {
            #expect(source.replayCache.isEmpty)
            #expect(try await visit(source) == session)
            try await sessions.waitForStops(session + 1)
            try await waitUntil("the cache to expire at once") { source.replayCache.isEmpty }
            sessions.expectOrderly(running: false)
        }
        #expect(clock.sleepCalls == 8)
    }

    @Test("AsyncSharedSource: a window re-armed on a timer whose next sleep throws closes at once, stop in order")
    func sourceSleepThrowsEveryOtherTime() async throws {
        let clock = ScriptedClock { $0 % 2 == 1 ? .throwFailure : .normal }
        let sessions = SourceSessions()
        let source = sessions.makeSource(keepAlive: .seconds(5), clock: clock)
        for session in 0..<4 {
            let start = clock.reading
            #expect(try await visit(source) == session)
            try await clock.waitForSleepers(1)  // a good sleep, toward start + 5
            clock.advance(by: .seconds(2))
            #expect(await visit(source, feeding: { sessions.send(100 + session) }) == 100 + session, "the same session")
            // That leave moved the deadline to start + 7; at start + 5 the timer wakes and
            // sleeps again: that sleep throws, which closes the window at once.
            clock.advance(by: .seconds(3))
            try await sessions.waitForStops(session + 1)
            #expect(clock.reading == start.advanced(by: .seconds(5)), "closed before its deadline, start + 7")
            #expect(clock.sleepCalls == 2 * (session + 1))
            sessions.expectOrderly(running: false)
        }
    }

    // MARK: Sleeps that never return, or return early

    @Test("a sleep that never returns: the window stays open after the value is dropped, until the upstream ends")
    func sleepNeverReturns() async throws {
        let clock = ScriptedClock { _ in .never }
        let log = ScriptedLog()
        let gone = GoneFlag()
        var replayed: AsyncShareSequence<Int, Never>? = ScriptedBase(log: log, gone: gone).replay(
            1, keepAlive: .seconds(10), replayExpiration: .seconds(60), clock: clock)
        #expect(try await visit(replayed!) == 0)
        try await clock.waitForSleepers(1)
        replayed = nil
        clock.advance(by: .seconds(1_000))
        await letOthersRun()
        #expect(log.end(of: 0) == nil, "the window stays open")
        #expect(!gone.isSet)
        log.finishLatest()
        #expect(try await log.waitForEnd(of: 0) == .finished)
        try await clock.waitForSleepers(0)  // the timer's sleep was cancelled
        try await waitUntil("the storage, its upstream and timer tasks to be gone") { gone.isSet }
    }

    @Test("a sleep that ignores cancellation and never returns: a window opened after the clock is set back is timed")
    func stuckSleepThenSetBack() async throws {
        let clock = ScriptedClock { $0 == 0 ? .neverEvenIfCancelled : .normal }
        defer { clock.releaseStuckSleeps() }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        clock.jump(to: .seconds(100))
        #expect(try await visit(shared) == 0)  // the window 100 to 110, its sleep stuck
        try await clock.waitForSleepers(1)
        clock.jump(to: .seconds(50))
        #expect(await visit(shared, feeding: { log.send(7) }) == 7, "back in the window: the same iteration")
        // The window 50 to 60: a new timer, since the stuck one sleeps toward 110.
        try await clock.waitForSleepers(2)
        clock.jump(to: .seconds(60) - .nanoseconds(1))
        await letOthersRun()
        #expect(log.end(of: 0) == nil)
        clock.advance(by: .nanoseconds(1))
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "at 60, its own deadline")
        #expect(log.starts == 1)
    }

    @Test("a sleep that returns early (the time moved): the timer trusts it, the window closes when it returns")
    func sleepReturnsEarlyOnce() async throws {
        let clock = ScriptedClock { $0 == 0 ? .early(by: .seconds(1)) : .normal }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visit(shared) == 0)
        try await clock.waitForSleepers(1)
        clock.jump(to: .seconds(9) - .nanoseconds(1))
        await letOthersRun()
        #expect(log.end(of: 0) == nil, "its sleep has not returned")
        // Documented: a sleep that returns means its instant came, whatever the clock reads.
        clock.jump(to: .seconds(9))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(clock.sleepCalls == 1)
        // The next window, on a sleep that behaves, ends at its own deadline.
        #expect(try await visit(shared) == 1)
        try await clock.waitForSleepers(1)
        #expect(clock.sleeperWakes == [at(.seconds(19))])
        try await log.expectEnds(
            1, cancelled: at(.seconds(19)), notBefore: at(.seconds(19) - .nanoseconds(1)), on: clock)
    }

    @Test("a sleep that always returns 1 s early: each window closes 1 s early, when its sleep returns")
    func sleepAlwaysReturnsEarly() async throws {
        let clock = ScriptedClock { _ in .early(by: .seconds(1)) }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        for session in 0..<3 {
            #expect(try await visit(shared) == session)
            try await clock.waitForSleepers(1)
            // The instant its sleep returns at: 1 s before the deadline.
            let wake = try #require(clock.sleeperWakes.first ?? nil)
            try await log.expectEnds(
                session, cancelled: wake, notBefore: wake.advanced(by: .nanoseconds(-1)), on: clock)
            #expect(clock.sleepCalls == session + 1, "one sleep per window")
        }
        #expect(log.overlaps == 0)
    }

    @Test(
        "a clock whose now moves on every read (1 ns), sleeping correctly: the window ends when it reads its deadline")
    func nowMovesOnEveryRead() async throws {
        let clock = ScriptedClock(tickPerRead: .nanoseconds(1))
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        for session in 0..<3 {
            #expect(try await visit(shared) == session)
            try await clock.waitForSleepers(1)
            let wake = try #require(clock.sleeperWakes.first ?? nil)
            let leftAt = wake.advanced(by: .seconds(-10))
            #expect(leftAt <= clock.reading && clock.reading.duration(to: wake) <= .seconds(10))
            clock.jump(to: wake.advanced(by: .nanoseconds(-1)))
            await letOthersRun()
            #expect(log.end(of: session) == nil, "not before its deadline")
            clock.jump(to: wake)
            #expect(try await log.waitForEnd(of: session) == .cancelled)
        }
        #expect(log.overlaps == 0)
    }

    @Test("a clock that only moves when read (1 s a read) and sleeps at once: the window closes after a few reads")
    func clockMovedOnlyByReads() async throws {
        let clock = ScriptedClock(tickPerRead: .seconds(1)) { _ in .returnAtOnce }
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visit(shared) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(clock.sleepCalls <= 10, "each loop of the timer reads the clock, which moves it")
    }

    @Test("a clock whose sleep returns at once while its now moves a little on every read: the window closes at once")
    func sleepReturnsAtOnceWhileNowCreeps() async throws {
        let clock = ScriptedClock(tickPerRead: .nanoseconds(1)) { _ in .returnAtOnce }
        let log = ScriptedLog()
        let gone = GoneFlag()
        var shared: AsyncShareSequence<Int, Never>? = ScriptedBase(log: log, gone: gone).share(
            keepAlive: .seconds(10), clock: clock)
        #expect(try await visit(shared!) == 0)
        // Documented: a sleep that returns means its instant came. The timer does not poll a
        // clock that cannot sleep (it held a thread of the pool for some 3·10^9 sleeps).
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(clock.sleepCalls == 1)
        shared = nil
        try await waitUntil("the storage and its timer task to be gone") { gone.isSet }
    }

    // MARK: Jumps

    @Test("share: jumps of ±2^41 s, repeatedly, while windows open and close; each ends at its own deadline")
    func jumpsBothWays() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        var generator = LCG(seed: 41)
        var iteration = 0
        #expect(try await visit(shared) == 0)
        for round in 0..<12 {
            // A window is open. Set back: it stays open, and a visit continues the iteration.
            try await clock.waitForSleepers(1)
            let back = farJump * Int.random(in: 1...3, using: &generator)
            clock.advance(by: .zero - back)
            await letOthersRun()
            #expect(log.end(of: iteration) == nil, "round \(round): a clock set back does not close the window")
            let marker = 1_000 + round
            #expect(await visit(shared, feeding: { log.send(marker) }) == marker)
            // The window opened now ends at its own deadline, 10 s from the set-back time: a
            // new timer replaces the one sleeping toward the earlier window's end.
            try await clock.waitForWakes([clock.reading.advanced(by: .seconds(10))])
            clock.advance(by: .seconds(10) - .nanoseconds(1))
            await letOthersRun()
            #expect(log.end(of: iteration) == nil, "round \(round): not before its deadline")
            clock.advance(by: .nanoseconds(1))
            #expect(try await log.waitForEnd(of: iteration) == .cancelled, "round \(round): at its deadline")
            iteration += 1
            #expect(try await visit(shared) == iteration, "round \(round): a fresh iteration")
            // Jump far ahead: the window closes when the sleep returns.
            try await clock.waitForSleepers(1)
            clock.advance(by: farJump * Int.random(in: 1...3, using: &generator))
            #expect(try await log.waitForEnd(of: iteration) == .cancelled, "round \(round): jumped past the deadline")
            iteration += 1
            #expect(try await visit(shared) == iteration)
        }
        #expect(log.overlaps == 0)
        #expect(log.starts == iteration + 1)
        #expect(log.stops == iteration)
    }

    @Test("replay: the expiry window after ±2^41 s jumps, and a keep-alive window set back before it")
    func replayExpiryJumps() async throws {
        let clock = ScriptedClock()
        let (log, replayed) = scriptedReplay(2, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        #expect(try await visit(replayed) == 0)
        try await clock.waitForSleepers(1)
        // Set back within the keep-alive window, then a new window from there.
        clock.advance(by: .zero - farJump)
        #expect(await visit(replayed, feeding: { log.send(1) }) == 0, "greeted with the cache")
        try await waitUntil("1 to be produced") { replayed.replayCache == [0, 1] }
        let leftAt = clock.reading
        try await clock.waitForWakes([leftAt.advanced(by: .seconds(10))])
        clock.advance(by: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "the keep-alive closes at its own deadline")
        // The expiry window, from the stop.
        try await waitUntil("the expiry timer to sleep") {
            clock.sleeperWakes == [leftAt.advanced(by: .seconds(70))]
        }
        // Set back within the expiry window: a restart and a stop open a new one from there.
        clock.advance(by: .zero - farJump)
        let late = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await late.take(3) == [0, 1, 1], "the cache, then the restarted iteration's first element")
        await late.leave()
        let secondLeave = clock.reading
        try await clock.waitForWakes([secondLeave.advanced(by: .seconds(10))])  // a new timer: an earlier window
        clock.advance(by: .seconds(10))
        #expect(try await log.waitForEnd(of: 1) == .cancelled)
        try await waitUntil("the expiry timer to sleep") {
            clock.sleeperWakes == [secondLeave.advanced(by: .seconds(70))]
        }
        #expect(replayed.replayCache == [1, 1])
        // Far ahead: the cache expires when the sleep returns.
        clock.advance(by: farJump)
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
        #expect(try await visit(replayed) == 2, "a fresh iteration, no stale greeting")
        #expect(log.overlaps == 0)
    }

    @Test("AsyncSharedSource: ±2^41 s jumps; stop runs once per start, never overlapping the next start")
    func sourceJumps() async throws {
        let clock = ScriptedClock()
        let sessions = SourceSessions()
        let source = sessions.makeSource(replay: 1, keepAlive: .seconds(3), replayExpiration: .seconds(7), clock: clock)
        var generator = LCG(seed: 7)
        for session in 0..<10 {
            #expect(try await visit(source) == session)
            try await clock.waitForSleepers(1)
            if Bool.random(using: &generator) {
                clock.advance(by: .zero - farJump)
                #expect(await visit(source, feeding: { sessions.send(-session) }) == session, "the cache first")
                try await clock.waitForWakes([clock.reading.advanced(by: .seconds(3))])
                clock.advance(by: .seconds(3) - .nanoseconds(1))
                await letOthersRun()
                #expect(sessions.stops.count == session, "not before the new window's deadline")
                clock.advance(by: .nanoseconds(1))
            } else {
                clock.advance(by: farJump)
            }
            try await sessions.waitForStops(session + 1)
            sessions.expectOrderly(running: false)
            // The expiry window.
            try await clock.waitForSleepers(1)
            clock.advance(by: Bool.random(using: &generator) ? farJump : .seconds(7))
            try await waitUntil("the cache to expire") { source.replayCache.isEmpty }
        }
    }

    @Test("a forward jump and a set-back before the timer reads the clock: the window closes when its sleep returns")
    func jumpAheadAndBackBeforeTheTimerLooks() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        clock.jump(to: .seconds(100))
        #expect(try await visit(shared) == 0)
        try await clock.waitForSleepers(1)
        // The clock reads 200 (past the deadline, 110) when the sleep returns, and 50 when
        // the timer reads it. Documented: a sleep that returns means its instant came, so
        // the window closes, and a later reading cannot reopen it.
        clock.jumpAndReturn(ahead: .seconds(200), back: .seconds(50))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(clock.sleepCalls == 1)
    }

    @Test("keepAlive and replayExpiration: just under 2^40 s is timed, 2^40 s and .seconds(Int64.max) are forever")
    func foreverThreshold() async throws {
        // Just under: timed, closed by a far jump.
        do {
            let clock = ScriptedClock()
            let (log, replayed) = scriptedReplay(
                1, keepAlive: forever - .nanoseconds(1), replayExpiration: forever - .nanoseconds(1), on: clock)
            #expect(try await visit(replayed) == 0)
            try await clock.waitForSleepers(1)
            clock.advance(by: farJump)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await clock.waitForSleepers(1)
            clock.advance(by: farJump)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
        }
        // 2^40 s and more: never timed, on a clock whose every sleep throws.
        for window in [forever, .seconds(Int64.max)] {
            let clock = ScriptedClock { _ in .throwFailure }
            let (log, shared) = scriptedShare(keepAlive: window, on: clock)
            #expect(try await visit(shared) == 0)
            clock.advance(by: .seconds(Int64.max))
            await letOthersRun()
            #expect(log.end(of: 0) == nil, "\(window): subscribers leaving never stop the upstream")
            #expect(await visit(shared, feeding: { log.send(5) }) == 5, "the same iteration")
            #expect(clock.sleepCalls == 0, "not timed at all")

            let cacheLog = ScriptedLog()
            let replayed = ScriptedBase(log: cacheLog).replay(1, replayExpiration: window, clock: clock)
            #expect(try await visit(replayed) == 0)
            #expect(try await cacheLog.waitForEnd(of: 0) == .cancelled, "no keep-alive: stopped at once")
            clock.advance(by: .seconds(Int64.max))
            await letOthersRun()
            #expect(replayed.replayCache == [0], "\(window): the cache is kept")
            #expect(clock.sleepCalls == 0)
        }
    }

    @Test("a clock set back near Duration's lower limit: windows are timed as usual")
    func nearDurationMin() async throws {
        let clock = ScriptedClock()
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        // The timer counts from the clock's reading when `replayed` was made: 0.
        clock.jump(to: Duration(attoseconds: .min) + .seconds(1))
        #expect(try await visit(replayed) == 0)
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(60))
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
    }

    // Near `Duration`'s upper limit the timer's arithmetic used to overflow and trap ("Overflow
    // in +" in `now + longestTimerSleep`, and in `clock.now() + window` when the last
    // subscriber left, under the storage's lock, or when the replay-expiry window opened). It
    // saturates now. Each scenario runs in a child process, so that a trap fails only it.

    /// Runs `scenario` in a child process and expects it to end normally.
    private func expectNoCrash(
        _ comment: Comment, _ scenario: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        // The exit tests below cannot capture `scenario`: one per scenario.
        switch scenario {
        case 0:
            await #expect(processExitsWith: .success, comment, sourceLocation: sourceLocation) {
                try await nearLimitTimerChunk()
            }
        case 1:
            await #expect(processExitsWith: .success, comment, sourceLocation: sourceLocation) {
                try await nearLimitLeave()
            }
        default:
            await #expect(processExitsWith: .success, comment, sourceLocation: sourceLocation) {
                try await nearLimitExpiry()
            }
        }
    }

    @Test("a subscriber leaves an hour before Duration's upper limit: the timer does not trap")
    func nearDurationMaxTimerChunk() async {
        await self.expectNoCrash("now + one day past Duration's limit", 0)
    }

    @Test("a subscriber leaves a second before Duration's upper limit: leaving does not trap")
    func nearDurationMaxLeave() async {
        await self.expectNoCrash("now + keepAlive past Duration's limit", 1)
    }

    @Test(
        "replay: the clock jumps to a second before Duration's limit during keep-alive: the expiry window does not trap"
    )
    func nearDurationMaxExpiry() async {
        await self.expectNoCrash("now + replayExpiration past Duration's limit", 2)
    }

    // MARK: Joining and leaving around the window

    @Test("a subscriber joining a nanosecond before the deadline, and at it before the timer's sleep returned")
    func joinAtDeadline() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visit(shared) == 0)
        try await clock.waitForSleepers(1)
        clock.jump(to: .seconds(10) - .nanoseconds(1))
        #expect(await visit(shared, feeding: { log.send(1) }) == 1, "a nanosecond before: the same iteration")
        // That leave opened a new window, to 20 - 1 ns; the timer wakes at 10 and sleeps again.
        clock.jump(to: .seconds(10))
        try await clock.waitForWakes([at(.seconds(20) - .nanoseconds(1))])
        // The clock reads the deadline, and the timer's sleep has not returned yet: the window
        // closes when the sleep returns, so the subscriber goes on with the same iteration.
        clock.holdWakes()
        clock.jump(to: .seconds(20) - .nanoseconds(1))
        #expect(await visit(shared, feeding: { log.send(2) }) == 2, "at the deadline: the same iteration")
        clock.releaseHeldWakes()
        // Its leave opened a window to 30 - 1 ns.
        try await clock.waitForWakes([at(.seconds(30) - .nanoseconds(1))])
        #expect(log.end(of: 0) == nil)
        clock.jump(to: .seconds(30) - .nanoseconds(1))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(log.starts == 1)
    }

    @Test("a subscriber joining exactly at the deadline, racing the timer: one outcome or the other, never both")
    func joinExactlyAtDeadlineRace() async throws {
        var continued = 0
        var restarted = 0
        for round in 0..<50 {
            let clock = ScriptedClock()
            let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
            #expect(try await visit(shared) == 0)
            try await clock.waitForSleepers(1)
            clock.jump(to: .seconds(10))  // wakes the timer, which races the subscriber
            for _ in 0..<(round % 4) { await Task.yield() }
            let subscriber = SubscriberBox(shared.makeAsyncIterator())  // joins at once
            let read = subscriber.startNext()
            log.send(-1)  // reaches the subscriber only if iteration 0 went on
            let value = try await withTimeout("the subscriber's read", seconds: 300) { await read.value }
            if value == -1 {
                continued += 1
                #expect(log.end(of: 0) == nil && log.starts == 1, "went on: not stopped")
            } else {
                restarted += 1
                #expect(value == 1, "else a fresh iteration")
                #expect(log.end(of: 0) == .cancelled)
            }
            #expect(shared.subscriberCount == 1)
            subscriber.release()
            #expect(shared.subscriberCount == 0)
            #expect(log.overlaps == 0)
            clock.jump(to: farJump)  // closes the window that leave opened
            _ = try await log.waitForEnd(of: log.starts - 1)
        }
        // Both outcomes are allowed; which one happens is up to the scheduler.
        #expect(continued + restarted == 50)
    }

    @Test("keepAlive .zero stops at once and never sleeps; 1 attosecond is a window of its own")
    func zeroVersusTinyKeepAlive() async throws {
        let clock = ScriptedClock()
        let zeroLog = ScriptedLog()
        let zero = ScriptedBase(log: zeroLog).replay(1, keepAlive: .zero, replayExpiration: .zero, clock: clock)
        #expect(try await visit(zero) == 0)
        #expect(try await zeroLog.waitForEnd(of: 0) == .cancelled)
        #expect(zero.replayCache.isEmpty, "expired at once")
        #expect(clock.sleepCalls == 0)

        let tiny = Duration(attoseconds: 1)
        let tinyLog = ScriptedLog()
        let replayed = ScriptedBase(log: tinyLog).replay(1, keepAlive: tiny, replayExpiration: tiny, clock: clock)
        #expect(try await visit(replayed) == 0)
        try await clock.waitForSleepers(1)
        #expect(clock.sleeperWakes == [clock.reading.advanced(by: tiny)])
        await letOthersRun()
        #expect(tinyLog.end(of: 0) == nil, "the clock has not moved: the window is open")
        #expect(await visit(replayed, feeding: { tinyLog.send(1) }) == 0, "the cache, then the same iteration")
        try await waitUntil("1 to be produced") { replayed.replayCache == [1] }
        #expect(tinyLog.starts == 1)
        try await clock.waitForSleepers(1)
        clock.advance(by: tiny)
        #expect(try await tinyLog.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForSleepers(1)
        #expect(replayed.replayCache == [1])
        clock.advance(by: tiny)
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
    }

    @Test("a subscribing task cancelled while the window is open leaves then, and the window restarts from then")
    func cancelledSubscriberRestartsTheWindow() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visit(shared) == 0)
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        let waiting = await SubscriberTask.join { shared.makeAsyncIterator() }
        waiting.request()
        #expect(shared.subscriberCount == 1)
        clock.advance(by: .seconds(3))
        await waiting.cancel()  // at 8: its next() returns nil and it leaves
        #expect(shared.subscriberCount == 0)
        clock.advance(by: .seconds(2))  // 10: the first window's deadline
        try await waitUntil("the timer to sleep toward 18") { clock.sleeperWakes == [at(.seconds(18))] }
        #expect(log.end(of: 0) == nil, "the window restarted when the cancelled subscriber left")
        clock.advance(by: .seconds(8))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
    }

    @Test("the first subscriber's task cancelled before any element: a window opens for the started upstream")
    func firstSubscriberCancelled() async throws {
        let clock = ScriptedClock()
        let sessions = SourceSessions()
        let source = sessions.makeSource(keepAlive: .seconds(10), clock: clock, greets: false)
        let first = Task {
            var iterator = source.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("the session to start") { sessions.starts == 1 }
        first.cancel()
        #expect(await first.value == nil)
        try await clock.waitForSleepers(1)
        #expect(sessions.isRunning)
        clock.advance(by: .seconds(10))
        try await sessions.waitForStops(1)
        sessions.expectOrderly(running: false)
    }

    @Test(
        "share: 300 leaves and returns within the window keep one iteration and one timer; it stops at the last deadline"
    )
    func manyReturnsWithinTheWindow() async throws {
        let clock = ScriptedClock()
        let (log, shared) = scriptedShare(keepAlive: .seconds(10), on: clock)
        #expect(try await visit(shared) == 0)
        var generator = LCG(seed: 300)
        for _ in 0..<300 {
            clock.advance(by: .milliseconds(Int64.random(in: 0...9_999, using: &generator)))  // within the window
            var iterator: SharedIterator<Int, Never>? = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 1)
            iterator = nil  // leaves: the window restarts
            _ = iterator
            #expect(clock.sleeperCount <= 1, "one timer")
        }
        let deadline = clock.reading.advanced(by: .seconds(10))
        clock.jump(to: deadline.advanced(by: .nanoseconds(-1)))
        try await clock.waitForWakes([deadline])
        #expect(log.end(of: 0) == nil, "not before the last window's deadline")
        clock.jump(to: deadline)
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        #expect(log.starts == 1)
        #expect(clock.sleepCalls <= 301, "no pile of timers")
    }

    @Test("replay: the base ends while the keep-alive window is open: no timer is left, the cache is kept for good")
    func baseEndsDuringTheWindow() async throws {
        let clock = ScriptedClock()
        let (log, replayed) = scriptedReplay(2, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        #expect(try await visit(replayed) == 0)
        try await clock.waitForSleepers(1)
        log.send(1)
        log.finishLatest()
        #expect(try await log.waitForEnd(of: 0) == .finished)
        try await clock.waitForSleepers(0)  // the timer was cancelled with the upstream's end
        clock.advance(by: farJump)
        await letOthersRun()
        #expect(replayed.replayCache == [0, 1], "an ended upstream's cache never expires")
        let late = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await late.drain().elements == [0, 1], "the cache, then the end")
        #expect(log.starts == 1, "an ended sequence never restarts")
        #expect(clock.sleepCalls == 1)
    }

    @Test("AsyncSharedSource: the producer finishes as the window closes, 50 times: stop runs exactly once")
    func sourceFinishesAsTheWindowCloses() async throws {
        for round in 0..<50 {
            let clock = ScriptedClock(wakesOnOtherThread: round % 2 == 0)
            let sessions = SourceSessions()
            let gone = GoneFlag()
            var source: AsyncSharedSource<Int, Never>? = sessions.makeSource(
                replay: 1, keepAlive: .seconds(10), replayExpiration: .seconds(60), clock: clock, gone: gone)
            #expect(try await visit(source!) == 0)
            try await clock.waitForSleepers(1)
            let finisher = Task.detached { sessions.finish() }
            clock.advance(by: .seconds(10))
            await finisher.value
            try await sessions.waitForStops(1)
            await letOthersRun()
            sessions.expectOrderly(running: false)
            // Either the timer stopped the session (its cache then expires 60 s later, on a timer
            // that may not sleep yet: each poll moves the clock on) or the producer ended it
            // (its cache is kept for good, no timer).
            source = nil
            try await waitUntil("the storage and its tasks to be gone") {
                clock.advance(by: .seconds(60))
                return gone.isSet
            }
            #expect(clock.sleeperCount == 0)
            #expect(sessions.starts == 1)
        }
    }

    // MARK: Rapid cycles

    /// Subscribers joining and leaving (some cancelled while waiting, some released before
    /// reading, with pauses between) from several tasks, while the clock moves forward, back
    /// and far ahead until they are done.
    private func churn<S: AsyncSequence & Sendable>(
        _ sequence: S, clock: ScriptedClock, seed: UInt64
    ) async throws where S.AsyncIterator == SharedIterator<Int, Never> {
        try await withTimeout("the churn", seconds: 300) {
            let done = GoneFlag()
            async let driving: Void = Self.drive(clock, until: done, seed: seed &* 31)
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        var generator = LCG(seed: seed &+ UInt64(worker))
                        for _ in 0..<80 {
                            switch Int.random(in: 0..<3, using: &generator) {
                            case 0:  // released without reading
                                _ = sequence.makeAsyncIterator()
                            case 1:  // reads (which may start the upstream), then leaves
                                let reader = Task {
                                    var iterator = sequence.makeAsyncIterator()
                                    _ = await iterator.next()
                                }
                                await Task.yield()
                                reader.cancel()
                                await reader.value
                            default:  // cancelled while it waits
                                let reader = Task {
                                    var iterator = sequence.makeAsyncIterator()
                                    while await iterator.next() != nil {}
                                }
                                for _ in 0..<Int.random(in: 0..<4, using: &generator) { await Task.yield() }
                                reader.cancel()
                                await reader.value
                            }
                            for _ in 0..<Int.random(in: 0..<12, using: &generator) { await Task.yield() }
                        }
                    }
                }
            }
            done.set()
            await driving
        }
    }

    /// Moves `clock` at random, a step per yield, until `done`: mostly forward by up to 2 s
    /// (windows of 1 s open and close), sometimes back, sometimes ±2^41 s.
    private static func drive(_ clock: ScriptedClock, until done: GoneFlag, seed: UInt64) async {
        var generator = LCG(seed: seed)
        while !done.isSet {
            switch Int.random(in: 0..<20, using: &generator) {
            case 0: clock.advance(by: .zero - .milliseconds(Int64.random(in: 1...5_000, using: &generator)))
            case 1: clock.advance(by: farJump)
            case 2: clock.advance(by: .zero - farJump)
            default: clock.advance(by: .milliseconds(Int64.random(in: 0...2_000, using: &generator)))
            }
            await Task.yield()
        }
    }

    @Test("share: rapid join/leave cycles within and across windows never run two iterations at once")
    func churnShare() async throws {
        let clock = ScriptedClock()
        let log = ScriptedLog()
        let gone = GoneFlag()
        var shared: AsyncShareSequence<Int, Never>? = ScriptedBase(log: log, gone: gone).share(
            keepAlive: .seconds(1), clock: clock)
        try await self.churn(shared!, clock: clock, seed: 1)
        #expect(shared!.subscriberCount == 0)
        #expect(log.overlaps == 0, "two iterations at once")
        // Every window closes at the latest when the clock passes its deadline.
        clock.jump(to: .seconds(Int64.max))  // past every deadline the churn set
        try await waitUntil("every iteration to be stopped") { log.stops == log.starts }
        #expect((0..<log.starts).allSatisfy { log.end(of: $0) == .cancelled })
        try await clock.waitForSleepers(0)
        shared = nil
        try await waitUntil("the storage and its tasks to be gone") { gone.isSet }
    }

    @Test("AsyncSharedSource: rapid join/leave cycles; stop once per start, never overlapping the next start")
    func churnSource() async throws {
        let clock = ScriptedClock { $0 % 5 == 4 ? .throwFailure : .normal }
        let sessions = SourceSessions()
        let gone = GoneFlag()
        var source: AsyncSharedSource<Int, Never>? = sessions.makeSource(
            replay: 1, keepAlive: .seconds(1), replayExpiration: .seconds(1), clock: clock, gone: gone)
        try await self.churn(source!, clock: clock, seed: 2)
        #expect(source!.subscriberCount == 0)
        #expect(sessions.overlaps == 0 && sessions.doubleStops == 0)
        // Past every deadline the churn set; each poll moves the clock on by 10 s, past the
        // replay-expiry window that the keep-alive's closing opens.
        clock.jump(to: .seconds(Int64.max))
        source = nil
        try await waitUntil("the storage and its tasks to be gone") {
            clock.advance(by: .seconds(10))
            return gone.isSet
        }
        sessions.expectOrderly(running: false)
        #expect(clock.sleeperCount == 0)
    }

    // MARK: What is left once everything is gone

    @Test("share: dropped while its window is open, the upstream runs until the window closes, then nothing is left")
    func droppedDuringWindow() async throws {
        let clock = ScriptedClock()
        let log = ScriptedLog()
        let gone = GoneFlag()
        var shared: AsyncShareSequence<Int, Never>? = ScriptedBase(log: log, gone: gone).share(
            keepAlive: .seconds(10), clock: clock)
        #expect(try await visit(shared!) == 0)
        try await clock.waitForSleepers(1)
        shared = nil
        await letOthersRun()
        #expect(log.end(of: 0) == nil && !gone.isSet, "the window is still open")
        clock.advance(by: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForSleepers(0)
        try await waitUntil("the storage and its tasks to be gone") { gone.isSet }
    }

    @Test("replay over an AsyncStream: onTermination fires when the window closes, the cache expires, nothing is left")
    func asyncStreamBaseAfterEverythingIsGone() async throws {
        final class Reading: Sendable {
            let value: Int
            init(_ value: Int) { self.value = value }
        }
        let clock = ScriptedClock()
        let (readings, sensor) = AsyncStream.makeStream(of: Reading.self)
        let terminations = StringLog()
        sensor.onTermination = { termination in terminations.append("\(termination)") }
        weak var cached: Reading?
        do {
            let temperature = readings.replay(1, keepAlive: .seconds(2), replayExpiration: .seconds(60), clock: clock)
            let subscriber = await SubscriberTask.join { temperature.makeAsyncIterator() }
            do {
                let reading = Reading(21)
                cached = reading
                sensor.yield(reading)
            }
            #expect(await subscriber.next()?.value == 21)
            await subscriber.cancel()
            #expect(temperature.subscriberCount == 0)
        }
        try await clock.waitForSleepers(1)
        #expect(terminations.values.isEmpty, "the keep-alive window is open")
        clock.advance(by: .seconds(2))
        try await waitUntil("the stream to be cancelled") { terminations.values == ["cancelled"] }
        try await clock.waitForSleepers(1)
        #expect(cached != nil, "the cache outlives the stop for 60 s")
        clock.advance(by: .seconds(60))
        try await waitUntil("the cached reading to be released") { cached == nil }
        try await clock.waitForSleepers(0)
    }

    @Test("AsyncSharedSource dropped while its window is open: stop runs once when the window closes, nothing is left")
    func sourceDroppedDuringWindow() async throws {
        let clock = ScriptedClock()
        let sessions = SourceSessions()
        let gone = GoneFlag()
        var source: AsyncSharedSource<Int, Never>? = sessions.makeSource(
            replay: 1, keepAlive: .seconds(10), replayExpiration: .seconds(20), clock: clock, gone: gone)
        #expect(try await visit(source!) == 0)
        try await clock.waitForSleepers(1)
        source = nil
        await letOthersRun()
        sessions.expectOrderly(running: true)
        clock.advance(by: .seconds(10))
        try await sessions.waitForStops(1)
        try await clock.waitForSleepers(1)  // the expiry window holds the storage
        clock.advance(by: .seconds(20))
        try await waitUntil("the storage and its tasks to be gone") { gone.isSet }
        sessions.expectOrderly(running: false)
        #expect(clock.sleeperCount == 0)
    }

    @Test("a forever keep-alive after the value is dropped: the upstream runs until the base ends (documented)")
    func foreverAfterDropped() async throws {
        let clock = ScriptedClock()
        let log = ScriptedLog()
        let gone = GoneFlag()
        var shared: AsyncShareSequence<Int, Never>? = ScriptedBase(log: log, gone: gone).share(
            keepAlive: .seconds(Int64.max), clock: clock)
        #expect(try await visit(shared!) == 0)
        shared = nil
        clock.advance(by: farJump)
        await letOthersRun()
        // "subscribers leaving never stop the upstream": nobody can subscribe any more, yet it
        // runs on, and holds the storage, until the base ends.
        #expect(log.end(of: 0) == nil && !gone.isSet)
        log.finishLatest()
        #expect(try await log.waitForEnd(of: 0) == .finished)
        try await waitUntil("the storage and its tasks to be gone") { gone.isSet }
        #expect(clock.sleepCalls == 0)
    }

    // MARK: Clocks on other threads

    @Test("a clock that wakes its sleepers on a Dispatch thread: windows are timed as usual")
    func wakesOnAnotherThread() async throws {
        let clock = ScriptedClock(wakesOnOtherThread: true)
        let (log, replayed) = scriptedReplay(1, keepAlive: .seconds(10), replayExpiration: .seconds(60), on: clock)
        for session in 0..<5 {
            #expect(try await visit(replayed) == session)
            try await clock.waitForSleepers(1)
            clock.advance(by: .seconds(10) - .nanoseconds(1))
            await letOthersRun()
            #expect(log.end(of: session) == nil)
            clock.advance(by: .nanoseconds(1))
            #expect(try await log.waitForEnd(of: session) == .cancelled)
            try await clock.waitForSleepers(1)
            clock.advance(by: .seconds(60))
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
        }
        #expect(log.overlaps == 0)
    }

    @Test("a real-time clock sleeping on a Dispatch queue: windows close, sessions restart, nothing is left")
    func dispatchSleepingClock() async throws {
        let sessions = SourceSessions()
        let gone = GoneFlag()
        var source: AsyncSharedSource<Int, Never>? = sessions.makeSource(
            replay: 1, keepAlive: .milliseconds(2), replayExpiration: .milliseconds(2), clock: DispatchSleepClock(),
            gone: gone)
        for session in 0..<3 {
            #expect(try await visit(source!) == session)
            try await sessions.waitForStops(session + 1)
            try await waitUntil("the cache to expire") { source!.replayCache.isEmpty }
        }
        sessions.expectOrderly(running: false)
        source = nil
        try await waitUntil("the storage and its tasks to be gone") { gone.isSet }
    }
}
