// What a transition leaves to do once the lock is released: the machine's half of the one
// shape of after-lock work (the storage's `OutsideLock` carries it, beside the task handles).

extension MulticastStateMachine {
    /// What the caller of a transition must do, outside the lock.
    @usableFromInline
    struct Effects: Sendable {
        /// The first subscriber to resume with `subscriberResult`, kept inline: most
        /// transitions that resume subscribers resume one (a cancelled or caught-up waiter),
        /// and an array of one cost an allocation before its resume (`compare --only cancel`).
        @usableFromInline
        var firstSubscriber: SubscriberContinuation?
        /// The subscribers after `firstSubscriber` to resume with `subscriberResult`: empty
        /// while `firstSubscriber` is `nil` (`resumeSubscriber(_:)` keeps it so; `isEmpty`
        /// and the storage's `resume(_:)` look at `firstSubscriber` only).
        @usableFromInline
        var moreSubscribers: [SubscriberContinuation] = []
        /// What every subscriber above is resumed with.
        @usableFromInline
        var subscriberResult: Result<Element?, Failure> = .success(nil)
        /// Resume each of these with `producerResult`.
        @usableFromInline
        var producers: [ProducerContinuation] = []
        @usableFromInline
        var producerResult = true
        /// Waiting subscribers handed an element that this transition appended for a sender
        /// that was waiting for room (see `releaseProducersIfRoom(into:)`): resume each with
        /// its element.
        @usableFromInline
        var handedOver: [(continuation: SubscriberContinuation, element: Element)] = []
        /// How many elements of waiting senders this transition appended (the storage counts
        /// them as offers, see `CatchUpSpin`).
        @usableFromInline
        var parkedElementsAppended = 0
        /// Start a new upstream iteration for this epoch.
        @usableFromInline
        var startUpstream: UInt64?
        /// Cancel the upstream iteration of this epoch.
        @usableFromInline
        var cancelUpstream: UInt64?
        /// What the storage must do with the timer task (MulticastStateMachine+Timer.swift).
        @usableFromInline
        var timerTask: TimerTaskAction = .none

        @inlinable
        init() {}

        /// Effects that resume `continuation` with `nil` (a waiter handed back: cancelled, or
        /// decided before it waited).
        @inlinable
        init(resuming continuation: SubscriberContinuation) {
            self.firstSubscriber = continuation
        }

        @inlinable
        var isEmpty: Bool {
            self.firstSubscriber == nil && self.producers.isEmpty && self.startUpstream == nil
                && self.cancelUpstream == nil && self.timerTask == .none && self.handedOver.isEmpty
                && self.parkedElementsAppended == 0
        }

        /// Adds `continuation` to the subscribers to resume with `subscriberResult`.
        @inlinable
        mutating func resumeSubscriber(_ continuation: SubscriberContinuation) {
            if self.firstSubscriber == nil {
                self.firstSubscriber = continuation
            } else {
                self.moreSubscribers.append(continuation)
            }
        }
    }
}
