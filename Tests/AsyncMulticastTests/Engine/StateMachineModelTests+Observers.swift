// The model test's observers: of the subscriber count (`subscriberCounts`), and of a subject's
// completion (`send(contentsOf:)`). The events take what the observers must hear themselves
// (`Effects.notices`): the model gathers the notices of every event of a step (`hear(_:)`),
// checks after the step that the machine left none untold (`takeNotices()` finds nothing), and
// checks what the machine decided each observer must hear: the count's observers hear the count only when it is not the one
// they last heard (the first time, on registering); the completion observers hear the
// completion once, when the subject completed, and never after they left.

@testable import AsyncMulticast

/// An observer step of the model.
enum ModelObserveStep: CustomStringConvertible, Sendable {
    /// An observer of the subscriber count registers.
    case count
    /// The observer `pick` of the subscriber count leaves.
    case stopCount(pick: Int)
    /// A `send(contentsOf:)` observes the subject's completion.
    case completion
    /// The completion observer `pick` leaves.
    case stopCompletion(pick: Int)

    var description: String {
        switch self {
        case .count: return "count observed"
        case .stopCount(let pick): return "count observer #\(pick) leaves"
        case .completion: return "completion observed"
        case .stopCompletion(let pick): return "completion observer #\(pick) leaves"
        }
    }
}

extension ModelRun {
    mutating func apply(observe step: ModelObserveStep) {
        switch step {
        case .count:
            let cell = SubscriberCountCell()
            let first = self.machine.countObserverAdded(cell)
            // It hears the current count first, alone (checked as a notice would be).
            precondition(
                first.observers.count == 1 && first.observers[0] === cell && first.count == self.presentCount)
            self.countObservers.append(cell)
            self.countHeard = self.presentCount
        case .stopCount(let pick):
            guard !self.countObservers.isEmpty else { return }
            self.machine.countObserverRemoved(self.countObservers.remove(at: pick % self.countObservers.count))
        case .completion:
            let token = self.machine.completionObserverAdded {}
            if self.terminal == nil {
                precondition(token != nil, "a completion observer refused before the end")
                self.completionObservers.append(token!)
            } else {
                precondition(token == nil, "a completion observer registered after the end")
            }
        case .stopCompletion(let pick):
            guard !self.completionObservers.isEmpty else { return }
            let token = self.completionObservers.remove(at: pick % self.completionObservers.count)
            self.machine.completionObserverRemoved(token: token)
        }
    }

    /// The end a read returned (`nil`: it returned no end); a read that ended its subscriber
    /// while someone observes the count says so (`.endedNoticed`), and is heard.
    mutating func ended(_ action: Machine.NextAction) -> Result? {
        switch action {
        case .ended(let result): return result
        case .endedNoticed(let result, let effects):
            self.hear(effects)
            return result
        case .element, .elementReleasingSenders, .nothingReady, .nothingReadyStartingUpstream, .gap: return nil
        }
    }

    /// The notices an event returned, gathered for `checkNotices()`.
    mutating func hear(_ effects: Machine.Effects) {
        self.hear(effects.notices)
    }

    /// Notices gathered for `checkNotices()`.
    mutating func hear(_ notices: Machine.Notices) {
        if let change = notices.change { self.heard.change = change }
        if let observers = notices.completionObservers {
            self.heard.completionObservers = (self.heard.completionObservers ?? []) + observers
        }
        if let watchers = notices.evictionNotices {
            self.heard.evictionNotices = (self.heard.evictionNotices ?? []) + watchers
        }
    }

    /// After a step: what the machine's events said the observers must hear, and nothing left
    /// untold for a later critical section.
    mutating func checkNotices() throws(ModelFailure) {
        // An eviction's notices wait for the end of the critical section (`FollowUp.tell`),
        // where the storage takes them from the machine.
        if self.machine.followUp.contains(.tell) { self.hear(self.machine.takeNotices()) }
        let left = self.machine.takeNotices()
        try self.check(left.isEmpty, "the step's events left notices untold: \(left)")
        let notices = self.heard
        self.heard = Machine.Notices()
        let count = self.presentCount
        if !self.countObservers.isEmpty, count != self.countHeard {
            guard let change = notices.change else { throw self.fail("the count's observers did not hear \(count)") }
            try self.check(change.count == count, "the count's observers heard \(change.count), expected \(count)")
            try self.check(
                change.observers.count == self.countObservers.count
                    && zip(change.observers, self.countObservers).allSatisfy { $0 === $1 },
                "the change went to \(change.observers.count) observers, expected \(self.countObservers.count)")
            self.countHeard = count
        } else {
            try self.check(notices.change == nil, "a count change announced while nobody needs it")
        }
        if self.terminal != nil, !self.completionObservers.isEmpty {
            try self.check(
                notices.completionObservers?.map(\.token) == self.completionObservers,
                "completion told to \(notices.completionObservers?.map(\.token) ?? []), expected \(self.completionObservers)"
            )
            self.completionObservers = []
        } else {
            try self.check(notices.completionObservers == nil, "a completion told before the end, or twice")
        }
        try self.check(notices.evictionNotices == nil, "eviction watchers told, and none watches")
    }
}

extension ModelRun {
    /// The subscribers the count counts: an evicted one stops counting when it is evicted.
    var presentCount: Int { self.subscribers.filter { !$0.evicted }.count }
}
