// Hosting, for `AsyncSharedService`: the upstream runs inside the caller's `run()` instead of
// a detached task of its own. The machine decides when an upstream iteration starts and stops
// exactly as for `share()`, and keeps where `run()` is (MulticastStateMachine+Hosting.swift);
// what differs is who creates the task. The end of the critical section that started an
// iteration hands its epoch to `run()` (`upstreamHandedToHost`), which creates the task in its
// own context (so the upstream sees `run()`'s task-local values and priority), registers it
// under the lock as `startUpstream` would, and awaits it. One iteration at a time, so two
// never overlap.
//
//     run()  ──claims──▶ waits (Host.waiting) ──epoch──▶ creates, registers, awaits the task
//        ▲                                                                  │
//        └─────────────────── the iteration ended or was cancelled ◀───────┘
//     cancelled, or the machine terminated ──▶ hostEnded(): subscribers drain, then end

extension MulticastStorage {
    /// A hosted storage's waiting `run()`, to resume outside the lock with the iteration it
    /// must run, or `nil`: it must stop.
    @usableFromInline
    typealias HostWakeUp = (continuation: UnsafeContinuation<UInt64?, Never>, epoch: UInt64?)

    /// `AsyncSharedService.run()`: runs the upstream iterations the machine starts, one at a
    /// time, in tasks created here, until this task is cancelled or the upstream ends; then
    /// ends the subscribers (`hostStopped`) and returns once no task of this storage runs.
    /// Throws the upstream's error if it failed.
    @inlinable
    func host(connectingAtOnce: Bool) async throws(Failure) {
        let (start, work) = self.state.withLock { state in
            let (start, effects) = state.machine.hostStarted(connectingAtOnce: connectingAtOnce)
            return (start, self.endCriticalSectionIfNeeded(effects, &state))
        }
        self.perform(work)
        guard start != .alreadyRunning else {
            preconditionFailure("run(): this shared service is already running in another task")
        }
        if start == .claimed {
            while let epoch = await self.nextHostedEpoch(), !Task.isCancelled {
                guard let task = self.startHostedUpstream(epoch: epoch) else { continue }
                await withTaskCancellationHandler {
                    await task.value
                } onCancel: {
                    self.hostCancelled()
                }
            }
            await self.stopHosting()
        }
        if case .failed(let error)? = self.state.withLock({ $0.machine.terminal }) { throw error }
    }

    /// The next upstream iteration to run: one the machine started and `run()` did not pick
    /// up yet, or the next one it starts; `nil` once the machine has terminated or this task
    /// is cancelled.
    @inlinable
    func nextHostedEpoch() async -> UInt64? {
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<UInt64?, Never>) in
                // Read before the lock; under it, the machine stores nothing once cancelled, so
                // a cancellation handler that already ran (and found nothing) is not outlived.
                let cancelled = Task.isCancelled
                let work = self.state.withLock { state -> OutsideLock? in
                    guard case .resume(let answer) = state.machine.hostWaiting(continuation, cancelled: cancelled)
                    else { return nil }
                    return OutsideLock(hostWakeUp: (continuation, answer))
                }
                self.perform(work)
            }
        } onCancel: {
            let work = self.state.withLock { state in
                state.machine.hostWaitCancelled().map { OutsideLock(hostWakeUp: ($0, nil)) }
            }
            self.perform(work)
        }
    }

    /// Creates and registers the task of upstream iteration `epoch`, in the calling task's
    /// context (`run()`'s), unless the machine cancelled it meanwhile. As `startUpstream`
    /// does, under the lock, so that whoever cancels the epoch finds the task. It runs at
    /// `run()`'s priority, or at the highest among the subscribers already waiting if that is
    /// higher: the machine's `hostedUpstreamStarting(epoch:runPriority:)` decides both.
    @inlinable
    func startHostedUpstream(epoch: UInt64) -> Task<Void, Never>? {
        guard let body = self.upstreamBody else { return nil }
        let runPriority = Task.currentPriority.rawValue
        return self.state.withLock { state -> Task<Void, Never>? in
            guard let priority = state.machine.hostedUpstreamStarting(epoch: epoch, runPriority: runPriority)
            else { return nil }
            let sink = UpstreamSink(storage: self, epoch: epoch)
            // Not detached: it inherits run()'s task-local values.
            let task = Task(priority: TaskPriority(rawValue: priority)) {
                await Self.runUpstream(body, into: sink)  // run() cancelled as it made it: nothing
            }
            state.upstreamTask = (epoch, task)
            return task
        }
    }

    /// `run()`'s task was cancelled while an upstream iteration ran: the machine ends
    /// (`hostStopped`), which cancels the iteration; `run()` then sees it end.
    @inlinable
    func hostCancelled() {
        self.transition { $0.hostStopped() }
    }

    /// `run()` is over: the machine ends (`hostEnded`, if it has not), and this returns
    /// once every timer task has returned (the upstream task already has), the ones the
    /// machine replaced or cancelled before included (`DeadlineTimer.tasksRunning`). Their
    /// sleeps were cancelled: a clock's sleep must then throw, as the `clock:` parameter says.
    @inlinable
    func stopHosting() async {
        let work = self.state.withLock { state in self.endCriticalSection(state.machine.hostEnded(), &state) }
        self.perform(work)
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            let work = self.state.withLock { state in
                state.machine.hostWaitingForTimers(continuation) ? nil : OutsideLock(timersEnded: continuation)
            }
            self.perform(work)
        }
    }
}
