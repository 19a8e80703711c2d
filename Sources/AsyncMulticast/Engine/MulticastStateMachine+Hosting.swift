// Hosting, for `AsyncSharedService`: the upstream runs inside the caller's `run()` instead of a
// detached task of its own. The machine decides when an upstream iteration starts and stops
// exactly as for `share()`; it also keeps where `run()` is (not started, running, waiting for
// an iteration, ended) and the iteration it started that `run()` has not picked up yet. The
// storage creates the tasks and resumes `run()` (MulticastStorage+Hosting.swift).
//
//     notStarted ──hostStarted──▶ running ──hostWaiting──▶ waiting
//         │                        ▲  │                      │
//         │                        │  └──── an iteration ◀───┘ upstreamHandedToHost (wakes it),
//         │                        │                           or hostWaitCancelled
//         └── hostEnded ──▶ ended ◀┘ hostEnded

extension MulticastStateMachine {
    /// Where a hosted machine's `run()` is.
    @usableFromInline
    enum Host: Sendable {
        /// Not a hosted machine: the storage runs each iteration in a task of its own.
        case notHosted
        /// No `run()` yet: the iteration the machine started last, if any, waits in `pending`.
        case notStarted(pending: UInt64?)
        /// `run()` is running an upstream iteration, or deciding what to do next; `pending`:
        /// an iteration the machine started since, which it has not picked up yet.
        case running(pending: UInt64?)
        /// `run()` waits for the machine to start an upstream iteration.
        case waiting(UnsafeContinuation<UInt64?, Never>)
        /// `run()` returned: the machine has terminated.
        case ended
    }

    /// What `hostStarted()` found.
    @usableFromInline
    enum HostStart: Sendable, Equatable {
        /// This `run()` hosts the upstream from now on.
        case claimed
        /// An earlier `run()` already returned: the machine has terminated; nothing to host.
        case alreadyEnded
        /// Another `run()` is running: a programming error.
        case alreadyRunning
    }

    /// What `hostWaiting(_:cancelled:)` decided.
    @usableFromInline
    enum HostWait: Sendable, Equatable {
        /// Resume `run()` at once with this iteration, or with `nil`: it must stop (its task
        /// was cancelled, or the machine terminated).
        case resume(UInt64?)
        /// Kept: `upstreamHandedToHost(epoch:)` or `hostWaitCancelled()` hands it back.
        case stored
    }

    /// A hosted `run()` started.
    @inlinable
    mutating func hostStarted() -> HostStart {
        switch self.host {
        case .notStarted(let pending):
            self.host = .running(pending: pending)
            return .claimed
        case .ended:
            return .alreadyEnded
        case .running, .waiting:
            return .alreadyRunning
        case .notHosted:
            preconditionFailure("run() on a machine that is not hosted")
        }
    }

    /// A hosted `run()` started; `connectingAtOnce` (`started: .atOnce`): once it claimed the
    /// machine it connects the upstream (`connectRequested`), in the same event, so that the
    /// iteration is pending for it when it first asks. Returns what it found, and the effects
    /// of connecting.
    @inlinable
    mutating func hostStarted(connectingAtOnce: Bool) -> (start: HostStart, effects: Effects) {
        let start = self.hostStarted()
        guard start == .claimed, connectingAtOnce else { return (start, Effects()) }
        return (start, self.connectRequested().effects)
    }

    /// `run()` asks for the next iteration to run, suspended with `continuation`; `cancelled`:
    /// its task is cancelled (read before the lock, so that a cancellation handler that ran
    /// already, and found nothing to resume, is not outlived by a stored continuation).
    @inlinable
    mutating func hostWaiting(_ continuation: UnsafeContinuation<UInt64?, Never>, cancelled: Bool) -> HostWait {
        guard case .running(let pending) = self.host else {
            preconditionFailure("run() waits for an iteration while it is \(self.host)")
        }
        if cancelled || self.terminal != nil { return .resume(nil) }
        if let pending {
            self.host = .running(pending: nil)
            return .resume(pending)
        }
        self.host = .waiting(continuation)
        return .stored
    }

    /// `run()`'s task was cancelled while it waited for an iteration: its continuation, to
    /// resume with `nil` outside the lock (`nil`: it was not waiting).
    @inlinable
    mutating func hostWaitCancelled() -> UnsafeContinuation<UInt64?, Never>? {
        guard case .waiting(let continuation) = self.host else { return nil }
        self.host = .running(pending: nil)
        return continuation
    }

    /// The machine started iteration `epoch` of a hosted machine, in the event under way
    /// (`upstreamStarted(epoch:into:)`): `run()` runs it. Returns the waiting `run()` to resume with `epoch`
    /// outside the lock; otherwise `run()` picks it up when it next asks (`hostWaiting`).
    @inlinable
    mutating func upstreamHandedToHost(epoch: UInt64) -> UnsafeContinuation<UInt64?, Never>? {
        switch self.host {
        case .waiting(let continuation):
            self.host = .running(pending: nil)
            return continuation
        case .notStarted:
            self.host = .notStarted(pending: epoch)
        case .running:
            self.host = .running(pending: epoch)
        case .ended:
            break  // terminated: nothing starts again
        case .notHosted:
            preconditionFailure("an iteration handed to a run() of a machine that is not hosted")
        }
        return nil
    }

    /// `run()` is over (it was cancelled, or the upstream ended): the machine ends as
    /// `hostStopped()` says (if it has not), and nothing is hosted any more.
    @inlinable
    mutating func hostEnded() -> Effects {
        let effects = self.hostStopped()
        self.host = .ended
        return effects
    }

}
