// Eviction watchers: the tasks waiting in `SharedSubscription.waitForEviction()`, and what an
// eviction does at once (+Evicting holds the limits that cause it).

extension MulticastStateMachine {
    /// Resumed with `true` when the watched subscriber is evicted, `false` when it left
    /// otherwise (or the waiting task was cancelled).
    @usableFromInline
    typealias EvictionContinuation = UnsafeContinuation<Bool, Never>

    /// A task waiting in `SharedSubscription.waitForEviction()`; `token` finds it when that
    /// task is cancelled. Told outside the lock, through the notices (`takeNotices()`).
    @usableFromInline
    struct EvictionWatcher: Sendable {
        @usableFromInline
        let token: UInt64
        @usableFromInline
        let continuation: EvictionContinuation

        @inlinable
        init(token: UInt64, continuation: EvictionContinuation) {
            self.token = token
            self.continuation = continuation
        }
    }

    /// Whether the live subscriber in `slotIndex` was evicted and has not read since.
    @inlinable
    func isEvicted(_ slotIndex: Int) -> Bool {
        let slot = self.slots[slotIndex]
        if slot.lane == Slot.noLane {
            // An ended connection left it a private queue; it says whether it was evicted.
            return self.privateQueues[UInt32(slotIndex)]?.endsEvicted ?? false
        }
        guard !slot.readsPrivateQueue, case .evict = self.lanes[Int(slot.lane)].overflow else { return false }
        return slot.cursor < self.lanes[Int(slot.lane)].minCursor
    }

    /// A task asks to learn whether subscriber `id` is evicted: `true` if it already is,
    /// `false` if it has left; `nil` when the watcher is stored, to be resumed when the
    /// subscriber is evicted (with `true`) or leaves (with `false`).
    @inlinable
    mutating func evictionWatchRequested(
        _ id: SubscriberID, token: UInt64, continuation: EvictionContinuation
    ) -> Bool? {
        guard let slotIndex = self.liveSlot(id) else { return false }
        if self.isEvicted(slotIndex) { return true }
        self.evictionWatchers[UInt32(slotIndex), default: []].append(
            EvictionWatcher(token: token, continuation: continuation))
        return nil
    }

    /// The task waiting with `token` was cancelled: its continuation, if still stored (the
    /// caller resumes it with `false`: not evicted).
    @inlinable
    mutating func evictionWatchCancelled(
        _ id: SubscriberID, token: UInt64
    ) -> EvictionContinuation? {
        guard let slotIndex = self.liveSlot(id), var watchers = self.evictionWatchers[UInt32(slotIndex)],
            let index = watchers.firstIndex(where: { $0.token == token })
        else { return nil }
        let watcher = watchers.remove(at: index)
        self.evictionWatchers[UInt32(slotIndex)] = watchers.isEmpty ? nil : watchers
        return watcher.continuation
    }

    /// Members were just evicted (by `append`, a soft deadline or a reading): they
    /// stop counting as subscribers at once (an eviction is a leave for the count, the
    /// observers of `subscriberCounts` and the thresholds; the slot stays until the
    /// iteration learns it), drop their greetings (see `dropEvictedGreetings()`), and their
    /// watchers learn it at the end of the critical section (`FollowUp.tell`). The last
    /// subscriber of an `.automatic` upstream evicted is a leave for the upstream too, at the
    /// next reading of the clock (`FollowUp.reading`, `lastSubscriberWent(at:into:)`).
    /// Out of line: `append`'s general pass, which calls it, stays as small as before it.
    @inlinable
    @inline(never)
    mutating func evictionsHappened() {
        // The lanes count their evicted members; those not yet counted out are the new ones.
        var evicted = 0
        for lane in self.lanes { evicted += lane.evicted }
        self.subscriberCount -= evicted - self.evictedMembers
        self.evictedMembers = evicted
        if !self.greetings.isEmpty { self.dropEvictedGreetings() }
        if !self.evictionWatchers.isEmpty { self.noticeEvictions() }
        if !self.isQuiet { self.followUp.insert(.tell) }
        if self.subscriberCount == 0, self.mode == .automatic, case .running = self.upstream {
            self.followUp.insert(.reading)
        }
    }

    /// Members were just evicted: the watchers of those that were learn it (`true`) at the
    /// end of the critical section. Scans the watchers, not the subscribers; only when some
    /// were evicted and some are watched.
    @inlinable
    mutating func noticeEvictions() {
        for (slot, watchers) in self.evictionWatchers where self.isEvicted(Int(slot)) {
            self.evictionWatchers[slot] = nil
            for watcher in watchers { self.evictionNotices.append((watcher.continuation, true)) }
        }
    }

    /// The subscriber in `slotIndex` is leaving, not evicted (every eviction resolved its
    /// watchers when it happened, `noticeEvictions()`): its watchers learn it, resumed with
    /// `false` outside the lock (`takeEvictionNotices()`).
    @inlinable
    mutating func endEvictionWatch(_ slotIndex: Int) {
        guard let watchers = self.evictionWatchers.removeValue(forKey: UInt32(slotIndex)) else { return }
        assert(!self.isEvicted(slotIndex), "an evicted subscriber's watchers are told when it is evicted")
        for watcher in watchers { self.evictionNotices.append((watcher.continuation, false)) }
    }

    /// The watchers resolved since the last call, with what each learns, for the storage to
    /// resume outside the lock; `nil` if none (the usual case: a test of an empty array).
    @inlinable
    mutating func takeEvictionNotices() -> [(continuation: EvictionContinuation, evicted: Bool)]? {
        guard !self.evictionNotices.isEmpty else { return nil }
        defer { self.evictionNotices = [] }
        return self.evictionNotices
    }
}
