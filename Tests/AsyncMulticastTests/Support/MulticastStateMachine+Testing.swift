// Members of the engine that only the tests use, kept out of the library (as swift-collections
// keeps `Deque+Testing.swift` apart): reading without a batch or a report, and peeking at the
// shared buffer and at a subscriber. What the invariant checks also use stays in the library,
// beside them (MulticastStateMachine+Invariants.swift, CursorHistogram+Invariants.swift).

import Testing

@testable import AsyncMulticast

extension MulticastStateMachine {
    /// `subscriberJoined(policy:connectRule:)` for a subscriber that never connects the
    /// upstream (`ConnectRule.never`): its effects are always empty.
    mutating func subscriberJoined(policy: SharedBufferingPolicy? = nil) -> SubscriberID {
        let (id, effects) = self.subscriberJoined(policy: policy, connectRule: .never)
        precondition(effects.startUpstream == nil, "joining with ConnectRule.never started the upstream")
        return id
    }

    /// `nextRequested(_:batch:report:)` one element at a time, without a report: what a
    /// plain reader does.
    mutating func nextRequested(_ id: SubscriberID) -> NextAction {
        var noBatch: [Element]? = nil
        var report = ReadReport()
        return self.nextRequested(id, batch: &noBatch, report: &report)
    }

    /// `nextRequested(_:batch:report:)` for a reader that says at each read whether its
    /// demand connects the upstream, as the model tests do (their configuration decides it
    /// for every subscriber, `autoconnect`): recorded first in the subscriber's slot, where
    /// joining with `ConnectRule.onDemand` puts it.
    mutating func nextRequested(
        _ id: SubscriberID, batch: inout [Element]?, report: inout ReadReport, connectsOnDemand: Bool
    ) -> NextAction {
        self.recordConnectsOnDemand(connectsOnDemand, for: id)
        return self.nextRequested(id, batch: &batch, report: &report)
    }

    /// Sets subscriber `id`'s connect rule (`Slot.connectsOnDemand`), as if it had joined
    /// with `ConnectRule.onDemand` (or not).
    mutating func recordConnectsOnDemand(_ connectsOnDemand: Bool, for id: SubscriberID) {
        if let slotIndex = self.liveSlot(id) { self.slots[slotIndex].connectsOnDemand = connectsOnDemand }
    }

    /// `subscriberLeft(_:at:)` at the instant 0: for the suites that time nothing.
    mutating func subscriberLeft(_ id: SubscriberID) -> Effects {
        self.subscriberLeft(id, at: .zero)
    }

    /// The window the timer times closes: the step of the machine's timer task, as the
    /// storage runs it once its sleep failed (the window closes at once). Its effects; the
    /// timer task goes on timing the next window if that opened one.
    mutating func keepAliveExpired() -> Effects {
        precondition(self.timer.isRunning, "no timer task to fire")
        let step = self.timerWoke(
            generation: self.timer.generation, at: self.timer.deadline, sleptUntil: nil, sleepFailed: true)
        guard case .fired(let effects, _) = step else { preconditionFailure("the timer did not fire: \(step)") }
        return effects
    }

    /// Whether a timer task is the machine's.
    var deadlineTimerIsRunning: Bool { self.timer.isRunning }

    /// Number of elements currently stored in the shared buffer.
    var bufferedCount: Int { self.elements.count }

    /// Whether `id` still names a registered subscriber.
    func isSubscribed(_ id: SubscriberID) -> Bool {
        self.liveSlot(id) != nil
    }

    /// What subscriber `id` will still receive if nothing more is produced, in order:
    /// everything not yet handed to it (its iterator's batch is not included).
    func undelivered(_ id: SubscriberID) -> [Element] {
        guard let slotIndex = self.liveSlot(id) else { return [] }
        return self.pendingElements(of: slotIndex)
    }
}

extension MulticastStateMachine.Effects {
    /// Every subscriber to resume with `subscriberResult`, in order (`firstSubscriber`, then
    /// `moreSubscribers`).
    var subscribers: [MulticastStateMachine.SubscriberContinuation] {
        guard let first = self.firstSubscriber else { return [] }
        return [first] + self.moreSubscribers
    }
}

extension MulticastStateMachine {
    /// What the storage does after a critical section: when the machine asked for the time
    /// (`FollowUp.reading`), the clock `now` is read, outside the lock, and passed in
    /// (`clockRead(at:)`). Its effects, or `nil` when the machine asked for nothing (the clock
    /// was not read).
    @discardableResult
    mutating func followedUp(clock now: () -> Duration) -> Effects? {
        guard self.followUp.contains(.reading) else { return nil }
        return self.clockRead(at: now(), through: self.tail)
    }
}

extension MulticastStateMachine where Element == Int, Failure == TestError {
    /// A subject's `send`, then the storage's follow-up (`followedUp(clock:)`), whose
    /// reading of `now` the machine may ask for.
    @discardableResult
    mutating func push(_ element: Int, clock now: () -> Duration) -> (effects: Effects, park: Bool) {
        let pushed = self.push(element, epoch: Self.pushEpoch)
        self.followedUp(clock: now)
        return pushed
    }
}
