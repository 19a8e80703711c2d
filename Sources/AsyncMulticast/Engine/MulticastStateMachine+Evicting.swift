// Evicting: what the `.evicting` policy adds to the machine besides its hard limit (which
// `append` applies): the soft limit, what a subscriber holds (its backlog and high-water
// mark, for sizing the limits), the greeting of a replaying subscriber, and the tasks waiting
// to learn of an eviction (`SharedSubscription.waitForEviction()`).

extension MulticastStateMachine {
    /// An `.evicting` subscriber's replayed elements, read before its cursor's (`greetings`).
    @usableFromInline
    struct Greeting: Sendable {
        /// Shared with the subscribers that joined at the same position: never mutated.
        @usableFromInline
        let elements: [Element]
        /// The position of the first of them.
        @usableFromInline
        let start: Int
        /// The next one to read.
        @usableFromInline
        var next = 0

        @inlinable
        init(elements: [Element], start: Int) {
            self.elements = elements
            self.start = start
        }

        @inlinable
        var remaining: Int { self.elements.count - self.next }
    }
}

extension MulticastStateMachine.Lane {
    /// An `.evicting` policy's soft limit, read only on an `.evict` lane.
    @inlinable
    var softLimit: SharedBufferingPolicy.SoftLimit? {
        if case .evicting(_, let soft) = self.policy { return soft }
        return nil
    }

    /// `.evict` with a soft limit, after the element that made the tail `newTail` was
    /// appended (and the hard limit applied): stamps the deadline of the cell that went
    /// past `soft.count` with it (see `softDeadlines`), and evicts the cells whose
    /// deadline has passed. `now` reads the clock; it is called only while some member
    /// holds more than `soft.count`. Returns whether a cell was evicted.
    @inlinable
    mutating func applySoftLimit(
        _ soft: SharedBufferingPolicy.SoftLimit, newTail: Int, now: () -> Duration
    ) -> Bool {
        // Members whose cursor is below this hold more than `soft.count`.
        let pastSoft = newTail - soft.count
        guard !self.counts.isEmpty, self.minCursor < pastSoft else {
            // Nobody is past the soft limit: no deadline to keep.
            if !self.softDeadlines.isEmpty { self.softDeadlines = IndexedRing() }
            return false
        }
        // The ring covers the cells past the soft limit, from at most `minCursor`.
        if self.softDeadlines.isEmpty {
            // Nobody was past the soft limit before this element: whoever is now sits in
            // the cell that just went past it.
            self.softDeadlines.rebase(to: pastSoft - 1)
        } else if self.softDeadlines.startIndex < self.minCursor {
            self.softDeadlines.removeFirst(
                Swift.min(self.minCursor, self.softDeadlines.endIndex) - self.softDeadlines.startIndex)
            if self.softDeadlines.isEmpty { self.softDeadlines.rebase(to: self.minCursor) }
        }
        let reading = now()
        let deadline = reading.saturatingAdding(soft.duration)
        // Deadlines never decrease (the cells are evicted in order). The clock went back
        // since the last one was written (a user's clock need not be monotonic): the ones
        // later than this one come down to it, so that no reading taken before the jump
        // keeps a member that fell behind after it for longer than the duration.
        if !self.softDeadlines.isEmpty, self.softDeadlines[self.softDeadlines.endIndex - 1] > deadline {
            self.capSoftDeadlines(at: deadline)
        }
        while self.softDeadlines.endIndex < pastSoft { self.softDeadlines.append(deadline) }
        var evictedAny = false
        while !self.counts.isEmpty, self.minCursor < pastSoft,
            Self.isReached(self.softDeadlines[self.minCursor], at: reading)
        {
            self.evictOldestCell()
            evictedAny = true
        }
        return evictedAny
    }

    /// Whether a soft deadline has come at `reading`. One that saturated (a duration or a
    /// clock reading near `Duration`'s largest value) never comes: it stands for later than
    /// any reading.
    @inlinable
    static func isReached(_ deadline: Duration, at reading: Duration) -> Bool {
        deadline <= reading && deadline != Duration(attoseconds: .max)
    }

    /// The clock went back: every soft deadline later than `deadline` becomes `deadline`.
    /// Rare, so the ring is rebuilt.
    @inlinable
    mutating func capSoftDeadlines(at deadline: Duration) {
        var capped = IndexedRing<Duration>()
        capped.rebase(to: self.softDeadlines.startIndex)
        for position in self.softDeadlines.startIndex..<self.softDeadlines.endIndex {
            capped.append(Swift.min(self.softDeadlines[position], deadline))
        }
        self.softDeadlines = capped
    }

}

extension MulticastStateMachine {
    /// The general pass of `append` met a member of an `.evict` lane while a soft-limited
    /// lane exists: applies each soft limit (`Lane.applySoftLimit`), after the pass. Returns
    /// whether a cell was evicted. Out of line: the pass of every other append stays small.
    @inlinable
    @inline(never)
    mutating func applySoftLimitsAfterThePass(newTail: Int) -> Bool {
        var evictedAny = false
        for laneIndex in self.lanes.indices where self.lanes[laneIndex].members > 0 {
            guard case .evict = self.lanes[laneIndex].overflow, let soft = self.lanes[laneIndex].softLimit else {
                continue
            }
            if self.lanes[laneIndex].applySoftLimit(soft, newTail: newTail, now: self.now) { evictedAny = true }
        }
        return evictedAny
    }

    /// The end of `appendToSoleLosslessLane` after its lane evicted members: the same, then
    /// the evictions are noticed, after the hand-over (until it, a waiting member's cell is
    /// already at the new tail while its cursor is not, and `isEvicted` would take it for
    /// evicted). Out of line, so that the usual append carries no flag across the hand-over
    /// (about 10 instructions of register spills an element, `compare --instructions`).
    @inlinable
    @inline(never)
    mutating func appendedToSoleLaneAfterEvictions(
        _ element: Element, newTail: Int, resuming: inout [SubscriberContinuation]
    ) -> Bool {
        let hasRoom = self.appendedToSoleLane(
            element, newTail: newTail, laneStart: self.lanes[0].counts.startIndex, resuming: &resuming)
        self.evictionsHappened(resuming: &resuming)
        return hasRoom
    }

    /// A task waiting in `SharedSubscription.waitForEviction()`; `token` finds it when that
    /// task is cancelled.
    ///
    /// Its continuation is a subscriber's: resumed with an element (`.success(.some)`) when
    /// its subscriber is evicted, with anything else when it left otherwise. So the
    /// evictions an element causes resume their watchers with that element, among the
    /// subscribers waiting for it (`noticeEvictions(resuming:)`): the producer's hot path has
    /// nothing more to take out of its critical section.
    @usableFromInline
    struct EvictionWatcher: Sendable {
        @usableFromInline
        let token: UInt64
        @usableFromInline
        let continuation: SubscriberContinuation

        @inlinable
        init(token: UInt64, continuation: SubscriberContinuation) {
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
    /// subscriber is evicted (with an element) or leaves (with `nil`).
    @inlinable
    mutating func evictionWatchRequested(
        _ id: SubscriberID, token: UInt64, continuation: SubscriberContinuation
    ) -> Bool? {
        guard let slotIndex = self.liveSlot(id) else { return false }
        if self.isEvicted(slotIndex) { return true }
        self.evictionWatchers[UInt32(slotIndex), default: []].append(
            EvictionWatcher(token: token, continuation: continuation))
        return nil
    }

    /// The task waiting with `token` was cancelled: its continuation, if still stored (the
    /// caller resumes it with `nil`: not evicted).
    @inlinable
    mutating func evictionWatchCancelled(
        _ id: SubscriberID, token: UInt64
    ) -> SubscriberContinuation? {
        guard let slotIndex = self.liveSlot(id), var watchers = self.evictionWatchers[UInt32(slotIndex)],
            let index = watchers.firstIndex(where: { $0.token == token })
        else { return nil }
        let watcher = watchers.remove(at: index)
        self.evictionWatchers[UInt32(slotIndex)] = watchers.isEmpty ? nil : watchers
        return watcher.continuation
    }

    /// `append` evicted members: they drop their greetings (see `dropEvictedGreetings()`) and
    /// their watchers learn it, resumed with the element appended (`resuming`).
    @inlinable
    mutating func evictionsHappened(resuming: inout [SubscriberContinuation]) {
        if !self.greetings.isEmpty { self.dropEvictedGreetings() }
        if !self.evictionWatchers.isEmpty { self.noticeEvictions(resuming: &resuming) }
    }

    /// Members were just evicted: the watchers of those that were go to `resuming`, which the
    /// producer resumes with the element that evicted them (that is, with `true`). Scans the
    /// watchers, not the subscribers; only when some were evicted and some are watched.
    @inlinable
    mutating func noticeEvictions(resuming: inout [SubscriberContinuation]) {
        for (slot, watchers) in self.evictionWatchers where self.isEvicted(Int(slot)) {
            self.evictionWatchers[slot] = nil
            for watcher in watchers { resuming.append(watcher.continuation) }
        }
    }

    /// The subscriber in `slotIndex` is leaving, not evicted (every eviction resolved its
    /// watchers when it happened, `noticeEvictions(resuming:)`): its watchers learn it,
    /// resumed with `nil` outside the lock (`takeEvictionNotices()`).
    @inlinable
    mutating func endEvictionWatch(_ slotIndex: Int) {
        guard let watchers = self.evictionWatchers.removeValue(forKey: UInt32(slotIndex)) else { return }
        assert(!self.isEvicted(slotIndex), "an evicted subscriber's watchers are told when it is evicted")
        for watcher in watchers { self.evictionNotices.append(watcher.continuation) }
    }

    /// The watchers of subscribers that left without being evicted since the last call, for
    /// the storage to resume with `nil` outside the lock; `nil` if none (the usual case: a
    /// test of an empty array).
    @inlinable
    mutating func takeEvictionNotices() -> [SubscriberContinuation]? {
        guard !self.evictionNotices.isEmpty else { return nil }
        defer { self.evictionNotices = [] }
        return self.evictionNotices
    }

    /// How many elements subscriber `id` holds (produced after it joined, not yet handed to
    /// its iterator; a replaying `.evicting` subscriber's greeting does not count), and the
    /// most it held since it joined. `nil` once it has left or was evicted.
    ///
    /// The most it held is seen when it reads: between two reads what it holds only grows
    /// (or is dropped by its policy), so its largest value is the one its next read finds,
    /// or the one this query finds.
    @inlinable
    func backlog(of id: SubscriberID) -> (count: Int, highWaterMark: Int)? {
        guard let slotIndex = self.liveSlot(id), !self.isEvicted(slotIndex) else { return nil }
        let slot = self.slots[slotIndex]
        let count: Int
        if slot.readsPrivateQueue || slot.lane == Slot.noLane {
            count = self.privateQueues[UInt32(slotIndex)]?.held ?? 0
        } else {
            let lane = self.lanes[Int(slot.lane)]
            if slot.cursor >= lane.minCursor {
                count = self.tail - slot.cursor
            } else {
                switch lane.overflow {
                case .dropOldest:
                    count = self.tail - lane.minCursor  // its cell moved on; it reads from there
                case .freeze:
                    count = lane.frozen[slot.cursor]?.elements.count ?? 0
                case .evict, .park, .keepAll:
                    preconditionFailure("a live lossless subscriber behind the shared window")
                }
            }
        }
        return (count, Swift.max(count, slot.highWaterMark))
    }
}
