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
/// returns them one at a time, each checked against the tail (`takeHeld`).
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

extension ElementBatch {
    /// What `takeHeld` found.
    @usableFromInline
    enum HeldElement {
        /// The next element, after `missed` the policy dropped before it.
        case element(Element, missed: Int)
        /// A lag-reporting reader's gap of this many, reported alone: the element after it
        /// stays held, where the policy may still drop it.
        case gap(Int)
        /// The policy dropped all the rest, this many: the next read tells what follows.
        case usedUp(missed: Int)
    }

    /// The next of `elements`, a `.bufferingNewest(n)` batch, from index `next` on, or what
    /// the policy dropped, given `tail`, the number of elements produced as last published
    /// (read after the batch was taken: no smaller than it was then). If that says the
    /// policy dropped some, `exactTail` (the machine's `heldBatchTail(of:)`, under the lock)
    /// decides: the subscriber may have left its lane since (its multicast connection
    /// ended), and then later elements drop nothing.
    ///
    /// Exactly what reading them one by one under the lock would give: an element at
    /// position `p` is dropped once the tail is past `p + n`, and `p + n` is `expiry + i`
    /// for `elements[i]` (`ReadReport.batchExpiry`). The tail may be read later than the
    /// caller's last look at the buffer, never earlier, so what it returns is what a read
    /// at that moment returns.
    @inlinable
    static func takeHeld(
        _ elements: [Element], next: inout Int, expiry: Int, tail: Int, reportsGaps: Bool, exactTail: () -> Int
    ) -> HeldElement {
        let first = next
        let count = elements.count
        assert(expiry != 0 && first < count, "takeHeld with nothing held")
        // The first index the policy has not dropped: `tail <= expiry + i`.
        var firstKept = Swift.max(first, tail &- expiry)
        if firstKept != first { firstKept = Swift.max(first, exactTail() &- expiry) }
        guard firstKept < count else {
            next = count
            return .usedUp(missed: count - first)
        }
        let missed = firstKept - first
        if missed > 0, reportsGaps {
            next = firstKept
            return .gap(missed)
        }
        next = firstKept + 1
        return .element(elements[firstKept], missed: missed)
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
