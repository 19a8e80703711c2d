/// Elements a subscriber took in one read of the shared buffer and has not returned yet,
/// in order.
///
/// Under a lossless policy they were handed over when taken: the shared buffer no longer
/// holds or counts them for this subscriber. Taking one only reads the array and moves an
/// index (no uniqueness check, no write to the array), which matters because it happens
/// once per element. The cost: the elements already returned stay referenced until the
/// batch is refilled (at most one batch: `min(n / 2, 64)` under `.bounded(n)` or
/// `.evicting(n)`, 64 under `.unbounded`).
///
/// Under `.bufferingNewest(n)` (at most `min(n / 2, 64)`) the policy may still drop them:
/// they are kept beside the subscription instead (`HeldBatch`), and `MulticastStorage.refill`
/// returns them one at a time, each checked against the tail (`HeldBatch.take`).
@usableFromInline
struct ElementBatch<Element> {
    /// The elements; the machine appends to it when the batch is refilled.
    @usableFromInline
    var elements: [Element] = []
    /// The next element to return. An `Int`, although a batch holds at most
    /// `MulticastStateMachine.Lane.maxBatch` elements: a narrower index costs a
    /// zero-extension for every element taken, for 8 bytes of iterator.
    @usableFromInline
    var nextIndex = 0
    /// Set when the read that filled the batch took every element produced so far: the
    /// producers' offer count then (`CatchUpSpin.offerCount`); or when `wait` was resumed
    /// with an element at the tail, the count that element's offer made it
    /// (`ReadReport.offersWhenParked`, set by `SharedIterator.waitForElement`); 0 when not
    /// set. If the count has not moved once the batch is used up, no element was counted
    /// since, and `MulticastStorage.refill` says to wait at once, without the read (a lock
    /// acquisition and a cancellation check): the wait reads under the lock anyway.
    /// A count of 0 (at the start, or after 2³² offers) is never remembered: that
    /// subscriber reads, as if it had not caught up.
    @usableFromInline
    var offersWhenCaughtUp: UInt32 = 0

    @inlinable
    init() {}

    /// The next element, or `nil` once every element was returned.
    @inlinable
    mutating func popFirst() -> Element? {
        let index = self.nextIndex
        // Checked against the count here; the buffer's subscript checks nothing more.
        guard let element = self.elements.withUnsafeBufferPointer({ index < $0.count ? $0[index] : nil }) else {
            return nil
        }
        self.nextIndex = index &+ 1
        return element
    }
}

extension ElementBatch where Element: Sendable {
    /// Refills the used-up batch from `storage` for subscriber `id`
    /// (`MulticastStorage.refill`, which empties `elements` and sets `offersWhenCaughtUp`)
    /// and starts returning from its first element; or, under `.bufferingNewest`, returns
    /// the next element of the batch `held` keeps that the policy has not dropped.
    @inlinable
    mutating func refill<Failure: Error>(
        from storage: MulticastStorage<Element, Failure>, subscriber id: SubscriberID,
        held: HeldBatchSlot<Element>, report: inout ReadReport, mayWaitForOffers: Bool
    ) -> MulticastStorage<Element, Failure>.Refill {
        let refill = storage.refill(
            id, batch: &self.elements, held: held, offersWhenCaughtUp: &self.offersWhenCaughtUp, report: &report,
            mayWaitForOffers: mayWaitForOffers)
        self.nextIndex = 0
        return refill
    }
}

extension ElementBatch: Sendable where Element: Sendable {}
