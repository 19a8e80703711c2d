// What a transition leaves to do once the lock is released: the machine's half of the one
// shape of after-lock work (the storage's `OutsideLock` carries it, beside the task handles).

extension MulticastStateMachine {
    /// What the caller of a transition must do, outside the lock. Every field, in the order
    /// the storage acts on them (`MulticastStorage.endCriticalSection(_:_:)` in the critical
    /// section, then `performWork(_:)` and `resume(_:)` after it):
    ///
    /// | Field | What the storage does |
    /// | --- | --- |
    /// | `upstreamStart` (in `aside`) | under the lock: starts the upstream task of that epoch at its priority, or wakes a hosted `run()` and raises the task still stopping |
    /// | `cancelUpstream` | under the lock: takes the task of that epoch out of the state; cancels it after |
    /// | `timerTask` | under the lock: starts, replaces or cancels the timer task (`TimerTaskAction`) |
    /// | `firstSubscriber`, `moreSubscribers` | resumes each with `subscriberResult` |
    /// | `subscriberResult` | what those subscribers receive: an element, `nil` or the error |
    /// | `handedOver` | resumes each waiting subscriber with the sender's element it was handed |
    /// | `parkedElementsAppended` | counts the senders' elements appended as offers (`CatchUpSpin`) |
    /// | `producers` | resumes each waiting producer or sender with `producerResult` |
    /// | `producerResult` | `true`: room was made, go on; `false`: stop |
    /// | `notices` (in `aside`) | tells the observers: the subscriber count, completion, evictions, drains |
    ///
    /// `aside` holds the two rare ones out of line (see its comment); `isEmpty` is true when
    /// there is nothing to do. The cheap paths that build no `Effects` (a delivery, a read
    /// that took an element, a quick leave) do the same things in the same order.
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
        /// What every producer above is resumed with: `true`, room was made; `false`, stop.
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
        /// What is rarely there, out of line (one word, `nil` as a rule): the upstream
        /// iteration this event started and how, and what the observers must hear. Inline,
        /// the notices alone would make every `Effects` 40 bytes larger (each join and leave
        /// returns one through the lock); the epoch it replaces took 16 bytes.
        @usableFromInline
        var aside: Aside?
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
            self.firstSubscriber == nil && self.producers.isEmpty && self.aside == nil
                && self.cancelUpstream == nil && self.timerTask == .none && self.handedOver.isEmpty
                && self.parkedElementsAppended == 0
        }

        /// The upstream iteration this event started, and how the storage starts its task.
        @inlinable
        var upstreamStart: UpstreamStart? {
            get { self.aside?.upstreamStart }
            set { self.aside = Aside.make(upstreamStart: newValue, notices: self.notices) }
        }

        /// The epoch of the upstream iteration this event started, if any.
        @inlinable
        var startUpstream: UInt64? { self.aside?.upstreamStart?.epoch }

        /// What the observers must hear (MulticastStateMachine+Observers.swift).
        @inlinable
        var notices: Notices {
            get { self.aside?.notices ?? Notices() }
            set { self.aside = Aside.make(upstreamStart: self.upstreamStart, notices: newValue) }
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

extension MulticastStateMachine.Effects {
    /// The rare part of `Effects`, immutable, so that copies share it safely: made anew
    /// (`make`) whenever a transition sets a part of it, at most a few times per event.
    @usableFromInline
    final class Aside: Sendable {
        @usableFromInline let upstreamStart: MulticastStateMachine.UpstreamStart?
        @usableFromInline let notices: MulticastStateMachine.Notices

        @inlinable
        init(upstreamStart: MulticastStateMachine.UpstreamStart?, notices: MulticastStateMachine.Notices) {
            self.upstreamStart = upstreamStart
            self.notices = notices
        }

        /// One holding `upstreamStart` and `notices`, or `nil` if both are empty.
        @inlinable
        static func make(
            upstreamStart: MulticastStateMachine.UpstreamStart?, notices: MulticastStateMachine.Notices
        ) -> Aside? {
            upstreamStart == nil && notices.isEmpty ? nil : Aside(upstreamStart: upstreamStart, notices: notices)
        }
    }
}

extension MulticastStateMachine {
    /// An upstream iteration the machine started in this event, and how the storage starts
    /// its task in the same critical section (MulticastStateMachine+Priority.swift): a
    /// detached task at `priority`, or, for a hosted machine, the iteration is `run()`'s,
    /// which is resumed if it waits (`hostWakeUp`) while the task still stopping is raised
    /// (`raiseStopping`).
    @usableFromInline
    struct UpstreamStart: Sendable {
        @usableFromInline var epoch: UInt64
        /// The priority (`TaskPriority.rawValue`) to create a detached upstream task at.
        @usableFromInline var priority: UInt8 = 0
        /// A hosted machine's waiting `run()`, to resume with `epoch` outside the lock.
        @usableFromInline var hostWakeUp: UnsafeContinuation<UInt64?, Never>?
        /// A hosted machine: the priority to raise the task still stopping to, if any.
        @usableFromInline var raiseStopping: UInt8?

        @inlinable
        init(epoch: UInt64) { self.epoch = epoch }
    }
}
