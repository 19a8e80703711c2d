// Hang guards: deadlines that turn a hang into a failed test. No test relies on a deadline
// for ordering; every wait is for a condition, and a deadline only decides that the test
// failed. Every guard records an issue when it fires.
//
// - `withTimeout` and `waitUntil` throw when they fire, and so stop the test: test bodies use
//   them.
// - `withProgressWatchdog` throws too, but fires only when its body stopped reporting
//   progress: for work whose length grows with scheduler round trips, which a loaded machine
//   (a sanitizer, two cores, the whole suite) can stretch far beyond a fixed deadline
//   although nothing hangs.
// - `withTimeoutOrNil` returns `nil` when it fires, so that the drivers built on it (`Signal`,
//   `SubscriberTask`) can be called like the plain operations they stand for.

import Testing

@testable import AsyncMulticast

struct TimeoutError: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out: \(self.what)" }
}

/// Runs `body`, failing the test (and throwing) if it has not finished after `seconds`; the
/// body's task is then cancelled.
func withTimeout<T: Sendable>(
    _ what: String = "test body",
    seconds: Double = 60,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let result = await race(seconds: seconds, body) else {
        Issue.record("Timed out: \(what) did not finish within \(seconds) s", sourceLocation: sourceLocation)
        throw TimeoutError(what: "\(what) after \(seconds) s")
    }
    return try result.get()
}

/// Runs `body`; if it has not finished after `seconds`, records an issue, cancels the body's
/// task and returns `nil` instead of throwing.
func withTimeoutOrNil<T: Sendable>(
    _ what: String,
    seconds: Double = 30,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () async -> T
) async -> T? {
    switch await race(seconds: seconds, body) {
    case .success(let value)?:
        return value
    case .failure?:
        preconditionFailure("a non-throwing body threw")
    case nil:
        Issue.record("hang guard: \(what) did not finish within \(seconds) s", sourceLocation: sourceLocation)
        return nil
    }
}

/// Runs `body` in a task of its own against a timer of `seconds`: the body's result, or `nil`
/// if the timer fired first (the body's task is then cancelled).
private func race<T: Sendable>(
    seconds: Double,
    _ body: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
    // Hang guard: only decides that the test failed, never the order of events.
    await race(until: { try? await Task.sleep(for: .seconds(seconds)) }, body)
}

/// Runs `body` in a task of its own against `guardFires`, run in another task: the body's
/// result, or `nil` if `guardFires` returned first (the body's task is then cancelled).
/// `guardFires` is cancelled once the body has finished; returning then fires nothing.
private func race<T: Sendable>(
    until guardFires: @escaping @Sendable () async -> Void,
    _ body: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
    let once = Lock<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)
    let finish: @Sendable (Result<T, any Error>?) -> Bool = { outcome in
        guard
            let continuation = once.withLock({ state -> CheckedContinuation<Result<T, any Error>?, Never>? in
                defer { state = nil }
                return state
            })
        else { return false }
        continuation.resume(returning: outcome)
        return true
    }
    let tasks = Lock<(worker: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
    return await withCheckedContinuation { continuation in
        once.withLock { $0 = continuation }
        let worker = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            if finish(result) { tasks.withLock { $0.timer }?.cancel() }
        }
        let timer = Task {
            await guardFires()
            if Task.isCancelled { return }
            if finish(nil) { tasks.withLock { $0.worker }?.cancel() }
        }
        tasks.withLock { $0 = (worker, timer) }
    }
}

/// What the body of ``withProgressWatchdog(_:stalledFor:clock:sourceLocation:_:)`` reports
/// its progress through: `tick()` wherever the guarded work moves (an element received, a
/// round done), from any task. One lock acquisition per tick.
final class WatchdogProgress: Sendable {
    private let ticks = Lock<UInt64>(0)

    func tick() { self.ticks.withLock { $0 &+= 1 } }

    /// How many ticks so far.
    var count: UInt64 { self.ticks.withLock { $0 } }
}

/// Runs `body` under a no-progress watchdog: fails the test (records an issue, cancels the
/// body's task and throws) only when `body` reported no progress (see ``WatchdogProgress``)
/// for `seconds`. A run that is slow but moving never fails; one that hangs fails about
/// `seconds` after its last tick. For work whose length grows with scheduler round trips,
/// where `withTimeout`'s fixed deadline could fail a loaded machine although nothing hangs.
///
/// The watchdog looks every tenth of `seconds` on `clock` (a test of the watchdog itself
/// passes a `ManualClock`). A look that comes late counts as at most two looks of stall: when
/// the whole process was not running (a loaded machine), the body had no chance to tick
/// either, and that time is not held against it.
func withProgressWatchdog<T: Sendable, C: Clock<Duration>>(
    _ what: String,
    stalledFor seconds: Double = 30,
    clock: C = ContinuousClock(),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable (WatchdogProgress) async throws -> T
) async throws -> T {
    let progress = WatchdogProgress()
    let look = Duration.seconds(seconds) / 10
    let limit = look * 10
    let stalled: @Sendable () async -> Void = {
        var seen = progress.count
        var stall = Duration.zero
        var lastLook = clock.now
        while stall < limit {
            // Hang guard: only decides that the test failed, never the order of events.
            do { try await clock.sleep(until: lastLook.advanced(by: look), tolerance: nil) } catch { return }
            let now = clock.now
            let count = progress.count
            if count != seen {
                seen = count
                stall = .zero
            } else {
                stall += min(lastLook.duration(to: now), look * 2)
            }
            lastLook = now
        }
    }
    guard let result = await race(until: stalled, { try await body(progress) }) else {
        Issue.record(
            "Stalled: \(what) reported no progress for \(seconds) s (ticks so far: \(progress.count))",
            sourceLocation: sourceLocation)
        throw TimeoutError(what: "\(what): no progress for \(seconds) s")
    }
    return try result.get()
}

/// Waits until `condition` holds, polling with `Task.yield()` (and, after the first hundred
/// polls, a pause of a millisecond: a waiting test then leaves the run queue instead of
/// lengthening every other test's round trip, hundreds of tests running at once).
/// Fails the test and throws if the condition does not hold within `seconds`. It runs on the
/// caller's actor (the main actor, for a `@MainActor` test), and so does `condition`.
func waitUntil(
    _ what: @autoclosure () -> String = "condition",
    seconds: Double = 50,
    sourceLocation: SourceLocation = #_sourceLocation,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var polls = 0
    while !condition() {
        if ContinuousClock.now > deadline {
            let description = what()
            Issue.record("Timed out waiting for \(description)", sourceLocation: sourceLocation)
            throw TimeoutError(what: description)
        }
        polls += 1
        if polls < 100 {
            await Task.yield()
        } else {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// Gives other tasks a chance to run (`count` yields). Used only before asserting that
/// something did *not* happen, where a test *hopes* to make a bug visible; never to
/// establish an order the test relies on.
func letOthersRun(_ count: Int = 200) async {
    for _ in 0..<count { await Task.yield() }
}
