/// One task waiting until a storage is drained (`MulticastStateMachine.isDrained`), or until
/// its deadline or its cancellation: whichever comes first decides, once (`resolve(_:)`).
///
/// The machine keeps the cell, not the task's continuation, so that the task can register
/// before it starts the timer of its deadline and before it suspends: the drain, the deadline
/// and the cancellation may then come in any order, and each finds the cell.
@usableFromInline
final class DrainCell: Sendable {
    @usableFromInline
    struct State: Sendable {
        /// What decided: `true` drained, `false` the deadline or the cancellation.
        @usableFromInline
        var result: Bool?
        /// The waiting task's continuation.
        @usableFromInline
        var waiting: UnsafeContinuation<Bool, Never>?

        @inlinable
        init() {}
    }

    @usableFromInline
    let state = Lock(State())

    @inlinable
    init() {}

    /// Decides, unless something decided already; resumes the waiting task outside the lock.
    @inlinable
    func resolve(_ drained: Bool) {
        let resuming = self.state.withLock { state -> UnsafeContinuation<Bool, Never>? in
            guard state.result == nil else { return nil }
            state.result = drained
            defer { state.waiting = nil }
            return state.waiting
        }
        resuming?.resume(returning: drained)
    }

    /// What decided, waiting for it; `false` at once if the task is cancelled.
    @inlinable
    func wait() async -> Bool {
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                let decided = self.state.withLock { state -> Bool? in
                    if let result = state.result { return result }
                    state.waiting = continuation
                    return nil
                }
                if let decided { continuation.resume(returning: decided) }
            }
        } onCancel: {
            self.resolve(false)
        }
    }
}

extension DrainCell.State: InvariantChecking {
    @usableFromInline
    func checkInvariants() {
        precondition(self.result == nil || self.waiting == nil, "a decided drain cell still holds its waiting task")
    }
}
