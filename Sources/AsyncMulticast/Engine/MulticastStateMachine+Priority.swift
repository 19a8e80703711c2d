// The upstream task's priority. A subscriber waiting in `next()` does not await the upstream
// task, so the runtime cannot know that it waits on it: the machine raises the task for it.
//
// RULE. The upstream task runs at least at the priority of every subscriber waiting for it:
//   - a subscriber that starts waiting raises the running task to its own priority if that
//     is higher (`waitingSubscriberRaisesUpstream`);
//   - an upstream task that starts (a detached task at `.medium`, a hosted `run()`'s at
//     `run()`'s priority), or restarts, is created at the highest priority among the
//     subscribers already waiting if that is higher (`upstreamTaskStarted`), whoever started
//     it: a multicast's `connect()` from a background task, a `run()` begun after the
//     subscribers, or the restart after a slow iteration stopped; its first step runs at it;
//   - a cancelled task still stopping keeps its priority in the machine: the next iteration
//     waits behind it (a detached one awaits it; a hosted `run()` finishes it first), so a
//     subscriber waiting for that one raises it (`upstreamTaskWaitedBehind`, and the waiter's
//     own raise, which the storage applies to the stopping task when none runs).
//
// The machine decides, in the event that starts the iteration (`upstreamStarted(epoch:into:)`,
// its answer in `Effects.upstreamStart`); the storage holds the task, creates it as told in the
// same critical section, and raises it outside the lock.
// Invariant (+Invariants): no waiter's priority is above `upstreamPriority` (which is
// `UInt8.max`, raising nothing, while the storage holds no upstream task).

extension MulticastStateMachine {
    /// The priority (`TaskPriority.rawValue`) a detached upstream task starts at, whoever
    /// asked for it: a detached task's.
    @inlinable
    static var detachedUpstreamPriority: UInt8 { TaskPriority.medium.rawValue }

    /// The machine started upstream iteration `epoch` in this event: how the storage starts
    /// its task, in `effects.upstreamStart`, decided now. A detached task is created at
    /// `detachedUpstreamPriority`, raised to the highest waiting subscriber's
    /// (`upstreamTaskStarted`). A hosted machine's iteration is handed to `run()`
    /// (`upstreamHandedToHost`: resumed if it waits), and the task still stopping that it
    /// waits behind is raised (`upstreamTaskWaitedBehind`).
    @inlinable
    mutating func upstreamStarted(epoch: UInt64, into effects: inout Effects) {
        var start = UpstreamStart(epoch: epoch)
        if case .notHosted = self.host {
            let priority = Self.detachedUpstreamPriority
            start.priority = self.upstreamTaskStarted(priority: priority) ?? priority
        } else {
            start.hostWakeUp = self.upstreamHandedToHost(epoch: epoch)
            start.raiseStopping = self.upstreamTaskWaitedBehind()
        }
        effects.upstreamStart = start
    }

    /// A hosted `run()` is about to create the task of iteration `epoch`, at its own
    /// priority `runPriority` (read before the lock): `nil` if the iteration was cancelled
    /// meanwhile (create nothing), else the priority to create it at, the highest waiting
    /// subscriber's if that is higher (`upstreamTaskStarted`).
    @inlinable
    mutating func hostedUpstreamStarting(epoch: UInt64, runPriority: UInt8) -> UInt8? {
        guard self.isCurrent(epoch: epoch) else { return nil }
        return self.upstreamTaskStarted(priority: runPriority) ?? runPriority
    }

    /// The storage registered a new upstream task that starts at `priority`
    /// (`TaskPriority.rawValue`). Returns the priority to raise it to at once, outside the
    /// lock: the highest among the subscribers waiting now, if higher than `priority`.
    ///
    /// O(waiting subscribers), once per upstream iteration.
    @inlinable
    mutating func upstreamTaskStarted(priority: UInt8) -> UInt8? {
        var highest = priority
        for waiter in self.waiters where waiter.priority > highest { highest = waiter.priority }
        self.upstreamPriority = highest
        return highest > priority ? highest : nil
    }

    /// The upstream task ended: a waiting subscriber has nothing to raise until the next one
    /// starts. (A cancelled task is not released: until it ends, the next iteration waits
    /// behind it, and a subscriber waiting for that one raises it.)
    @inlinable
    mutating func upstreamTaskReleased() {
        self.upstreamPriority = .max
    }

    /// A hosted storage's next iteration waits behind the one still stopping, whose task the
    /// storage holds: the priority to raise that task to, the highest among the subscribers
    /// waiting, if above what it runs at.
    @inlinable
    mutating func upstreamTaskWaitedBehind() -> UInt8? {
        var highest = self.upstreamPriority
        for waiter in self.waiters where waiter.priority > highest { highest = waiter.priority }
        guard highest > self.upstreamPriority else { return nil }
        self.upstreamPriority = highest
        return highest
    }

    /// A subscriber of `priority` started waiting: the priority to raise the upstream task
    /// to, if it runs at a lower one. At most once per upstream task and priority level (the
    /// machine remembers how far it raised it); a subject, or no task: one comparison.
    @inlinable
    @inline(__always)
    mutating func waitingSubscriberRaisesUpstream(to priority: UInt8) -> UInt8? {
        guard priority > self.upstreamPriority else { return nil }
        self.upstreamPriority = priority
        return priority
    }
}
