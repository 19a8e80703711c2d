// A clock that misbehaves on demand, an upstream that records its iterations, and a visit
// that joins, reads and leaves: shared by the suites that time windows on a scripted clock
// (the timer, sharedService, soft limits, the schedule explorer).

import Dispatch
import Testing

@testable import AsyncMulticast

/// `a + b`, or the limit it went past.
func scriptedSaturating(_ a: Duration, _ b: Duration) -> Duration {
    let (sum, overflow) = a.attoseconds.addingReportingOverflow(b.attoseconds)
    guard overflow else { return Duration(attoseconds: sum) }
    return Duration(attoseconds: b > .zero ? .max : .min)
}

/// A clock that moves only when the test says so; each `sleep(until:)` behaves as `plan` says
/// for its index (0, 1, …). Its `now` can also move on every read (`tickPerRead`, `setCreep`),
/// it can wake its sleepers on a Dispatch thread instead of the thread that moved the time, hold
/// the wakes of the sleepers the time reached, and set itself back at the moment a sleep
/// returns (`setBackOnNextWake(to:)`): the timer then reads a clock earlier than the instant
/// its sleep returned at. Its arithmetic saturates at `Duration`'s limits instead of trapping:
/// near them, a trap is the library's, not the clock's.
final class ScriptedClock: Clock, Sendable {
    typealias Duration = Swift.Duration

    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: scriptedSaturating(self.offset, duration)) }
        func duration(to other: Instant) -> Duration {
            let (difference, overflow) = other.offset.attoseconds.subtractingReportingOverflow(self.offset.attoseconds)
            guard overflow else { return Duration(attoseconds: difference) }
            return Duration(attoseconds: other.offset > self.offset ? .max : .min)
        }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    /// What a failing sleep throws.
    struct Failure: Error {}

    /// How one call of `sleep(until:)` behaves.
    enum Sleep: Sendable {
        /// Returns once the time reaches the deadline; throws `CancellationError` if cancelled.
        case normal
        /// Throws `Failure` at once, its task not being cancelled.
        case throwFailure
        /// Throws `CancellationError` at once, although its task is not cancelled.
        case throwCancellation
        /// Returns at once, whatever the deadline.
        case returnAtOnce
        /// Never returns, whatever the time; throws `CancellationError` if cancelled.
        case never
        /// Never returns, even when cancelled (until `releaseStuckSleeps()`).
        case neverEvenIfCancelled
        /// Returns once the time reaches `by` before the deadline.
        case early(by: Duration)
        /// Returns once the time reaches `by` after the deadline.
        case late(by: Duration)
        /// Waits until `releaseFailures()`, then throws `Failure` (its task not cancelled);
        /// throws `CancellationError` if cancelled first.
        case failWhenReleased
        /// Waits until `releaseFailures()`, cancelled or not, then throws `Failure`.
        case failWhenReleasedIgnoringCancellation
    }

    private struct Sleeper: TestClockSleeper {
        let id: UInt64
        /// `nil`: no time wakes it.
        let wake: Instant?
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State: Sendable {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepCalls = 0
        var sleepers: [Sleeper] = []
        var cancelled: Set<UInt64> = []
        var setBackOnWake: Instant?
        /// Applied to the clock's reading each time a sleep returns (not when it throws).
        var onEveryWake: (@Sendable (Instant) -> Instant)?
        /// Added to the time at each reading of `now` (a creeping clock).
        var creep: Duration = .zero
        var failures: [CheckedContinuation<Void, any Error>] = []
        var failureIDs: [UInt64] = []
        /// The longest sleep asked for: from the clock's reading to the deadline.
        var longestSleep: Duration = .zero
        /// Each sleep: the clock's reading and the deadline, in seconds.
        var sleepLog: [String] = []
        /// While set, the sleepers the time reaches are kept here instead of being woken.
        var holdsWakes = false
        var held: [Sleeper] = []

        /// Removes the sleepers whose wake-up time has come, earliest first.
        mutating func takeDue() -> [Sleeper] {
            let now = self.now
            let due = self.sleepers.filter { sleeper in sleeper.wake.map { $0 <= now } ?? false }
            self.sleepers.removeAll { sleeper in sleeper.wake.map { $0 <= now } ?? false }
            return due.sorted { $0.wake! < $1.wake! }
        }
    }

    private let state = Lock(State())
    private let plan: @Sendable (Int) -> Sleep
    private let wakesOnOtherThread: Bool

    /// `plan` receives the index of each `sleep(until:)` call (0, 1, …); `tickPerRead` is the
    /// creep, the time added at each reading of `now`.
    init(
        tickPerRead: Duration = .zero, wakesOnOtherThread: Bool = false,
        plan: @escaping @Sendable (Int) -> Sleep = { _ in .normal }
    ) {
        self.plan = plan
        self.wakesOnOtherThread = wakesOnOtherThread
        self.state.withLock { $0.creep = tickPerRead }
    }

    /// The time, moved by the creep first; a creep that reaches sleepers wakes them.
    var now: Instant {
        let (now, due) = self.state.withLock { state -> (Instant, [Sleeper]) in
            guard state.creep != .zero else { return (state.now, []) }
            state.now = state.now.advanced(by: state.creep)
            return (state.now, state.takeDue())
        }
        self.wake(due)
        return now
    }
    /// The time, without creeping.
    var reading: Instant { self.state.withLock { $0.now } }
    var pendingFailures: Int { self.state.withLock { $0.failures.count } }

    func setCreep(_ creep: Duration) { self.state.withLock { $0.creep = creep } }
    func setOnEveryWake(_ body: (@Sendable (Instant) -> Instant)?) { self.state.withLock { $0.onEveryWake = body } }

    /// Makes every sleep waiting as `.failWhenReleased` throw `Failure`.
    func releaseFailures() {
        let waiting = self.state.withLock { state in
            defer {
                state.failures = []
                state.failureIDs = []
            }
            return state.failures
        }
        for continuation in waiting { continuation.resume(throwing: Failure()) }
    }

    private func failLater() async throws {
        let id = self.state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = self.state.withLock { state -> Bool in
                    if state.cancelled.contains(id) { return true }
                    state.failures.append(continuation)
                    state.failureIDs.append(id)
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = self.state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.failureIDs.firstIndex(of: id) else {
                    state.cancelled.insert(id)
                    return nil
                }
                state.failureIDs.remove(at: index)
                return state.failures.remove(at: index)
            }
            continuation?.resume(throwing: CancellationError())
        }
    }
    var minimumResolution: Duration { .zero }

    /// How many times `sleep(until:)` was called.
    var sleepCalls: Int { self.state.withLock { $0.sleepCalls } }
    /// How many tasks are asleep on the clock.
    var sleeperCount: Int { self.state.withLock { $0.sleepers.count } }
    /// When the sleeping tasks wake, earliest first (`nil`: never).
    var sleeperWakes: [Instant?] {
        self.state.withLock { state in
            state.sleepers.map(\.wake).sorted {
                ($0?.offset ?? .seconds(Int64.max)) < ($1?.offset ?? .seconds(Int64.max))
            }
        }
    }
    var longestSleep: Duration { self.state.withLock { $0.longestSleep } }
    var sleepLog: [String] { self.state.withLock { $0.sleepLog } }

    /// The next sleep that returns (not one that throws) sets the clock to `instant` first.
    func setBackOnNextWake(to instant: Instant) {
        self.state.withLock { $0.setBackOnWake = instant }
    }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let index = self.state.withLock { state in
            state.longestSleep = max(state.longestSleep, state.now.duration(to: deadline))
            state.sleepLog.append("#\(state.sleepCalls) at \(state.now.offset) until \(deadline.offset)")
            defer { state.sleepCalls += 1 }
            return state.sleepCalls
        }
        switch self.plan(index) {
        case .normal: try await self.suspend(until: deadline)
        case .throwFailure: throw Failure()
        case .throwCancellation: throw CancellationError()
        case .returnAtOnce: break
        case .never: try await self.suspend(until: nil)
        case .neverEvenIfCancelled: try await self.suspend(until: nil, ignoringCancellation: true)
        case .early(let early): try await self.suspend(until: deadline.advanced(by: .zero - early))
        case .late(let late): try await self.suspend(until: deadline.advanced(by: late))
        case .failWhenReleased: try await self.failLater()
        case .failWhenReleasedIgnoringCancellation:
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                self.state.withLock { state in
                    state.nextID += 1
                    state.failures.append(continuation)
                    state.failureIDs.append(state.nextID)
                }
            }
        }
        self.state.withLock { state in
            if let back = state.setBackOnWake {
                state.now = back
                state.setBackOnWake = nil
            }
            if let body = state.onEveryWake { state.now = body(state.now) }
        }
    }

    private func suspend(until wake: Instant?, ignoringCancellation: Bool = false) async throws {
        let id = self.state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        defer { self.state.withLock { _ = $0.cancelled.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = self.state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.contains(id) { return .failure(CancellationError()) }
                    if let wake, wake <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, wake: wake, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            guard !ignoringCancellation else { return }
            let sleeper = self.state.withLock { state in
                cancelSleep(id, sleepers: &state.sleepers, cancelled: &state.cancelled)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    private func wake(_ sleepers: [Sleeper]) {
        guard !sleepers.isEmpty else { return }
        let held = self.state.withLock { state in
            if state.holdsWakes { state.held += sleepers }
            return state.holdsWakes
        }
        guard !held else { return }
        if self.wakesOnOtherThread {
            DispatchQueue.global().async {
                for sleeper in sleepers { sleeper.continuation.resume() }
            }
        } else {
            for sleeper in sleepers { sleeper.continuation.resume() }
        }
    }

    /// Sets the time (earlier or later) and wakes the sleepers it reached.
    func jump(to instant: Instant) {
        let due = self.state.withLock { state in
            state.now = instant
            return state.takeDue()
        }
        self.wake(due)
    }

    func jump(to offset: Duration) { self.jump(to: Instant(offset: offset)) }

    /// Moves the time by `duration` (back if negative; it saturates) and wakes the sleepers it
    /// reached.
    func advance(by duration: Duration) {
        let due = self.state.withLock { state in
            state.now = state.now.advanced(by: duration)
            return state.takeDue()
        }
        self.wake(due)
    }

    /// Sets the time to `ahead`, takes the sleepers it reached, sets it back to `back`, then
    /// wakes them: they find the clock set back when they read it.
    func jumpAndReturn(ahead: Duration, back: Duration) {
        let due = self.state.withLock { state in
            state.now = Instant(offset: ahead)
            defer { state.now = Instant(offset: back) }
            return state.takeDue()
        }
        self.wake(due)
    }

    /// From now on, the sleepers the time reaches are not woken until `releaseHeldWakes()`:
    /// their sleep has not returned although the clock reads their deadline.
    func holdWakes() { self.state.withLock { $0.holdsWakes = true } }

    /// Wakes the sleepers held since `holdWakes()`, and stops holding.
    func releaseHeldWakes() {
        let held = self.state.withLock { state in
            state.holdsWakes = false
            defer { state.held = [] }
            return state.held
        }
        self.wake(held)
    }

    /// Wakes the sleeps that never return, with an error (clean-up at a test's end).
    func releaseStuckSleeps() {
        let stuck = self.state.withLock { state in
            defer { state.sleepers.removeAll { $0.wake == nil } }
            return state.sleepers.filter { $0.wake == nil }
        }
        for sleeper in stuck { sleeper.continuation.resume(throwing: Failure()) }
    }

    /// Waits until exactly `count` tasks are asleep on the clock.
    func waitForSleepers(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("\(count) sleepers on the clock", sourceLocation: sourceLocation) {
            self.sleeperCount == count
        }
    }

    /// Waits until the sleeping tasks wake exactly at `wakes`: after a timer was replaced, the
    /// replaced one's sleep may not have been cancelled yet.
    func waitForWakes(_ wakes: [Instant], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("sleepers waking at \(wakes)", seconds: 30, sourceLocation: sourceLocation) {
            self.sleeperWakes == wakes.map { Optional($0) }
        }
    }
}

func scriptedInstant(_ offset: Duration) -> ScriptedClock.Instant { ScriptedClock.Instant(offset: offset) }

// MARK: - Recorded upstreams

/// The iterations of an `ScriptedBase`: each `makeAsyncIterator()` starts one (0, 1, …), backed by an
/// `AsyncStream` that first yields its own index. Records how each ended (`onTermination`) and
/// iterations created while an earlier one's iterator still existed.
final class ScriptedLog: Sendable {
    private struct State: Sendable {
        var continuations: [AsyncStream<Int>.Continuation] = []
        var ends: [Int: StreamEnd] = [:]
        var endReports = 0
        var live = 0
        var overlaps = 0
    }
    private let state = Lock(State())

    var starts: Int { self.state.withLock { $0.continuations.count } }
    var stops: Int { self.state.withLock { $0.ends.count } }
    /// `onTermination` calls: more than `stops` would be an iteration ended twice.
    var endReports: Int { self.state.withLock { $0.endReports } }
    var overlaps: Int { self.state.withLock { $0.overlaps } }
    func end(of index: Int) -> StreamEnd? { self.state.withLock { $0.ends[index] } }

    fileprivate func begin() -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let index = self.state.withLock { state in
            if state.live > 0 { state.overlaps += 1 }
            state.live += 1
            state.continuations.append(continuation)
            return state.continuations.count - 1
        }
        continuation.onTermination = { termination in
            self.state.withLock {
                $0.ends[index] = StreamEnd(termination)
                $0.endReports += 1
            }
        }
        continuation.yield(index)
        return stream
    }

    fileprivate func released() { self.state.withLock { $0.live -= 1 } }

    /// Yields `value` on the latest iteration's stream.
    func send(_ value: Int) { self.state.withLock { $0.continuations.last }?.yield(value) }

    /// Finishes the latest iteration's stream.
    func finishLatest() { self.state.withLock { $0.continuations.last }?.finish() }

    /// Jumps `clock` to `before`, where iteration `index` must still run, then to `deadline`,
    /// where its window closes: the iteration ends, cancelled.
    func expectEnds(
        _ index: Int, cancelled deadline: ScriptedClock.Instant, notBefore before: ScriptedClock.Instant,
        on clock: ScriptedClock, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        clock.jump(to: before)
        await letOthersRun()
        #expect(self.end(of: index) == nil, "still running before its deadline", sourceLocation: sourceLocation)
        clock.jump(to: deadline)
        #expect(
            try await self.waitForEnd(of: index, sourceLocation: sourceLocation) == .cancelled,
            sourceLocation: sourceLocation)
    }

    func waitForEnd(of index: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws -> StreamEnd? {
        try await waitUntil("the end of iteration \(index)", seconds: 30, sourceLocation: sourceLocation) {
            self.end(of: index) != nil
        }
        return self.end(of: index)
    }
}

/// A base that records its iterations in a `ScriptedLog`, and holds a `Sentinel` that sets
/// `gone` when the shared storage (which holds the base) is released.
struct ScriptedBase: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let log: ScriptedLog
    let sentinel: Sentinel

    init(log: ScriptedLog, gone: GoneFlag = GoneFlag()) {
        self.log = log
        self.sentinel = Sentinel(gone)
    }

    final class Token: Sendable {
        let log: ScriptedLog
        init(_ log: ScriptedLog) { self.log = log }
        deinit { self.log.released() }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Int>.Iterator
        let token: Token
        mutating func next() async -> Int? { await self.base.next() }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.log.begin().makeAsyncIterator(), token: Token(self.log))
    }
}

/// Joins, reads one element, leaves (the iterator is released), under a hang guard.
func visitScripted<S: AsyncSequence & Sendable>(
    _ sequence: S, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Int? where S.AsyncIterator == SharedIterator<Int, Never> {
    try await withTimeout("a visit", seconds: 120, sourceLocation: sourceLocation) {
        var iterator = sequence.makeAsyncIterator()
        return await iterator.next()
    }
}

/// Joins, reads `count` elements, leaves, under a hang guard.
func visitScripted<S: AsyncSequence & Sendable>(
    _ sequence: S, taking count: Int, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Int] where S.AsyncIterator == SharedIterator<Int, Never> {
    try await withTimeout("a visit", seconds: 120, sourceLocation: sourceLocation) {
        var iterator = sequence.makeAsyncIterator()
        return await iterator.take(count)
    }
}
