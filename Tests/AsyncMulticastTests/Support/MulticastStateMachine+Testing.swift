// Members of the engine that only the tests use, kept out of the library (as swift-collections
// keeps `Deque+Testing.swift` apart): reading without a batch or a report, and peeking at the
// shared buffer and at a subscriber. What the invariant checks also use stays in the library,
// beside them (MulticastStateMachine+Invariants.swift, CursorHistogram+Invariants.swift).

@testable import AsyncMulticast

extension MulticastStateMachine {
    /// `nextRequested(_:batch:report:connectsOnDemand:)` one element at a time, without a
    /// report: what a plain reader does.
    mutating func nextRequested(_ id: SubscriberID, connectsOnDemand: Bool = false) -> NextAction {
        var noBatch: [Element]? = nil
        var report = ReadReport()
        return self.nextRequested(id, batch: &noBatch, report: &report, connectsOnDemand: connectsOnDemand)
    }

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
