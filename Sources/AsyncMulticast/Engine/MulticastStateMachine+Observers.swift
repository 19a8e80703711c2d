// Observers: who must hear a change of the subscriber count (`subscriberCounts`,
// `waitForSubscribers(atLeast:)`), and who must hear that a push-fed machine completed (each
// running `send(contentsOf:)`). The machine keeps them and decides, at the end of each
// critical section, what each hears (`takeNotices()`); the storage tells them outside the
// lock. The eviction watchers' notices (+Evicting) and the drain observers' (+Draining) travel
// the same way.

extension MulticastStateMachine {
    /// Told once, outside the lock, when a push-fed machine completes
    /// (`completionObserverAdded(_:)`); `token` finds it to remove it.
    @usableFromInline
    typealias CompletionObserver = (token: UInt64, onCompletion: @Sendable () -> Void)

    /// What observers outside the machine must be told after a critical section, all `nil`
    /// when nobody is (see `takeNotices()`).
    @usableFromInline
    struct Notices: Sendable {
        /// The subscriber count's change, to offer to its observers.
        @usableFromInline
        var change: SubscriberCountObservers.Change?
        /// The machine completed: the completion observers to tell.
        @usableFromInline
        var completionObservers: [CompletionObserver]?
        /// Eviction watchers resolved: resumed with whether their subscriber was evicted.
        @usableFromInline
        var evictionNotices: [EvictionNotice]?
        /// The machine has ended and no subscriber is left: the drain observers to tell
        /// (MulticastStateMachine+Draining.swift).
        @usableFromInline
        var drained: [DrainCell]?

        @inlinable
        init(
            change: SubscriberCountObservers.Change? = nil, completionObservers: [CompletionObserver]? = nil,
            evictionNotices: [EvictionNotice]? = nil,
            drained: [DrainCell]? = nil
        ) {
            self.change = change
            self.completionObservers = completionObservers
            self.evictionNotices = evictionNotices
            self.drained = drained
        }

        @inlinable
        var isEmpty: Bool {
            self.change == nil && self.completionObservers == nil && self.evictionNotices == nil && self.drained == nil
        }

        /// Adds `later`'s notices to these: its count change replaces theirs (observers hear
        /// the latest count), its lists follow theirs.
        @inlinable
        mutating func merge(_ later: Notices) {
            if let change = later.change { self.change = change }
            if let observers = later.completionObservers {
                self.completionObservers = (self.completionObservers ?? []) + observers
            }
            if let watchers = later.evictionNotices { self.evictionNotices = (self.evictionNotices ?? []) + watchers }
            if let cells = later.drained { self.drained = (self.drained ?? []) + cells }
        }
    }

    /// Nobody outside the machine waits on a critical section: no one observes the subscriber
    /// count or the completion, no eviction watcher is to be told. A critical section whose
    /// effects are empty then has nothing left to do (the storage skips its end).
    @inlinable
    var isQuiet: Bool {
        self.countObservers.isEmpty && self.completionObservers.isEmpty && self.evictionNotices.isEmpty
            && self.drainObservers.isEmpty
    }

    /// At the end of every critical section that did not skip it: the observers to tell, and
    /// what. The count's observers hear the count if it changed since they last heard it
    /// (numbered, so that a late, older offer is harmless); the completion observers hear the
    /// completion once the machine has ended (none can register after that); the eviction
    /// watchers hear whether their subscriber was evicted.
    @inlinable
    mutating func takeNotices() -> Notices {
        var notices = Notices()
        notices.change = self.countObservers.change(to: self.subscriberCount)
        if !self.completionObservers.isEmpty, self.terminal != nil {
            notices.completionObservers = self.completionObservers
            self.completionObservers = []
        }
        notices.evictionNotices = self.takeEvictionNotices()
        notices.drained = self.takeDrainNotices()
        self.followUp.remove(.tell)
        return notices
    }

    /// The end of every event after which observers may have something to hear (a join, a
    /// leave, a read that ended its subscriber, the end): what they must hear, taken now into
    /// `effects.notices` (`takeNotices()`), so that the storage learns it from the event
    /// itself. Nobody observing (`isQuiet`, the usual case): a test of three counts.
    @inlinable
    @inline(__always)
    mutating func noticing(_ effects: inout Effects) {
        guard !self.isQuiet else { return }
        let notices = self.takeNotices()
        guard !notices.isEmpty else { return }
        assert(effects.notices.isEmpty, "an event took the notices twice")
        effects.notices = notices
    }

    /// A name for a completion observer, a parked producer or an eviction watcher, for its
    /// task's cancellation to find it.
    @inlinable
    mutating func takeToken() -> UInt64 {
        defer { self.nextToken &+= 1 }
        return self.nextToken
    }

    /// An observer of the subscriber count registered: it hears the current count first (the
    /// returned change, offered to it alone outside the lock).
    @inlinable
    mutating func countObserverAdded(_ cell: SubscriberCountCell) -> SubscriberCountObservers.Change {
        self.countObservers.add(cell, count: self.subscriberCount)
    }

    /// An observer of the subscriber count went away.
    @inlinable
    mutating func countObserverRemoved(_ cell: SubscriberCountCell) {
        self.countObservers.remove(cell)
    }

    /// A `send(contentsOf:)` observes the completion: its token, or `nil` if the machine has
    /// completed already (tell it at once, outside the lock).
    @inlinable
    mutating func completionObserverAdded(_ onCompletion: @escaping @Sendable () -> Void) -> UInt64? {
        guard self.terminal == nil else { return nil }
        let token = self.takeToken()
        self.completionObservers.append((token, onCompletion))
        return token
    }

    /// The completion observer `token` went away (its `send(contentsOf:)` returned). Harmless
    /// if it was already told.
    @inlinable
    mutating func completionObserverRemoved(token: UInt64) {
        if let index = self.completionObservers.firstIndex(where: { $0.token == token }) {
            self.completionObservers.remove(at: index)
        }
    }
}
