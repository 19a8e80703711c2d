// What a test reads of a `.bufferingNewest` iterator's batch: the elements it took ahead
// that it has not returned yet and that its policy has not dropped (`ElementBatch.takeHeld`'s
// rule).

@testable import AsyncMulticast

/// The elements of a `.bufferingNewest` batch, `elements` from index `next` on, that the
/// policy has not dropped at `tail` (`expiry`: `ReadReport.batchExpiry`, 0 if none is held).
func liveHeld<Element>(_ elements: [Element], next: Int, expiry: Int, tail: Int) -> ArraySlice<Element> {
    guard expiry != 0 else { return [] }
    let start = Swift.min(elements.count, Swift.max(next, tail &- expiry))
    return elements[start...]
}

extension SharedEventIterator {
    /// How many elements the batch it took ahead holds that it has not returned and its
    /// policy has not dropped at `tail`.
    func liveHeldCount(tail: Int) -> Int {
        guard let kept = self.subscription.held else { return 0 }
        return kept.withLock { liveHeld($0.elements, next: $0.next, expiry: $0.expiry, tail: tail).count }
    }
}
