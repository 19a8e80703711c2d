// Draining, beside MulticastStateMachine+Draining.swift: waiting until the end has reached
// every subscriber, with a deadline on the storage's clock, and ending a source from outside.

extension MulticastStorage {
    /// Returns `true` once the machine has ended and no subscriber is left
    /// (`MulticastStateMachine.isDrained`), `false` when `timeout` passes first on the
    /// storage's clock or the calling task is cancelled (at once).
    ///
    /// The cell is registered before the deadline's timer starts and before this task
    /// suspends, so the drain, the deadline and the cancellation may come in any order. The
    /// timer is a child task, cancelled and awaited before this returns: nothing is left
    /// running.
    @inlinable
    func waitUntilDrained(within timeout: Duration) async -> Bool {
        let cell = DrainCell()
        // Read before the lock: a clock is user code.
        let deadline = self.clock.now().saturatingAdding(timeout)
        let work = self.state.withLock { state -> OutsideLock? in
            state.machine.drainObserverAdded(cell) ? OutsideLock(notices: Machine.Notices(drained: [cell])) : nil
        }
        self.perform(work)
        let clock = self.clock
        let drained = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancelled once the wait is over; a sleep that fails (a clock's error) ends
                // the wait as the deadline would.
                try? await clock.sleepUntil(deadline)
                cell.resolve(false)
            }
            let drained = await cell.wait()
            group.cancelAll()
            return drained
        }
        if !drained { self.state.withLock { $0.machine.drainObserverRemoved(cell) } }
        return drained
    }

    /// The owner of a source ended it: its session, if one runs, is cancelled (its `stop`
    /// runs in the session's task), and the subscribers get what is buffered, then the end.
    @inlinable
    func finishByOwner() {
        self.transition { $0.ownerFinished() }
    }
}
