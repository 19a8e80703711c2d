// Joining and leaving, beside MulticastStateMachine+Subscribers.swift, and the commands that
// observe the subscriber count (its observers are `SubscriberCountObservers`, in the state).

extension MulticastStorage {
    /// Registers a subscriber. Its `connectRule` is the machine's to decide
    /// (`MulticastStateMachine.subscriberJoined(policy:connectRule:)`): `.onDemand` is kept
    /// with the subscriber, and `.atSubscriberCount(n)` connects the upstream if it is idle
    /// and at least `n` subscribers are now present.
    @inlinable
    func subscribe(policy: SharedBufferingPolicy? = nil, connectRule: ConnectRule = .never) -> SubscriberID {
        let (id, work) = self.state.withLock { state in
            let (id, effects) = state.machine.subscriberJoined(policy: policy, connectRule: connectRule)
            return (id, self.endCriticalSectionIfNeeded(effects, &state))
        }
        self.perform(work)
        return id
    }

    /// A subscriber leaves: its iteration ended, its last iterator went away, or its task
    /// was cancelled (the cancellation handler of `wait`). What is left to do after the
    /// lock is usually nothing, or the `QuickLeave` of `endLeave`, which allocates nothing.
    @inlinable
    func unsubscribe(_ id: SubscriberID) {
        var quick: QuickLeave? = nil
        // Read before the lock, and only where a leave may open a window: a clock is user code.
        let now = self.timesWindows ? self.clock.now() : .zero
        let work = self.state.withLock { state -> OutsideLock? in
            let effects = state.machine.subscriberLeft(id, at: now)
            // The usual leave, of a subscriber that was not waiting, and not the last one.
            if effects.isEmpty { return nil }
            return self.endLeave(effects, &state, quick: &quick)
        }
        if let quick { self.perform(quick) }
        self.perform(work)
    }

    /// What a leave usually leaves to do, carried out of its lock as two words instead of an
    /// `OutsideLock`: the subscriber it resumes with `nil` (one cancelled while it waited in
    /// `next()`) and the upstream task it retires (the last subscriber left), either or
    /// both `nil`.
    @usableFromInline
    typealias QuickLeave = (waiter: Machine.SubscriberContinuation?, upstreamTask: Task<Void, Never>?)

    /// The end of a leave's critical section, once `unsubscribe` found something to do. When
    /// `effects` ask for no more than a waiter resumed with `nil` and the upstream cancelled,
    /// (nothing started, nothing for the observers), it takes the upstream task, stores both in `quick` and
    /// returns `nil`; else it ends the critical section as every command does
    /// (`endCriticalSection`).
    ///
    /// The fast path of a cancelled subscriber: the `OutsideLock` it saves was allocated
    /// before that subscriber was resumed, so without it a cancelled `next()` returns about
    /// 7% sooner, and the upstream's iteration ends as much sooner (`compare --only cancel`).
    /// Never inlined, as `endCriticalSection` is not: inlined into the leave's closure, it
    /// cost every join and leave 12 instructions more (`compare --instructions`, 2190
    /// against 2178 per idle subscriber).
    @inlinable
    @inline(never)
    func endLeave(_ effects: Machine.Effects, _ state: inout State, quick: inout QuickLeave?) -> OutsideLock? {
        guard case .success(nil) = effects.subscriberResult, effects.moreSubscribers.isEmpty,
            effects.producers.isEmpty, effects.handedOver.isEmpty, effects.parkedElementsAppended == 0,
            effects.aside == nil, effects.timerTask == .none
        else { return self.endCriticalSection(effects, &state) }
        quick = (effects.firstSubscriber, Self.takeUpstreamTask(&state, for: effects))
        return nil
    }

    // MARK: Observing the subscriber count

    /// Registers an observer of the subscriber count; it is offered the current count first.
    /// With a `listener`, the observer is that function, told each count as it is offered
    /// (see `SubscriberCountCell.listener`).
    @inlinable
    func observeSubscriberCount(listener: (@Sendable (Int) -> Void)? = nil) -> SubscriberCountCell {
        let cell = SubscriberCountCell(listener: listener)
        let work = self.state.withLock { state in
            OutsideLock(notices: Machine.Notices(change: state.machine.countObserverAdded(cell)))
        }
        self.perform(work)
        return cell
    }

    @inlinable
    func stopObservingSubscriberCount(_ cell: SubscriberCountCell) {
        self.state.withLock { $0.machine.countObserverRemoved(cell) }
        cell.end()
    }

    /// Returns once at least `count` subscribers are registered; throws if the task is
    /// cancelled first.
    @inlinable
    func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        let cell = self.observeSubscriberCount()
        defer { self.stopObservingSubscriberCount(cell) }
        while let current = await cell.next(isolation: nil) {
            if current >= count { return }
        }
        throw CancellationError()
    }

    // MARK: Evictions and backlogs

    /// Returns subscriber `id`'s eviction once it is evicted, `nil` once it has left
    /// otherwise (or had left already), or at once, `nil`, if the waiting task is cancelled.
    @inlinable
    func waitForEviction(_ id: SubscriberID) async -> SubscriberEviction? {
        let token = self.state.withLock { $0.machine.takeToken() }
        // Resumed at the end of the critical section that evicted the subscriber (with the
        // eviction), or that it left otherwise in, or by this task's cancellation (`nil`);
        // at once, outside the lock, when that was decided before the task could wait.
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: Machine.EvictionContinuation) in
                // Read before the lock: if the cancellation handler already ran, it found
                // nothing to resume, so storing the watcher now would never be undone.
                let cancelled = Task.isCancelled
                let work = self.state.withLock { state -> OutsideLock? in
                    let found: SubscriberEviction?
                    if cancelled {
                        found = nil
                    } else {
                        switch state.machine.evictionWatchRequested(id, token: token, continuation: continuation) {
                        case .stored: return nil
                        case .evicted(let eviction): found = eviction
                        case .left: found = nil
                        }
                    }
                    return OutsideLock(notices: Machine.Notices(evictionNotices: [(continuation, found)]))
                }
                self.perform(work)
            }
        } onCancel: {
            let work = self.state.withLock { state in
                state.machine.evictionWatchCancelled(id, token: token).map {
                    OutsideLock(notices: Machine.Notices(evictionNotices: [($0, nil)]))
                }
            }
            self.perform(work)
        }
    }

    /// What subscriber `id` holds and the most it held; `nil` once it has left or was evicted.
    @inlinable
    func backlog(of id: SubscriberID) -> (count: Int, highWaterMark: Int)? {
        self.state.withLock { $0.machine.backlog(of: id) }
    }
}
