// What a test reads of a `.bufferingNewest` batch: the elements taken ahead that were not
// returned yet and that the policy has not dropped (`HeldBatch.take`'s rule).

@testable import AsyncMulticast

extension HeldBatch {
    /// The elements not returned yet that the policy has not dropped at `tail`, in order.
    func live(tail: Int) -> ArraySlice<Element> {
        self.elements[Swift.min(self.elements.count, Swift.max(self.next, tail &- self.expiry))...]
    }
}

extension SharedEventIterator {
    /// How many elements the batch it took ahead holds that it has not returned and its
    /// policy has not dropped at `tail`.
    func liveHeldCount(tail: Int) -> Int {
        self.subscription.held?.withLock { $0.live(tail: tail).count } ?? 0
    }
}
