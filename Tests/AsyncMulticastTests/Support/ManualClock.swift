// A clock whose time moves only when the test says so: the keep-alive and replay-expiry
// windows are timed on it (the `clock:` parameters), so that no test waits for real time.
//
// - `sleep(until:)` suspends until `advance(by:)` or `advance(to:)` moves the time to the
//   deadline or past it, or until the sleeping task is cancelled (`CancellationError`).
// - `waitForSleepers(count:)` returns once `count` tasks are asleep on the clock: "the
//   timer is now sleeping", so that the test advances the time after, never before.
//
// It can also misbehave as a user's clock may, for the tests of what the library does then:
// - `jump(to:)` sets the time to any instant, earlier ones too (a wall clock set back);
// - `failNextSleeps(_:)` and `failEverySleep()` make `sleep(until:)` throw `SleepFailure` at
//   once, without the task being cancelled; `returnEverySleepAtOnce()` makes it return at
//   once without the time moving; `failedSleeps` counts the sleeps that did either.

import Testing

@testable import AsyncMulticast

final class ManualClock: Clock, Sendable {
    typealias Duration = Swift.Duration

    /// What a sleep made to fail throws.
    struct SleepFailure: Error, Equatable {}

    /// The time elapsed since the clock was created.
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: self.offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - self.offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper: TestClockSleeper {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Waiter: Sendable {
        let id: UInt64
        let count: Int
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State: Sendable {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Waiters of `waitForSleepers(count:)`.
        var waiters: [Waiter] = []
        /// Sleeps and waits cancelled before their continuation was registered.
        var cancelled: Set<UInt64> = []
        /// How many of the next sleeps fail (`Int.max`: all of them), and how.
        var sleepsToFail = 0
        var failuresThrow = true
        /// How many sleeps failed.
        var failedSleeps = 0

        mutating func makeID() -> UInt64 {
            self.nextID += 1
            return self.nextID
        }

        /// Removes the waiters whose count of sleepers is reached, to be resumed outside the lock.
        mutating func takeSatisfiedWaiters() -> [CheckedContinuation<Bool, Never>] {
            let count = self.sleepers.count
            let satisfied = self.waiters.filter { $0.count <= count }.map(\.continuation)
            self.waiters.removeAll { $0.count <= count }
            return satisfied
        }
    }

    private let state = Lock(State())

    var now: Instant { self.state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// The number of tasks asleep on the clock.
    var sleeperCount: Int { self.state.withLock { $0.sleepers.count } }

    /// The deadlines the sleeping tasks wait for, earliest first.
    var sleeperDeadlines: [Instant] { self.state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    /// How many sleeps failed: threw `SleepFailure`, or returned at once (see
    /// `failNextSleeps(_:)`, `returnEverySleepAtOnce()`).
    var failedSleeps: Int { self.state.withLock { $0.failedSleeps } }

    /// The next `count` calls of `sleep(until:)` throw `SleepFailure` at once, whatever
    /// their deadline, as a clock that fails may.
    func failNextSleeps(_ count: Int = 1) {
        precondition(count >= 0, "a count of sleeps, got \(count)")
        self.state.withLock { state in
            state.sleepsToFail = count
            state.failuresThrow = true
        }
    }

    /// Every later call of `sleep(until:)` throws `SleepFailure` at once.
    func failEverySleep() {
        self.failNextSleeps(.max)
    }

    /// Every later call of `sleep(until:)` returns at once, without an error and without
    /// the time moving, whatever its deadline: a clock that cannot sleep, and does not say so.
    func returnEverySleepAtOnce() {
        self.state.withLock { state in
            state.sleepsToFail = .max
            state.failuresThrow = false
        }
    }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = try self.state.withLock { state -> UInt64? in
            if state.sleepsToFail > 0 {
                if state.sleepsToFail != .max { state.sleepsToFail -= 1 }
                state.failedSleeps += 1
                if state.failuresThrow { throw SleepFailure() }
                return nil
            }
            return state.makeID()
        }
        guard let id else { return }
        defer { self.state.withLock { _ = $0.cancelled.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (outcome, satisfied) = self.state.withLock {
                    state -> (Result<Void, any Error>?, [CheckedContinuation<Bool, Never>]) in
                    if state.cancelled.contains(id) { return (.failure(CancellationError()), []) }
                    if deadline <= state.now { return (.success(()), []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (nil, state.takeSatisfiedWaiters())
                }
                if let outcome { continuation.resume(with: outcome) }
                for waiter in satisfied { waiter.resume(returning: true) }
            }
        } onCancel: {
            let sleeper = self.state.withLock { state in
                cancelSleep(id, sleepers: &state.sleepers, cancelled: &state.cancelled)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the time forward by `duration` and wakes the tasks whose deadline it reached,
    /// earliest deadline first.
    func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock does not go back, got \(duration)")
        self.advance { $0.advanced(by: duration) }
    }

    /// Moves the time forward to `instant` and wakes the tasks whose deadline it reached,
    /// earliest deadline first.
    func advance(to instant: Instant) {
        self.advance { now in
            precondition(instant >= now, "a clock does not go back: \(instant) is before \(now)")
            return instant
        }
    }

    /// Sets the time to `instant`, earlier than now too (a clock that is not monotonic, as a
    /// wall clock set back), and wakes the tasks whose deadline it reached, earliest first.
    func jump(to instant: Instant) {
        self.advance { _ in instant }
    }

    private func advance(_ move: (Instant) -> Instant) {
        let woken = self.state.withLock { state -> [Sleeper] in
            state.now = move(state.now)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are asleep on the clock (at once if they are).
    /// Records an issue and returns `false` if that does not happen within a hang guard.
    @discardableResult
    func waitForSleepers(
        count: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Bool {
        let reached = await withTimeoutOrNil("\(count) sleepers on the manual clock", sourceLocation: sourceLocation) {
            await self.sleepersReached(count)
        }
        return reached ?? false
    }

    /// `true` once `count` tasks are asleep; `false` if cancelled first.
    private func sleepersReached(_ count: Int) async -> Bool {
        let id = self.state.withLock { $0.makeID() }
        defer { self.state.withLock { _ = $0.cancelled.remove(id) } }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let outcome = self.state.withLock { state -> Bool? in
                    if state.cancelled.contains(id) { return false }
                    if state.sleepers.count >= count { return true }
                    state.waiters.append(Waiter(id: id, count: count, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: false)
        }
    }
}

/// A sleep of a test clock (`ManualClock`, `ScriptedClock`): its id and its continuation.
protocol TestClockSleeper: Sendable {
    var id: UInt64 { get }
    var continuation: CheckedContinuation<Void, any Error> { get }
}

/// The cancellation of sleep `id` under the clock's lock: the sleeper, removed from
/// `sleepers` for the caller to resume outside the lock; or `nil` when it has not registered
/// yet, and then `id` goes into `cancelled` so that it never will.
func cancelSleep<Sleeper: TestClockSleeper>(
    _ id: UInt64, sleepers: inout [Sleeper], cancelled: inout Set<UInt64>
) -> Sleeper? {
    guard let index = sleepers.firstIndex(where: { $0.id == id }) else {
        cancelled.insert(id)  // not registered yet: it will not be
        return nil
    }
    return sleepers.remove(at: index)
}
