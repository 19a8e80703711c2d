// Resuming, beside MulticastStateMachine+Resuming.swift: the join after a position, in one
// critical section with the reading of the history.

extension MulticastStorage {
    /// Registers a subscriber that resumes after `position` (`nil`: a plain join that learns
    /// its first position). Returns it, the position of the first element it receives, and
    /// the gap it must report before anything else (empty if none): all decided by the
    /// machine in the same critical section as the join
    /// (`MulticastStateMachine.subscriberResumed(after:policy:connectRule:)`).
    @inlinable
    func subscribe(
        after position: Int?, policy: SharedBufferingPolicy?, connectRule: ConnectRule
    ) -> (id: SubscriberID, first: Int, gap: Range<Int>) {
        let (resumption, work) = self.state.withLock { state in
            let resumption = state.machine.subscriberResumed(after: position, policy: policy, connectRule: connectRule)
            return (resumption, self.endCriticalSectionIfNeeded(resumption.effects, &state))
        }
        self.perform(work)
        return (resumption.id, resumption.first, resumption.gap)
    }
}
