// The model test's hosted `run()` (`AsyncSharedService`): where it is (not started, running
// with an iteration it has not picked up, waiting on a real continuation, ended), and what each
// of its steps must do, as plainly as MulticastStorage+Hosting.swift uses the machine:
//
// - run() claims the machine once; a second run() while it runs is refused, and one after it
//   returned finds the machine ended;
// - run() asks for the next iteration: a cancelled run(), or a terminated machine, gets `nil`;
//   an iteration started since it last asked is handed over at once; otherwise it waits until
//   the machine starts one (its continuation is resumed with the epoch) or its task is
//   cancelled (resumed with `nil`);
// - run() cancelled while an iteration runs, or returning: the machine ends as finished.

@testable import AsyncMulticast

/// What a hosted `run()` does in one step of the model.
enum ModelHostStep: CustomStringConvertible, Sendable {
    /// `run()` starts (`hostStarted`).
    case starts
    /// `run()` asks for its next iteration (`hostWaiting`), its task not cancelled or cancelled.
    case asks, asksCancelled
    /// `run()`'s task is cancelled while it waits (`hostWaitCancelled`).
    case waitCancelled
    /// `run()`'s task is cancelled while an iteration runs (`hostStopped`).
    case cancelled
    /// `run()` returns (`hostEnded`).
    case ends

    var description: String {
        switch self {
        case .starts: return "starts"
        case .asks: return "asks for an iteration"
        case .asksCancelled: return "asks for an iteration, cancelled"
        case .waitCancelled: return "cancelled while it waits"
        case .cancelled: return "cancelled while an iteration runs"
        case .ends: return "returns"
        }
    }
}

/// Where the model's hosted `run()` is.
enum ModelHost {
    case notHosted
    case notStarted(pending: UInt64?)
    case running(pending: UInt64?)
    case waiting(Suspended<UInt64?>)
    case ended

    /// The same place as the machine's `Host`: a waiting `run()` is its continuation.
    var inMachineWords: Machine.Host {
        switch self {
        case .notHosted: .notHosted
        case .notStarted(let pending): .notStarted(pending: pending)
        case .running(let pending): .running(pending: pending)
        case .waiting(let run): .waiting(run.continuation)
        case .ended: .ended
        }
    }
}

extension ModelRun {
    /// The machine started iteration `epoch` of a hosted machine, and handed it to `run()`
    /// in the same event (`UpstreamStart.hostWakeUp`: `woken`, if it waits). A woken `run()`
    /// creates the iteration's task (`hostCreatesTask`).
    mutating func handToHost(
        _ epoch: UInt64, wakeUp woken: UnsafeContinuation<UInt64?, Never>?
    ) async throws(ModelFailure) {
        guard self.config.hosted else { return }
        switch self.host {
        case .waiting(let run):
            guard let woken else { throw self.fail("a waiting run() was not woken for iteration \(epoch)") }
            if self.pool != nil {
                try self.check(woken.identity == run.identity, "another run() than the waiting one was woken")
            } else {
                woken.resume(returning: epoch)
                let received = await run.value()
                try self.check(
                    received == .some(epoch), "the woken run() received \(received as Any), expected \(epoch)")
            }
            self.host = .running(pending: nil)
            self.hostIteration = epoch
            try self.hostCreatesTask(for: epoch)
        case .notStarted:
            try self.check(woken == nil, "a run() not started was woken")
            self.host = .notStarted(pending: epoch)
        case .running:
            try self.check(woken == nil, "a running run() was woken")
            self.host = .running(pending: epoch)
        case .ended, .notHosted:
            try self.check(woken == nil, "an ended run() was woken")
        }
    }

    mutating func apply(host step: ModelHostStep) async throws(ModelFailure) {
        switch step {
        case .starts:
            let start = self.machine.hostStarted()
            switch self.host {
            case .notStarted(let pending):
                try self.check(start == .claimed, "run() started: \(start), expected to claim")
                self.host = .running(pending: pending)
            case .ended:
                try self.check(start == .alreadyEnded, "run() after the end: \(start)")
            case .running, .waiting:
                try self.check(start == .alreadyRunning, "a second run(): \(start)")
            case .notHosted:
                return
            }

        case .asks, .asksCancelled:
            guard case .running(let pending) = self.host, !self.hostRunsAnIteration else { return }
            // The explorer's runs are copied: their run() is a token of the pool, never resumed.
            let run: Suspended<UInt64?>
            if let pool = self.pool { run = pool.host } else { run = await .make() }
            let cancelled = step == .asksCancelled
            let wait = self.machine.hostWaiting(run.continuation, cancelled: cancelled)
            let expected: Machine.HostWait
            if cancelled || self.terminal != nil {
                expected = .resume(nil)
            } else if let pending {
                expected = .resume(pending)
                self.host = .running(pending: nil)
                self.hostIteration = pending
                try self.hostCreatesTask(for: pending)
            } else {
                expected = .stored
                self.host = .waiting(run)
            }
            try self.check(wait == expected, "run() asked: \(wait), expected \(expected)")
            if case .resume(let answer) = wait, self.pool == nil { run.continuation.resume(returning: answer) }

        case .waitCancelled:
            let handedBack = self.machine.hostWaitCancelled()
            guard case .waiting(let run) = self.host else {
                try self.check(handedBack == nil, "a run() that was not waiting was handed back")
                return
            }
            guard let handedBack else { throw self.fail("the waiting run() was not handed back") }
            if self.pool != nil {
                try self.check(
                    handedBack.identity == run.identity, "another run() than the waiting one was handed back")
            } else {
                handedBack.resume(returning: nil)
                let received = await run.value()
                try self.check(received == .some(nil), "the cancelled run() received \(received as Any)")
            }
            self.host = .running(pending: nil)

        case .cancelled, .ends:
            guard case .running = self.host else { return }
            // Only from inside the loop (awaiting an iteration), or once it left it.
            guard self.hostRunsAnIteration == (step == .cancelled) else { return }
            let effects = step == .ends ? self.machine.hostEnded() : self.machine.hostStopped()
            try await self.expectHostStopped(effects)
            if step == .ends { self.host = .ended }
        }
    }

    /// `hostStopped()`'s effects: unless already terminated, the machine ends as finished,
    /// the running iteration cancelled (`expectEnd`).
    mutating func expectHostStopped(_ effects: Machine.Effects) async throws(ModelFailure) {
        guard self.terminal == nil else {
            try self.check(effects.isEmpty, "run() stopping after the end had effects")
            return
        }
        try await self.expectEnd(effects, .finished, cancelling: self.currentEpoch)
    }

    /// `run()` awaits the task of the iteration it picked up last: it asks for the next one
    /// only once that one is no longer current (it stopped or ended, and its task with it).
    var hostRunsAnIteration: Bool {
        guard let epoch = self.hostIteration, let current = self.currentEpoch else { return false }
        return epoch == current && self.terminal == nil
    }

    /// The machine's `run()` is where the model's is.
    func compareHost() throws(ModelFailure) {
        let same: Bool
        switch (self.machine.host, self.host) {
        case (.notHosted, .notHosted), (.ended, .ended), (.waiting, .waiting): same = true
        case (.notStarted(let a), .notStarted(let b)), (.running(let a), .running(let b)): same = a == b
        default: same = false
        }
        try self.check(same, "run() is \(self.machine.host), expected \(self.host)")
    }
}
