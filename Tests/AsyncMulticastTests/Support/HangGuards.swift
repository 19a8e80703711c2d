// Hang guards: deadlines that turn a hang into a failed test. No test relies on a deadline
// for ordering; every wait is for a condition, and a deadline only decides that the test
// failed. Every guard records an issue when it fires.
//
// - `withTimeout` and `waitUntil` throw when they fire, and so stop the test: test bodies use
//   them.
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
            // Hang guard: only decides that the test failed, never the order of events.
            try? await Task.sleep(for: .seconds(seconds))
            if Task.isCancelled { return }
            if finish(nil) { tasks.withLock { $0.worker }?.cancel() }
        }
        tasks.withLock { $0 = (worker, timer) }
    }
}

/// Waits until `condition` holds, polling with `Task.yield()` (and, after the first thousand
/// polls, a short pause so that a long wait does not keep a core busy under a sanitizer).
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
        if polls < 1_000 {
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
