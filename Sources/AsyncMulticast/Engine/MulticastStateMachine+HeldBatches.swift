// Batches a `.bufferingNewest` read takes ahead, which its policy may still drop: which lanes
// hold them, how long the storage must publish the tail for them, and the tail a subscriber
// whose connection ended checks them against. The iterator's side: HeldBatch.swift.
//
// `tailWatchedUntil` is the batch's `batchExpiry` plus its count: the tail at which all of it
// is dropped. It is raised in the critical section of the read that took the batch, before any
// later append; appends before that cannot drop what it took (a batch holds only elements
// within its window), and those past it only elements already seen dropped. It is 0 once
// passed (`appendObserved()`), so that a send tests one word while no such batch is out, as
// when a `.bufferingNewest` subject's subscribers are stalled.

extension MulticastStateMachine {
    /// The tail against which subscriber `id`'s iterator checks the `.bufferingNewest` batch
    /// it took ahead (`HeldBatch.take`), once the published tail says its policy
    /// dropped some: the tail, or, for a subscriber whose multicast connection ended, the
    /// tail then (`PrivateQueue.endedAtTail`): elements produced for a later connection do
    /// not reach it, so they drop nothing it holds.
    @inlinable
    func heldBatchTail(of id: SubscriberID) -> Int {
        guard let slotIndex = self.liveSlot(id), self.slots[slotIndex].readsPrivateQueue,
            let queue = self.privateQueues[UInt32(slotIndex)], queue.endsWhenEmpty
        else { return self.tail }
        return queue.endedAtTail
    }

    /// The storage observed an append, with `tailWatchedUntil` set: whether to publish the
    /// tail (`MulticastStorage.publishTail(of:)`); the watch ends once the tail is past it.
    @inlinable
    mutating func appendObserved() -> Bool {
        if self.tail <= self.tailWatchedUntil { return true }
        self.tailWatchedUntil = 0
        return false
    }
}

extension MulticastStateMachine.Lane {
    /// Whether its members take batches the rule may still drop: `.dropOldest(keep)`
    /// with `keep` of 2 or more (`ReadReport.batchExpiry`).
    @inlinable
    var holdsBatches: Bool { self.kept != .max && self.batchLimit > 0 }

    /// Whether the lane of `policy` holds batches (`holdsBatches`): a subscription with
    /// that policy keeps a place for them (`HeldBatchSlot`).
    /// (`.bufferingNewest(keep)` with `keep` of 2 or more: `Overflow(policy)` is then
    /// `.dropOldest(keep)`, and its `batchLimit` is positive; but not `Int.max`, which
    /// drops nothing: its lane's `kept` is `Int.max`, as a lossless lane's.)
    @inlinable
    static func holdsBatches(_ policy: SharedBufferingPolicy) -> Bool {
        if case .bufferingNewest(let keep) = policy { return keep >= 2 && keep != .max }
        return false
    }
}
