/// The batch a `.bufferingNewest(n)` subscriber's read took ahead, which its policy may still
/// drop: `MulticastStorage.refill` returns it one element at a time, each checked against the
/// tail (`take(tail:reportsGaps:exactTail:)`).
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

    /// A read took `batch`, expiring at `expiry` (`ReadReport.batchExpiry`): it is held from
    /// its first element, and `batch` gets the used-up array back, so that neither allocates
    /// again.
    @inlinable
    mutating func hold(_ batch: inout [Element], expiry: Int) {
        swap(&self.elements, &batch)
        (self.next, self.expiry) = (0, expiry)
        batch.removeAll(keepingCapacity: true)
    }

    /// What `take(tail:reportsGaps:exactTail:)` found.
    @usableFromInline
    enum Taken {
        /// The next element, after `missed` the policy dropped before it.
        case element(Element, missed: Int)
        /// A lag-reporting reader's gap of this many, reported alone: the element after it
        /// stays held, where the policy may still drop it.
        case gap(Int)
        /// The policy dropped all the rest, this many: the next read tells what follows.
        case usedUp(missed: Int)
    }

    /// The next element held (`holdsMore` must be true) that the policy has not dropped, or
    /// what it dropped, given `tail`, the number of elements produced as last published
    /// (read after the batch was taken: no smaller than it was then). If that says the
    /// policy dropped some, `exactTail` (the machine's `heldBatchTail(of:)`, under the lock)
    /// decides: the subscriber may have left its lane since (its multicast connection
    /// ended), and then later elements drop nothing.
    ///
    /// Exactly what reading them one by one under the lock would give: an element at
    /// position `p` is dropped once the tail is past `p + n`, and `p + n` is `expiry + i`
    /// for `elements[i]`. The tail may be read later than the caller's last look at the
    /// buffer, never earlier, so what it returns is what a read at that moment returns.
    @inlinable
    mutating func take(tail: Int, reportsGaps: Bool, exactTail: () -> Int) -> Taken {
        let first = self.next
        let count = self.elements.count
        assert(self.expiry != 0 && first < count, "take with nothing held")
        // The first index the policy has not dropped: `tail <= expiry + i`.
        var firstKept = Swift.max(first, tail &- self.expiry)
        if firstKept != first { firstKept = Swift.max(first, exactTail() &- self.expiry) }
        guard firstKept < count else {
            self.next = count
            return .usedUp(missed: count - first)
        }
        let missed = firstKept - first
        if missed > 0, reportsGaps {
            self.next = firstKept
            return .gap(missed)
        }
        self.next = firstKept + 1
        return .element(self.elements[firstKept], missed: missed)
    }
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
