/// The batch a `.bufferingNewest(n)` subscriber's read took ahead, which its policy may still
/// drop (`ElementBatch.takeHeld`): `MulticastStorage.refill` returns it one element at a time.
///
/// Kept beside the subscription (`SharedIterator.Subscription`), not in the iterator's
/// `ElementBatch`: its lossless batch is popped inline in every caller's loop, and any sign
/// there of a batch that is not the iterator's for good (16 bytes more in the iterator, or an
/// index left past the end after a refill) cost lossless readers 1 to 7 instructions per
/// element (`compare --instructions`, subject and lossless-read at N = 64). Behind a lock,
/// which only the iterator's task takes (the iterator is not meant to be shared): the
/// subscription stays `Sendable`.
@usableFromInline
struct HeldBatch<Element: Sendable>: Sendable {
    /// The batch's elements; `elements[next...]` are not returned or dropped yet.
    @usableFromInline
    var elements: [Element] = []
    /// The next index to check and return.
    @usableFromInline
    var next = 0
    /// `ReadReport.batchExpiry` of the batch: its element `i` is dropped once the tail is
    /// past `expiry + i`.
    @usableFromInline
    var expiry = 0

    @inlinable
    init() {}

    /// Whether some elements are not returned or dropped yet.
    @inlinable
    var holdsMore: Bool { self.next < self.elements.count }
}

/// Where a subscription keeps its `.bufferingNewest` batch: made when it joins with a policy
/// whose reads take one (`MulticastStateMachine.Lane.holdsBatches(_:)`), `nil` for the
/// others, which allocate nothing.
@usableFromInline
typealias HeldBatchSlot<Element: Sendable> = Lock<HeldBatch<Element>>?

extension Lock {
    /// A subscription's `HeldBatchSlot` under `policy` (`nil`: the storage's default).
    @inlinable
    static func heldBatchSlot<Element, Failure>(
        for policy: SharedBufferingPolicy?, of storage: MulticastStorage<Element, Failure>
    ) -> HeldBatchSlot<Element> where State == HeldBatch<Element> {
        MulticastStateMachine<Element, Failure>.Lane.holdsBatches(policy ?? storage.defaultPolicy)
            ? Lock(HeldBatch()) : nil
    }
}
