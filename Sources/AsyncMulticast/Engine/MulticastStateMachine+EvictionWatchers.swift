// Eviction watchers: the tasks waiting in `SharedSubscription.waitForEviction()`, and what an
// eviction does at once (+Evicting holds the limits that cause it).

extension MulticastStateMachine {
    /// Resumed with the eviction when the watched subscriber is evicted, `nil` when it left
    /// otherwise (or the waiting task was cancelled).
    @usableFromInline
    typealias EvictionContinuation = UnsafeContinuation<SubscriberEviction?, Never>

    /// An eviction watcher resolved, with what it learns (the eviction, or `nil`: the
    /// subscriber left otherwise), for the storage to resume outside the lock.
    @usableFromInline
    typealias EvictionNotice = (continuation: EvictionContinuation, eviction: SubscriberEviction?)

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
            return self.privateQueues[UInt32(slotIndex)]?.eviction != nil
        }
        guard !slot.readsPrivateQueue, case .evict = self.lanes[Int(slot.lane)].overflow else { return false }
        return slot.cursor < self.lanes[Int(slot.lane)].minCursor
    }

    /// What a task asking to learn whether a subscriber is evicted finds at once.
    @usableFromInline
    enum EvictionWatch: Sendable {
        /// It already was: with its eviction.
        case evicted(SubscriberEviction)
        /// It has left otherwise (or the asking task was cancelled): it will not be evicted.
        case left
        /// The watcher is stored, to be resumed when the subscriber is evicted (with the
        /// eviction) or leaves (with `nil`).
        case stored
    }

    /// A task asks to learn whether subscriber `id` is evicted (`EvictionWatch`).
    @inlinable
    mutating func evictionWatchRequested(
        _ id: SubscriberID, token: UInt64, continuation: EvictionContinuation
    ) -> EvictionWatch {
        guard let slotIndex = self.liveSlot(id) else {
            // Evicted, then left (its iteration learned it, or it was released): still evicted.
            if let departed = self.departedEvictions[id.slot], departed.generation == id.generation {
                return .evicted(departed.eviction)
            }
            return .left
        }
        if let eviction = self.eviction(of: slotIndex) { return .evicted(eviction) }
        self.evictionWatchers[UInt32(slotIndex), default: []].append(
            EvictionWatcher(token: token, continuation: continuation))
        return .stored
    }

    /// The task waiting with `token` was cancelled: its continuation, if still stored (the
    /// caller resumes it with `nil`: not evicted).
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

    /// Members were just evicted: the watchers of those that were learn it (with the
    /// eviction) at the end of the critical section. Scans the watchers, not the subscribers;
    /// only when some were evicted and some are watched.
    @inlinable
    mutating func noticeEvictions() {
        for (slot, watchers) in self.evictionWatchers {
            guard let eviction = self.eviction(of: Int(slot)) else { continue }
            self.evictionWatchers[slot] = nil
            for watcher in watchers { self.evictionNotices.append((watcher.continuation, eviction)) }
        }
    }

    /// The subscriber in `slotIndex` is leaving, not evicted (every eviction resolved its
    /// watchers when it happened, `noticeEvictions()`): its watchers learn it, resumed with
    /// `nil` outside the lock (`takeEvictionNotices()`).
    @inlinable
    mutating func endEvictionWatch(_ slotIndex: Int) {
        guard let watchers = self.evictionWatchers.removeValue(forKey: UInt32(slotIndex)) else { return }
        assert(!self.isEvicted(slotIndex), "an evicted subscriber's watchers are told when it is evicted")
        for watcher in watchers { self.evictionNotices.append((watcher.continuation, nil)) }
    }

    /// The watchers resolved since the last call, with what each learns, for the storage to
    /// resume outside the lock; `nil` if none (the usual case: a test of an empty array).
    @inlinable
    mutating func takeEvictionNotices() -> [EvictionNotice]? {
        guard !self.evictionNotices.isEmpty else { return nil }
        defer { self.evictionNotices = [] }
        return self.evictionNotices
    }
}
