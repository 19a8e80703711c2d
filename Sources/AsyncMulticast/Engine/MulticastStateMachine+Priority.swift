// The upstream task's priority. A subscriber waiting in `next()` does not await the upstream
// task, so the runtime cannot know that it waits on it: the machine raises the task for it.
//
// RULE. The upstream task runs at least at the priority of every subscriber waiting for it:
//   - a subscriber that starts waiting raises the running task to its own priority if that
//     is higher (`waitingSubscriberRaisesUpstream`);
//   - an upstream task that starts (a detached task at `.medium`, a hosted `run()`'s at
//     `run()`'s priority), or restarts, is raised at once to the highest priority among the
//     subscribers already waiting (`upstreamTaskStarted`), whoever started it: a multicast's
//     `connect()` from a background task, a `run()` begun after the subscribers, or the
//     restart after a slow iteration stopped.
//
// The machine decides; the storage holds the task and raises it outside the lock.
// Invariant (+Invariants): no waiter's priority is above `upstreamPriority` (which is
// `UInt8.max`, raising nothing, while the storage holds no upstream task).

extension MulticastStateMachine {
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

    /// The storage no longer holds an upstream task (it ended, or was cancelled and is
    /// retiring): a waiting subscriber has nothing to raise until the next one starts.
    @inlinable
    mutating func upstreamTaskReleased() {
        self.upstreamPriority = .max
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
