// Draining: who waits until the end has reached every subscriber (`waitUntilDrained(within:)`,
// a subject's or a source's `finish(drainingWithin:)`), and the owner of an
// `AsyncSharedSource` ending it. The machine is drained once it has ended (finished or failed)
// and no subscriber is left: each one read what was buffered for it and then the end, or
// left otherwise (cancelled, released). Reaching the end is leaving, so the subscriber count
// says it, and the observers hear it at the end of the critical section that made it so
// (`takeNotices()`), as the count's observers do.

extension MulticastStateMachine {
    /// Whether the machine has ended and no subscriber is left: the end has reached every
    /// subscriber, and one that joins from now on reads what it is replayed and the end, and
    /// leaves.
    @inlinable
    var isDrained: Bool { self.terminal != nil && self.subscriberCount == 0 }

    /// A drain observer registered. `true`: the machine is drained already, and `cell` is
    /// not kept (tell it at once, outside the lock); otherwise it hears it at the end of the
    /// critical section that drains the machine, unless it is removed first.
    @inlinable
    mutating func drainObserverAdded(_ cell: DrainCell) -> Bool {
        if self.isDrained { return true }
        self.drainObservers.append(cell)
        return false
    }

    /// A drain observer stopped waiting (its deadline passed, its task was cancelled, or it
    /// was told). Harmless if it is not kept any more.
    @inlinable
    mutating func drainObserverRemoved(_ cell: DrainCell) {
        if let index = self.drainObservers.firstIndex(where: { $0 === cell }) {
            self.drainObservers.remove(at: index)
        }
    }

    /// At the end of a critical section (`takeNotices()`): the drain observers to tell, once
    /// the machine is drained; `nil` otherwise (the usual case: a test of an empty array).
    @inlinable
    mutating func takeDrainNotices() -> [DrainCell]? {
        guard !self.drainObservers.isEmpty, self.isDrained else { return nil }
        defer { self.drainObservers = [] }
        return self.drainObservers
    }

    /// The owner of an `AsyncSharedSource` ended it (`finish(drainingWithin:)`): the running
    /// session, if any, is cancelled (its `stop` is called in its task), and the machine ends
    /// as if the producer had finished. The subscribers receive what is buffered for them,
    /// then `nil`; later ones get the replayed values, if any, then `nil`, at once (a replay
    /// whose expiry window was open expires now). Ignored once ended. The same end as a
    /// hosted `run()` that stops (`hostStopped()`).
    @inlinable
    mutating func ownerFinished() -> Effects {
        self.hostStopped()
    }
}
