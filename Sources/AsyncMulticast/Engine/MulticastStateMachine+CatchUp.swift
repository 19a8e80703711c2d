// Catching up: whether a subscriber that took every element produced so far skips its next
// empty read, and how many offers a sole one may wait for instead of suspending.

extension MulticastStateMachine {
    /// Whether subscriber `id`, whose read just took every element produced so far, skips
    /// its next read while the producers' offer count has not moved
    /// (`ElementBatch.offersWhenCaughtUp`, `MulticastStorage.refill`).
    ///
    /// - Only on a `.park` lane (`.bounded`): its producer parks when a member is full, so a
    ///   member that caught up and used up its batch usually finds nothing new. Where the
    ///   producer never stops (`.keepAll`, `.evict`, the dropping rules) the next read
    ///   usually finds elements, and reading the count, a line every offer writes, from
    ///   every subscriber slowed fan-out by 5–15%.
    /// - Not for a subscriber that may wait for offers (`catchUpBatch(for:)`, off an actor):
    ///   it must read to wait. One that caught up while others were there and is then left
    ///   alone skips once without that wait; harmless.
    @inlinable @inline(__always)
    func skipsEmptyReads(for id: SubscriberID, mayWaitForOffers: Bool) -> Bool {
        guard let laneIndex = self.liveLane(of: id) else { return false }
        switch self.lanes[laneIndex].overflow {
        case .park:
            return !mayWaitForOffers || self.catchUpBatch(for: id) == nil
        case .evict, .dropOldest, .freeze, .keepAll:
            return false
        }
    }

    /// Whether a subscriber whose continuation was just stored (`subscriberWaiting`), once
    /// resumed with an element at the tail, skips its next read while the producers' offer
    /// count has not moved (`ReadReport.offersWhenParked`): unless it may wait for offers as
    /// the sole subscriber (`catchUpBatch(for:)`), which must read to wait.
    ///
    /// On every lane, unlike `skipsEmptyReads(for:mayWaitForOffers:)`: the count is read
    /// once per wake-up, which costs thousands of instructions anyway, not once per read.
    /// Without the subscriber's lane, which would cost a lookup on every wait: a sole
    /// subscriber off an actor never skips, even on a lane where it could not wait.
    @inlinable @inline(__always)
    func waiterSkipsEmptyReads(mayWaitForOffers: Bool) -> Bool {
        !mayWaitForOffers || self.subscriberCount != 1
    }

    /// How many elements subscriber `id`, having caught up, may wait for instead of
    /// suspending (see `CatchUpSpin`); `nil`: it must not wait.
    ///
    /// - Only a sole subscriber waits. With more, the producer wakes the others anyway, so
    ///   waiting would save little and would take a core from the subscribers it woke.
    /// - Only on a `.park` or `.keepAll` lane. A dropping lane (`.dropOldest`, `.freeze`)
    ///   hands elements directly only to a subscriber suspended in `next()`; one that waits
    ///   without being registered would have them dropped instead, and on an `.evict` lane
    ///   it could be evicted.
    /// - No more than the producer can offer before it parks: a subscriber that caught up
    ///   holds nothing, so under `.bounded(n)` that is `n`, which for a small `n` is far
    ///   below `CatchUpSpin.batch`; waiting for more would always end by the quiet limit.
    @inlinable @inline(__always)
    func catchUpBatch(for id: SubscriberID) -> Int? {
        guard self.subscriberCount == 1, let laneIndex = self.liveLane(of: id) else { return nil }
        switch self.lanes[laneIndex].overflow {
        case .park(let bound):
            return Swift.min(CatchUpSpin.batch, bound)
        case .keepAll:
            return CatchUpSpin.batch
        case .evict, .dropOldest, .freeze:
            return nil
        }
    }
}
