// Adversarial round 4, from outside, through the public API. It attacks the three fixes that
// landed after round 3:
//
// 1. The timer: a `sleep(until:)` that throws (without cancellation) closes only the window
//    open at that moment; later windows of the same timer (re-armed keep-alive windows, the
//    replay-expiry window chained after the keep-alive, windows longer than a day) are timed
//    as usual (Guides/Replay.md, "Keeping the upstream alive").
// 2. The timer: a sleep that returns is trusted, but a window that opens as another closes
//    opens at what the clock reads then; a creeping clock must not make the timer poll.
// 3. `send(contentsOf:)` after the subject completes (Guides/Subjects.md), and
//    `AsyncSharedSource`'s async `stop` (the next `start` waits for it), failed sources.
//
// Order comes from gates (the manual clock's sleepers, held stops, `waitUntil` on public
// state); deadlines are hang guards only. Races are looped.
//
// Found: a completion that comes while a sequence's `next()` is in flight is followed by one
// more pull, in a cancelled task, after that `next()` returns an element; a sequence that
// ignores cancellation then keeps the call until that extra pull returns. The doc of
// `send(contentsOf:)` said the call "returns as soon as that `next()` does". Deliberate in
// `MulticastStorage.send(contentsOf:isolation:)` (a completion as the `next()` returns cannot
// be told apart): the doc now says so, and the test checks the documented behaviour.

import Testing

// `@testable` only for the test-support types (`Lock`, `TerminationRecorder`, `Signal`,
// `Probe`, `SubscriberTask`). Every assertion is about public behaviour.
@testable import AsyncMulticast

// MARK: - The scripted clock and the recorded upstream (Support/ScriptedClock.swift)

private typealias R4Clock = ScriptedClock
private typealias R4Log = ScriptedLog
private typealias R4Base = ScriptedBase
private func at4(_ offset: Duration) -> ScriptedClock.Instant { scriptedInstant(offset) }
private let oneDay = Duration.seconds(86_400)

/// Joins, reads one element, leaves (the iterator is released), under a hang guard.
private func visit4<S: AsyncSequence & Sendable>(
    _ sequence: S, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Int? where S.AsyncIterator == SharedIterator<Int, Never> {
    try await visitScripted(sequence, sourceLocation: sourceLocation)
}

/// Joins, reads `count` elements, leaves, under a hang guard.
private func visit4<S: AsyncSequence & Sendable>(
    _ sequence: S, taking count: Int, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Int] where S.AsyncIterator == SharedIterator<Int, Never> {
    try await visitScripted(sequence, taking: count, sourceLocation: sourceLocation)
}

// MARK: - AsyncSharedSource sessions whose stop can be held

/// The sessions of an `AsyncSharedSource`: each `start` sends its index first. Its `stop` is
/// `async` and, while `holdStops` is set, waits (ignoring cancellation) until
/// `releaseStops()`. Records starts, stops, starts while a previous session had not finished
/// stopping, stops called twice.
private final class R4Sessions: Sendable {
    private struct State: Sendable {
        var emitters: [AsyncSharedSource<Int, Never>.Emitter] = []
        var stopsBegun: [Int] = []
        var stops: [Int] = []
        var active = false
        var overlaps = 0
        var doubleStops = 0
        var holdStops = false
        var heldStops: [CheckedContinuation<Void, Never>] = []
        /// Run inside each stop, before it is held (a late callback from the stopping session).
        var duringStop: (@Sendable (AsyncSharedSource<Int, Never>.Emitter) -> Void)?
        var yieldsInStop = 0
    }
    private let state = Lock(State())

    var starts: Int { self.state.withLock { $0.emitters.count } }
    var stops: [Int] { self.state.withLock { $0.stops } }
    var stopsBegun: [Int] { self.state.withLock { $0.stopsBegun } }
    var overlaps: Int { self.state.withLock { $0.overlaps } }
    var doubleStops: Int { self.state.withLock { $0.doubleStops } }
    var isActive: Bool { self.state.withLock { $0.active } }
    var heldCount: Int { self.state.withLock { $0.heldStops.count } }
    func emitter(_ index: Int) -> AsyncSharedSource<Int, Never>.Emitter { self.state.withLock { $0.emitters[index] } }

    func hold(_ hold: Bool) { self.state.withLock { $0.holdStops = hold } }
    func setYieldsInStop(_ count: Int) { self.state.withLock { $0.yieldsInStop = count } }
    func setDuringStop(_ body: (@Sendable (AsyncSharedSource<Int, Never>.Emitter) -> Void)?) {
        self.state.withLock { $0.duringStop = body }
    }

    func releaseStops() {
        let held = self.state.withLock { state in
            defer { state.heldStops = [] }
            return state.heldStops
        }
        for continuation in held { continuation.resume() }
    }

    func makeSource(
        replay: Int = 0, keepAlive: Duration = .zero, replayExpiration: Duration = .zero,
        clock: some Clock<Duration> = ContinuousClock()
    ) -> AsyncSharedSource<Int, Never> {
        AsyncSharedSource(replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock) {
            emitter in
            let index = self.state.withLock { state in
                if state.active { state.overlaps += 1 }
                state.active = true
                state.emitters.append(emitter)
                return state.emitters.count - 1
            }
            emitter.send(index)
            let stopped = Lock(false)
            return {
                let (hold, during, yields) = self.state.withLock { state in
                    state.stopsBegun.append(index)
                    return (state.holdStops, state.duringStop, state.yieldsInStop)
                }
                during?(emitter)
                for _ in 0..<yields { await Task.yield() }
                if hold {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.state.withLock { $0.heldStops.append(continuation) }
                    }
                }
                let again = stopped.withLock { flag in
                    defer { flag = true }
                    return flag
                }
                self.state.withLock { state in
                    if again { state.doubleStops += 1 }
                    state.active = false
                    state.stops.append(index)
                }
            }
        }
    }

    func waitForStops(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("\(count) stops", sourceLocation: sourceLocation) { self.stops.count >= count }
    }

    func expectOrderly(active: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        let starts = self.starts
        #expect(self.stops == Array(0..<(active ? starts - 1 : starts)), sourceLocation: sourceLocation)
        #expect(self.overlaps == 0, "a start before the previous stop returned", sourceLocation: sourceLocation)
        #expect(self.doubleStops == 0, "a stop called twice", sourceLocation: sourceLocation)
        #expect(self.isActive == active, sourceLocation: sourceLocation)
    }
}

// MARK: - Sequences for send(contentsOf:)

/// A sequence whose `next()` ignores cancellation: each pull waits for `answer(_:)`.
/// Records per pull whether its task was cancelled by the time it was answered.
private final class R4Patient: Sendable {
    private struct State: Sendable {
        var pulls = 0
        var pending: [CheckedContinuation<Int?, Never>] = []
    }
    private let state = Lock(State())
    var pulls: Int { self.state.withLock { $0.pulls } }
    var waiting: Int { self.state.withLock { $0.pending.count } }

    func answer(_ value: Int?) {
        let continuation = self.state.withLock { $0.pending.isEmpty ? nil : $0.pending.removeFirst() }
        continuation?.resume(returning: value)
    }

    fileprivate func pull() async -> Int? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            self.state.withLock { state in
                state.pulls += 1
                state.pending.append(continuation)
            }
        }
    }

    struct Sequence: AsyncSequence, Sendable {
        typealias Element = Int
        typealias Failure = Never
        let control: R4Patient
        struct AsyncIterator: AsyncIteratorProtocol {
            let control: R4Patient
            mutating func next() async -> Int? { await self.control.pull() }
        }
        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(control: self.control) }
    }
    var sequence: Sequence { Sequence(control: self) }
}

/// Counts iterators made and pulls; each pull returns an element at once.
private final class R4IteratorCounter: Sendable {
    private let state = Lock((iterators: 0, pulls: 0))
    var iterators: Int { self.state.withLock { $0.iterators } }
    var pulls: Int { self.state.withLock { $0.pulls } }
    func made() { self.state.withLock { $0.iterators += 1 } }
    func pulled() { self.state.withLock { $0.pulls += 1 } }

    struct Sequence: AsyncSequence, Sendable {
        typealias Element = Int
        typealias Failure = Never
        let counter: R4IteratorCounter
        struct AsyncIterator: AsyncIteratorProtocol {
            let counter: R4IteratorCounter
            mutating func next() async -> Int? {
                self.counter.pulled()
                return 0
            }
        }
        func makeAsyncIterator() -> AsyncIterator {
            self.counter.made()
            return AsyncIterator(counter: self.counter)
        }
    }
    var sequence: Sequence { Sequence(counter: self) }
}

/// Over an `AsyncStream`: `-1` is thrown as `TestError.boom`. Counts pulls.
private struct R4ThrowsOnMinusOne: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = TestError
    let base: AsyncStream<Int>
    let counter: Lock<Int>

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = TestError
        var base: AsyncStream<Int>.Iterator
        let counter: Lock<Int>
        mutating func next(isolation actor: isolated (any Actor)?) async throws(TestError) -> Int? {
            self.counter.withLock { $0 += 1 }
            let value = await self.base.next(isolation: actor)
            if value == -1 { throw .boom }
            return value
        }
        mutating func next() async throws(TestError) -> Int? { try await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.base.makeAsyncIterator(), counter: self.counter)
    }
}

// MARK: - Tests

@Suite("AttackRound4", .serialized, .timeLimit(.minutes(5)))
struct AttackRound4Tests {
    // MARK: 1. Failing sleeps in every position

    @Test("share: a sleep failing in the middle of a 3-day keep-alive closes it; the next 3-day window is timed fully")
    func failureInTheMiddleOfALongWindow() async throws {
        let clock = R4Clock { $0 == 1 ? .throwFailure : .normal }
        let log = R4Log()
        let shared = R4Base(log: log).share(keepAlive: oneDay * 3, clock: clock)
        #expect(try await visit4(shared) == 0)
        try await clock.waitForWakes([at4(oneDay)])
        clock.jump(to: oneDay)
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "the second sleep failed: closed at once")
        try await waitUntil("the timer gone") { clock.sleeperCount == 0 }
        // A new window, opened at day 1, long after the failure: timed as usual.
        #expect(try await visit4(shared) == 1)
        for chunk in 2...3 {
            try await clock.waitForWakes([at4(oneDay * chunk)])
            clock.jump(to: oneDay * chunk)
            await letOthersRun()
            #expect(log.end(of: 1) == nil, "closed before its deadline (day \(chunk) of 4)")
        }
        try await clock.waitForWakes([at4(oneDay * 4)])
        clock.jump(to: oneDay * 4 - .nanoseconds(1))
        await letOthersRun()
        #expect(log.end(of: 1) == nil)
        clock.jump(to: oneDay * 4)
        #expect(try await log.waitForEnd(of: 1) == .cancelled)
        #expect(clock.longestSleep <= oneDay)
        #expect(log.overlaps == 0)
    }

    @Test(
        "replay: a sleep failing in the middle of a 3-day expiry window expires the cache; the next windows are timed")
    func failureInTheMiddleOfAChainedWindow() async throws {
        // Sleeps: 0 keep-alive (to 10 s), 1 expiry (to 10 s + 1 day), 2 expiry: fails.
        let clock = R4Clock { $0 == 2 ? .throwFailure : .normal }
        let log = R4Log()
        let replayed = R4Base(log: log).replay(1, keepAlive: .seconds(10), replayExpiration: oneDay * 3, clock: clock)
        #expect(try await visit4(replayed) == 0)
        try await clock.waitForWakes([at4(.seconds(10))])
        clock.jump(to: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForWakes([at4(.seconds(10) + oneDay)])
        clock.jump(to: .seconds(10) + oneDay)
        try await waitUntil("the cache expired by the failed sleep") { replayed.replayCache.isEmpty }
        try await waitUntil("the timer gone") { clock.sleeperCount == 0 }
        // Later: a fresh iteration, no stale greeting; its windows are timed as usual.
        let t0 = Duration.seconds(10) + oneDay
        #expect(try await visit4(replayed) == 1, "no stale greeting")
        try await clock.waitForWakes([at4(t0 + .seconds(10))])
        clock.jump(to: t0 + .seconds(9))
        await letOthersRun()
        #expect(log.end(of: 1) == nil)
        clock.jump(to: t0 + .seconds(10))
        #expect(try await log.waitForEnd(of: 1) == .cancelled)
        let stopped = t0 + .seconds(10)
        for chunk in 1...2 {
            try await clock.waitForWakes([at4(stopped + oneDay * chunk)])
            clock.jump(to: stopped + oneDay * chunk)
            await letOthersRun()
            #expect(replayed.replayCache == [1], "expired after \(chunk) of 3 days")
        }
        try await clock.waitForWakes([at4(stopped + oneDay * 3)])
        clock.jump(to: stopped + oneDay * 3)
        try await waitUntil("the cache expired after 3 days") { replayed.replayCache.isEmpty }
    }

    @Test("AsyncSharedSource: the first sleep fails; the 3-day expiry window chained after it is timed in full")
    func sourceFailureThenLongExpiry() async throws {
        let clock = R4Clock { $0 == 0 ? .throwFailure : .normal }
        let sessions = R4Sessions()
        let source = sessions.makeSource(replay: 1, keepAlive: .seconds(10), replayExpiration: oneDay * 3, clock: clock)
        #expect(try await visit4(source) == 0)
        try await sessions.waitForStops(1)
        for chunk in 1...2 {
            try await clock.waitForWakes([at4(oneDay * chunk)])
            clock.jump(to: oneDay * chunk)
            await letOthersRun()
            #expect(source.replayCache == [0], "expired after \(chunk) of 3 days")
        }
        try await clock.waitForWakes([at4(oneDay * 3)])
        clock.jump(to: oneDay * 3)
        try await waitUntil("the cache expired") { source.replayCache.isEmpty }
        #expect(try await visit4(source) == 1, "a fresh session, no stale greeting")
        try await sessions.waitForStops(1)
        sessions.expectOrderly(active: true)
        // Its keep-alive (10 s, from day 3) is timed.
        try await clock.waitForWakes([at4(oneDay * 3 + .seconds(10))])
        clock.jump(to: oneDay * 3 + .seconds(10))
        try await sessions.waitForStops(2)
        sessions.expectOrderly(active: false)
    }

    @Test("share: a sleep failing while a subscriber is back (no window open) stops nothing; the next window is timed")
    func failureWhileNoWindowIsOpen() async throws {
        let clock = R4Clock { $0 == 0 ? .failWhenReleased : .normal }
        let log = R4Log()
        let shared = R4Base(log: log).share(keepAlive: .seconds(10), clock: clock)
        #expect(try await visit4(shared) == 0)
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
        try await clock.waitForWakes([at4(.seconds(10))])
        clock.jump(to: .seconds(9))
        await letOthersRun()
        #expect(log.end(of: 0) == nil)
        clock.jump(to: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
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
                let clock = R4Clock { $0 == failing ? .throwFailure : .normal }
                let log = R4Log()
                let replayed = R4Base(log: log).replay(1, keepAlive: keepAlive, replayExpiration: expiry, clock: clock)
                // Session 0: its windows, with the failure somewhere (or later).
                #expect(try await visit4(replayed) == 0)
                try await waitUntil("round \(round): cycle 0 done") {
                    if clock.sleeperCount == 1 { clock.jump(to: clock.sleeperWakes[0]) }
                    return replayed.replayCache.isEmpty && clock.sleeperCount == 0 && log.stops == 1
                }
                // Session 1, after the failure: each window timed exactly, in sleeps of a day.
                let begin = clock.peek.offset
                #expect(try await visit4(replayed) == 1, "round \(round)")
                let context = "round \(round), \(halfDays) half-days, sleep \(failing) failed"
                var time = begin
                let keepAliveEnd = begin + keepAlive
                while time < keepAliveEnd {
                    let next = min(keepAliveEnd, time + oneDay)
                    try await clock.waitForWakes([at4(next)])
                    if next == keepAliveEnd {
                        clock.jump(to: next - .nanoseconds(1))
                        await letOthersRun()
                        #expect(log.end(of: 1) == nil, "\(context): the keep-alive closed early")
                    }
                    clock.jump(to: next)
                    time = next
                }
                #expect(try await log.waitForEnd(of: 1) == .cancelled, "\(context)")
                let expiryEnd = keepAliveEnd + expiry
                while time < expiryEnd {
                    let next = min(expiryEnd, time + oneDay)
                    try await clock.waitForWakes([at4(next)])
                    if next == expiryEnd {
                        clock.jump(to: next - .nanoseconds(1))
                        await letOthersRun()
                        #expect(replayed.replayCache == [1], "\(context): the cache expired early")
                    }
                    clock.jump(to: next)
                    time = next
                }
                try await waitUntil("\(context): the cache to expire") { replayed.replayCache.isEmpty }
                #expect(log.overlaps == 0)
            }
        }
    }

    // MARK: 2. Trusted sleeps, chained windows opening at the clock's reading

    /// replay(1, keepAlive: 10 s, replayExpiration: 100 s): the keep-alive sleep returns at 10
    /// and the clock then reads `reading`: the expiry window must end at `reading + 100`.
    private func chainedWindowAfterAJump(to reading: Duration) async throws {
        let clock = R4Clock()
        let log = R4Log()
        let replayed = R4Base(log: log).replay(
            1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
        #expect(try await visit4(replayed) == 0)
        try await clock.waitForWakes([at4(.seconds(10))])
        clock.setBackOnNextWake(to: at4(reading))
        clock.jump(to: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "a returned sleep is trusted")
        try await waitUntil("the expiry timer asleep") { clock.sleeperCount == 1 }
        #expect(clock.sleeperWakes == [at4(reading + .seconds(100))], "clock read \(reading)")
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
            (oneDay * 2, oneDay * 3), (Duration.seconds(10), oneDay * 4), (oneDay * 5, .seconds(1)),
        ] {
            let clock = R4Clock { _ in .returnAtOnce }
            clock.setCreep(.milliseconds(1))
            clock.setOnEveryWake { $0.advanced(by: .zero - oneDay) }
            let log = R4Log()
            let replayed = R4Base(log: log).replay(1, keepAlive: keepAlive, replayExpiration: expiry, clock: clock)
            #expect(try await visit4(replayed) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            let bound = Int(keepAlive / oneDay) + Int(expiry / oneDay) + 4
            #expect(clock.sleepCalls <= bound, "\(keepAlive), \(expiry): \(clock.sleepCalls) sleeps, at most \(bound)")
            #expect(try await visit4(replayed) == 1, "a fresh iteration afterwards")
            try await waitUntil("it stops again") { log.stops == 2 }
        }
    }

    @Test("a creeping clock (1 ns per reading) whose sleeps return at once: a bounded number of sleeps per window")
    func creepingClockDoesNotPoll() async throws {
        for round in 0..<20 {
            let clock = R4Clock { _ in .returnAtOnce }
            clock.setCreep(.nanoseconds(1))
            let sessions = R4Sessions()
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(10 + round), replayExpiration: oneDay * 2, clock: clock)
            #expect(try await visit4(source) == 0)
            try await sessions.waitForStops(1)
            try await waitUntil("round \(round): the cache to expire") { source.replayCache.isEmpty }
            #expect(clock.sleepCalls <= 6, "round \(round): \(clock.sleepCalls) sleeps for 10 s + 2 days")
            sessions.expectOrderly(active: false)
        }
    }

    @Test("forward jumps past both windows as a sleep returns, 100 rounds with churn: no overlap, exact expiry")
    func forwardJumpsWithChurn() async throws {
        try await withTimeout(seconds: 150) {
            var generator = LCG(seed: 4_4)
            let clock = R4Clock()
            let log = R4Log()
            let replayed = R4Base(log: log).replay(
                1, keepAlive: .seconds(10), replayExpiration: .seconds(50), clock: clock)
            var cached = false
            for round in 0..<100 {
                // A cached value greets without starting the upstream: read one more to start it.
                let values = try await visit4(replayed, taking: cached ? 2 : 1)
                #expect(values.count == (cached ? 2 : 1), "round \(round)")
                let wake = clock.peek.advanced(by: .seconds(10))
                try await clock.waitForWakes([wake])
                let jump = Duration.seconds(Int.random(in: -200...200, using: &generator))
                clock.setBackOnNextWake(to: wake.advanced(by: jump))
                clock.jump(to: wake)
                try await waitUntil("round \(round): the upstream stopped") { log.stops == log.starts }
                let reading = clock.peek
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

    // MARK: 3. send(contentsOf:) after the subject completes

    @Test("send(contentsOf:) on a subject already completed: returns at once, never makes an iterator")
    func alreadyCompleted() async throws {
        let counter = R4IteratorCounter()
        let passthrough = AsyncPassthroughSubject<Int, Never>()
        passthrough.finish()
        await passthrough.send(contentsOf: counter.sequence)
        let current = AsyncCurrentValueSubject<Int, TestError>(0)
        current.fail(.boom)
        await current.send(contentsOf: counter.sequence)
        let replay = AsyncReplaySubject<Int, Never>(bufferSize: 2)
        replay.finish()
        await replay.send(contentsOf: counter.sequence)
        #expect(counter.iterators == 0 && counter.pulls == 0)
    }

    @Test("finish/fail while an element waits for room, 150 rounds, three subjects: .cancelled before the call returns")
    func completionWhileWaitingForRoom() async throws {
        // 150 rounds: the hang guard is a watchdog that each round feeds.
        try await withProgressWatchdog("150 rounds") { progress in
            var generator = LCG(seed: 4_04)
            var missing: [Int] = []
            for round in 0..<150 {
                progress.tick()
                let held = HeldStream(prefilled: 0..<20)
                let kind = round % 3
                let fails = Bool.random(using: &generator)
                let taken = Int.random(in: 0...5, using: &generator)
                let sending: Task<Void, Never>
                let reader: SubscriberTask<Int, TestError>
                let complete: @Sendable () -> Void
                switch kind {
                case 0:
                    let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                case 1:
                    let subject = AsyncReplaySubject<Int, TestError>(bufferSize: 1, buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                default:
                    let subject = AsyncCurrentValueSubject<Int, TestError>(-1, buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    _ = await reader.next()  // the current value
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                }
                let got = await reader.take(taken)
                #expect(got == Array(0..<taken), "round \(round)")
                // The reader stops reading: the next element waits for room.
                try await waitUntil("round \(round): a pull waiting or an element for room") {
                    held.countedPulls >= taken + 2
                }
                complete()
                try await withTimeout("round \(round): the call returning") { await sending.value }
                let ends = held.ends.all
                if ends != [.cancelled] { missing.append(round) }
                #expect(held.countedPulls <= taken + 4, "round \(round): \(held.countedPulls) pulls")
                withExtendedLifetime(held) {}
                await reader.leave()
            }
            #expect(
                missing.isEmpty, "rounds whose held stream did not see .cancelled before the call returned: \(missing)")
        }
    }

    @Test("the caller's cancellation alone while the sequence's next() waits: the stream is cancelled, asked once")
    func callerCancellationWhilePulling() async throws {
        for round in 0..<100 {
            let held = HeldStream(prefilled: 0..<round % 3)
            let subject = AsyncPassthroughSubject<Int, Never>()
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let sequence = held.counted
            let sending = Task { await subject.send(contentsOf: sequence) }
            #expect(await reader.take(round % 3) == Array(0..<round % 3))
            try await waitUntil("round \(round): waiting in next()") { held.countedPulls == round % 3 + 1 }
            sending.cancel()
            try await withTimeout("round \(round): the call returning") { await sending.value }
            #expect(held.ends.all == [.cancelled], "round \(round)")
            #expect(held.countedPulls == round % 3 + 1, "round \(round): asked again after a caller's cancellation")
            subject.send(99)
            #expect(await reader.next() == 99, "round \(round): the subject stays open")
            await reader.leave()
            withExtendedLifetime(held) {}
        }
    }

    @Test("a sequence that threw is not asked again when the subject completes right after")
    func thrownSequenceNotAskedAgain() async throws {
        for round in 0..<100 {
            let counter = Lock(0)
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            input.yield(1)
            input.yield(-1)
            let sending = Task { () -> TestError? in
                do throws(TestError) {
                    try await subject.send(contentsOf: R4ThrowsOnMinusOne(base: stream, counter: counter))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(await reader.next() == 1)
            let error = try await withTimeout("round \(round)") { await sending.value }
            subject.finish()
            #expect(error == .boom, "round \(round): the sequence's error is thrown to the caller")
            #expect(counter.withLock { $0 } == 2, "round \(round): pulled after it threw")
            await reader.leave()
        }
    }

    // MARK: 4. AsyncSharedSource: async stop, failed sources

    @Test(
        "a completion while a sequence that ignores cancellation waits in next(): the call returns when that next() does"
    )
    func completionDuringAPatientPull() async throws {
        var extraPulls: [Int] = []
        for round in 0..<30 {
            let patient = R4Patient()
            let subject = AsyncPassthroughSubject<Int, Never>()
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let sequence = patient.sequence
            let returned = LockedFlag()
            let sending = Task {
                await subject.send(contentsOf: sequence)
                returned.set()
            }
            try await waitUntil("round \(round): pull 1 waiting") { patient.waiting == 1 }
            patient.answer(0)
            #expect(await reader.next() == 0)
            try await waitUntil("round \(round): pull 2 waiting") { patient.waiting == 1 }
            subject.finish()
            await letOthersRun()
            #expect(!returned.isSet, "round \(round): returned before the patient next() did")
            patient.answer(1)  // that next() returns now: an element, ignored
            try await waitUntil("round \(round): the call returned, or a third pull") {
                returned.isSet || patient.waiting == 1
            }
            if !returned.isSet {
                extraPulls.append(round)
                patient.answer(nil)
            }
            try await withTimeout("round \(round): the call returning") { await sending.value }
            #expect(patient.pulls <= 3)
            let rest = await reader.drain()
            #expect(rest.elements.isEmpty, "round \(round): an element sent after completion")
            await reader.leave()
        }
        // Documented (AsyncSubject.send(contentsOf:), Subjects.md): a pull that returns an
        // element after the completion cannot be told from one that missed the cancellation,
        // so the call asks once more, in a cancelled task, and waits for that pull. Found
        // here: the doc sentence said the call returned "as soon as that next() does".
        #expect(extraPulls.count == 30, "every round asked a third time: \(extraPulls)")
    }

    @Test("replay: a replaced timer whose sleep ignores cancellation and then throws: the newer window is not closed")
    func replacedTimerFailingLate() async throws {
        for round in 0..<30 {
            let clock = R4Clock { $0 == 1 ? .failWhenReleasedIgnoringCancellation : .normal }
            let log = R4Log()
            let replayed = R4Base(log: log).replay(
                1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
            #expect(try await visit4(replayed) == 0)
            try await clock.waitForWakes([at4(.seconds(10))])
            clock.jump(to: .seconds(10))
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await waitUntil("round \(round): the expiry sleep held") { clock.pendingFailures == 1 }
            // Back within the expiry window: the cache, then a restarted iteration; leaving
            // opens a keep-alive 10…20, ending before the held sleep's 110: the task is replaced.
            #expect(try await visit4(replayed, taking: 2) == [0, 1], "round \(round)")
            try await clock.waitForWakes([at4(.seconds(20))])
            clock.releaseFailures()  // the replaced task's sleep throws now, its task cancelled
            await letOthersRun()
            #expect(log.end(of: 1) == nil, "round \(round): the replaced timer's failure closed the new window")
            #expect(replayed.replayCache == [1])
            clock.jump(to: .seconds(20))
            #expect(try await log.waitForEnd(of: 1) == .cancelled)
            try await clock.waitForWakes([at4(.seconds(120))])
            clock.jump(to: .seconds(120))
            try await waitUntil("round \(round): expired") { replayed.replayCache.isEmpty }
        }
    }

    @Test("AsyncSharedSource: a subscriber joins while stop is held and leaves before it returns, 100 rounds")
    func joinAndLeaveDuringAHeldStop() async throws {
        for round in 0..<100 {
            let sessions = R4Sessions()
            let source = sessions.makeSource(replay: round % 2)
            sessions.hold(true)
            #expect(try await visit4(source) == 0)
            try await waitUntil("round \(round): stop held") { sessions.heldCount == 1 }
            sessions.hold(false)
            let reader = await SubscriberTask.join { source.makeAsyncIterator() }
            reader.request()
            await letOthersRun(round % 5 * 10)
            await reader.cancel()  // its next() waits for the new session: cancelling its task leaves
            await letOthersRun(round % 7 * 10)
            #expect(sessions.starts == 1, "round \(round): started before the held stop returned")
            sessions.releaseStops()
            try await waitUntil("round \(round): every started session stopped") {
                sessions.stops.count == sessions.starts && !sessions.isActive
            }
            sessions.expectOrderly(active: false)
            // A later subscriber gets a fresh session.
            let value = try await visit4(source)
            #expect(value == sessions.starts - 1, "round \(round)")
            try await waitUntil("round \(round): stopped again") { sessions.stops.count == sessions.starts }
            sessions.expectOrderly(active: false)
        }
    }

    @Test("AsyncSharedSource: a subscriber arriving while stop is held waits; start comes only after stop returned")
    func startWaitsForAHeldStop() async throws {
        for round in 0..<50 {
            let sessions = R4Sessions()
            let source = sessions.makeSource(replay: round % 2)
            sessions.hold(true)
            #expect(try await visit4(source) == 0)
            try await waitUntil("round \(round): stop held") { sessions.heldCount == 1 }
            sessions.hold(false)
            let reader = await SubscriberTask.join { source.makeAsyncIterator() }
            reader.request()
            await letOthersRun()
            #expect(sessions.starts == 1, "round \(round): started before the previous stop returned")
            sessions.releaseStops()
            let first = await reader.response()
            // With replay 1 the cache of session 0 expired at once (replayExpiration zero).
            #expect(first == .success(1), "round \(round): \(String(describing: first))")
            #expect(sessions.overlaps == 0)
            await reader.leave()
            try await sessions.waitForStops(2)
            sessions.expectOrderly(active: false)
        }
    }

    @Test("AsyncSharedSource: a keep-alive window closing into a held stop; joiners wait, start follows the stop")
    func keepAliveIntoAHeldStop() async throws {
        let clock = R4Clock()
        let sessions = R4Sessions()
        let source = sessions.makeSource(
            replay: 1, keepAlive: .seconds(5), replayExpiration: .seconds(50), clock: clock)
        for round in 0..<30 {
            let offset = clock.peek
            #expect(try await visit4(source) != nil, "round \(round)")
            try await clock.waitForWakes([offset.advanced(by: .seconds(5))])
            sessions.hold(true)
            clock.jump(to: offset.advanced(by: .seconds(5)))
            try await waitUntil("round \(round): stop held") { sessions.heldCount == 1 }
            sessions.hold(false)
            // Joiners while stop is held: greeted with the cache, then they wait for the new session.
            let readers = [
                await SubscriberTask.join { source.makeAsyncIterator() },
                await SubscriberTask.join { source.makeAsyncIterator() },
            ]
            for reader in readers {
                #expect(await reader.next() == round, "round \(round): the replayed value")
                reader.request()
            }
            await letOthersRun()
            #expect(sessions.starts == round + 1, "round \(round): start before stop returned")
            sessions.releaseStops()
            for reader in readers {
                #expect(await reader.response() == .success(round + 1), "round \(round)")
                await reader.leave()
            }
            try await sessions.waitForStops(round + 1)
            #expect(sessions.overlaps == 0 && sessions.doubleStops == 0)
        }
    }

    @Test("AsyncSharedSource: rapid concurrent join/leave with a slow async stop, 200 rounds: never overlapping")
    func churnWithSlowStops() async throws {
        try await withTimeout(seconds: 150) {
            var generator = LCG(seed: 4_004)
            let clock = R4Clock()
            let sessions = R4Sessions()
            sessions.setYieldsInStop(50)
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(2), replayExpiration: .seconds(3), clock: clock)
            for round in 0..<200 {
                let visitors = Int.random(in: 1...4, using: &generator)
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors { group.addTask { try await visit4(source) } }
                    clock.advance(by: .seconds(Int.random(in: 0...4, using: &generator)))
                    for try await value in group { #expect(value != nil, "round \(round)") }
                }
                #expect(sessions.overlaps == 0 && sessions.doubleStops == 0, "round \(round)")
            }
            try await waitUntil("the last session stopped") {
                if sessions.stops.count != sessions.starts { clock.advance(by: .seconds(10)) }
                return sessions.stops.count == sessions.starts
            }
            #expect(sessions.starts >= 10)
            sessions.expectOrderly(active: false)
        }
    }

    @Test("AsyncSharedSource: a late emitter of a stopping session (send, fail) is ignored; the next session is fresh")
    func lateEmitterDuringStop() async throws {
        for round in 0..<50 {
            let sessions = R4Sessions()
            let source = sessions.makeSource()
            sessions.setDuringStop { emitter in
                emitter.send(-1)
                emitter.finish()
            }
            #expect(try await visit4(source) == 0)
            try await sessions.waitForStops(1)
            sessions.setDuringStop(nil)
            let reader = await SubscriberTask.join { source.makeAsyncIterator() }
            #expect(await reader.next() == 1, "round \(round): the source ended by a stopped session's emitter")
            // The old emitter, after another session started: ignored too.
            sessions.emitter(0).send(-2)
            sessions.emitter(0).finish()
            sessions.emitter(1).send(5)
            #expect(await reader.next() == 5, "round \(round)")
            await reader.leave()
            try await sessions.waitForStops(2)
            sessions.expectOrderly(active: false)
        }
    }

    @Test("AsyncSharedSource: failing inside start, or later: stop once, later subscribers get the error, no restart")
    func failedSource() async throws {
        for round in 0..<50 {
            let starts = Lock(0)
            let stops = Lock(0)
            let inside = round % 2 == 0
            let keepEmitter = Lock<AsyncSharedSource<Int, TestError>.Emitter?>(nil)
            let source = AsyncSharedSource<Int, TestError>(replay: round % 3, keepAlive: .seconds(round % 2 * 100)) {
                emitter in
                starts.withLock { $0 += 1 }
                emitter.send(1)
                if inside { emitter.fail(.other(round)) } else { keepEmitter.withLock { $0 = emitter } }
                return { stops.withLock { $0 += 1 } }
            }
            let first = await SubscriberTask.join { source.makeAsyncIterator() }
            #expect(await first.next() == 1, "round \(round)")
            if !inside {
                try await waitUntil("round \(round): the emitter") { keepEmitter.withLock { $0 } != nil }
                keepEmitter.withLock { $0 }!.fail(.other(round))
            }
            first.request()
            #expect(await first.response() == .failure(.other(round)), "round \(round)")
            try await waitUntil("round \(round): stop called") { stops.withLock { $0 } == 1 }
            for _ in 0..<3 {
                var late = source.makeAsyncIterator()
                var result: Result<Int?, TestError>
                repeat {
                    do throws(TestError) { result = .success(try await late.next()) } catch { result = .failure(error) }
                } while (try? result.get()) != nil
                #expect(result == .failure(.other(round)), "round \(round): a later subscriber")
            }
            await letOthersRun()
            #expect(starts.withLock { $0 } == 1, "round \(round): start called again")
            #expect(stops.withLock { $0 } == 1, "round \(round): stop count")
            await first.leave()
        }
    }
}
