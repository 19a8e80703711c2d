import Synchronization

/// A clock that moves only when a test advances it: the hub times its soft limit on it, so
/// a test decides exactly how long a client has been behind.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        /// The time since the clock was created.
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: self.offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - self.offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: (deadline: Instant, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextSleeper = 0
    }

    private let state = Mutex(State())

    var now: Instant { self.state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// Moves the clock forward by `duration`, and wakes the sleepers whose deadline came.
    func advance(by duration: Duration) {
        let woken = self.state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once the clock reaches `deadline`; throws `CancellationError` if the task is
    /// cancelled first.
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = self.state.withLock { state in
            defer { state.nextSleeper += 1 }
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = self.state.withLock { state in
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= state.now { return .some(nil) }
                    state.sleepers[id] = (deadline, continuation)
                    return .none
                }
                switch resumeNow {
                case .some(.some(let error)): continuation.resume(throwing: error)
                case .some(.none): continuation.resume()
                case .none: break
                }
            }
        } onCancel: {
            let continuation = self.state.withLock { $0.sleepers.removeValue(forKey: id)?.continuation }
            continuation?.resume(throwing: CancellationError())
        }
    }
}
