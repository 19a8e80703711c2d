// Lanes: one per buffering policy in use. Each keeps a histogram of its members' cursors, the
// `.bufferingOldest` frozen cells and private queues (PrivateQueue.swift), and the room
// rules. All the index arithmetic of the shared buffer lives here.

extension MulticastStateMachine {
    @usableFromInline
    struct Lane: Sendable {
        /// The lane's identity: one lane per policy in use.
        @usableFromInline
        let policy: SharedBufferingPolicy
        /// What `policy` does when a member would hold too much: every decision that depends
        /// on the policy switches on this.
        @usableFromInline
        let overflow: Overflow
        @usableFromInline
        var members = 0
        /// `counts[p]`: members whose cursor is `p`, for `p` in `minCursor..<tail` (see
        /// `CursorHistogram`). Invariant: `counts.endIndex == tail`.
        @usableFromInline
        var counts: CursorHistogram
        /// Attached members whose cursor is `tail`, waiting ones included.
        @usableFromInline
        var atTail = 0
        /// Members suspended in `next()` (all of them have cursor `tail`).
        @usableFromInline
        var waiting = 0
        /// `.freeze`: frozen cells by the cursor their members still hold.
        @usableFromInline
        var frozen: [Int: FrozenGroup] = [:]
        /// `.freeze`: members whose private queue has room.
        @usableFromInline
        var roomList: [UInt32] = []
        /// `.evict`: members evicted that have not noticed yet. They left the histogram when
        /// they were evicted; their stored cursor is below `minCursor`.
        @usableFromInline
        var evicted = 0
        /// `.evict` with a soft limit of `count` elements, while some member holds more than
        /// that: `softDeadlines[p]` is when members whose cursor is `p` have held more than
        /// `count` for the soft limit's duration, for `p` from at most `minCursor` (trimmed
        /// lazily) to `tail - count` (excluded). Written when the element at `p + count` is
        /// appended (that is when a member at `p` went past `count`): one clock reading per
        /// element, only while a member is past the soft limit. Empty otherwise.
        @usableFromInline
        var softDeadlines = IndexedRing<Duration>()
        /// `.evict`: why the members not yet gone were evicted, oldest first (see
        /// `EvictionRecord`).
        @usableFromInline
        var evictions: [EvictionRecord] = []

        @inlinable
        init(policy: SharedBufferingPolicy, tail: Int) {
            let overflow = Overflow(policy)
            self.policy = policy
            self.overflow = overflow
            self.counts = CursorHistogram(startIndex: tail)
            // The numbers read for every element, derived once (see each one's docs).
            switch overflow {
            case .park(let bound):
                (self.bound, self.isLossless, self.batchLimit) = (bound, true, Swift.min(bound / 2, Self.maxBatch))
            case .evict(let limit):
                (self.bound, self.isLossless, self.batchLimit) = (.max, true, Swift.min(limit / 2, Self.maxBatch))
            case .keepAll:
                (self.bound, self.isLossless, self.batchLimit) = (.max, true, Self.maxBatch)
            case .dropOldest(let keep):
                (self.bound, self.isLossless, self.batchLimit) = (.max, false, Swift.min(keep / 2, Self.maxBatch))
            case .freeze:
                (self.bound, self.isLossless, self.batchLimit) = (.max, false, 0)
            }
            if case .dropOldest(let keep) = overflow {
                // Saturating: a limit past `Int.max / 2` (`.bufferingNewest(.max)`) never settles.
                let (distance, overflowed) = keep.addingReportingOverflow(Swift.max(keep, Self.settleSlack))
                (self.kept, self.settleDistance) = (keep, overflowed ? .max : distance)
            } else {
                (self.kept, self.settleDistance) = (.max, .max)
            }
        }

        /// Derived from `overflow`: `.dropOldest(keep)`'s `keep`, `Int.max` for the other
        /// rules. A `.dropOldest` member holds at most `keep`: it reads from `tail - keep` at
        /// the earliest, wherever its histogram cell still is (`minCursor`).
        @usableFromInline
        let kept: Int
        /// Derived from `overflow`: `.dropOldest` only (`Int.max` otherwise). Once the oldest
        /// histogram cell is this far behind the tail, `append` gathers the cells before the
        /// window start there (`settle()`), so that the stored counts stay within
        /// `2 * keep + settleSlack` positions. Saturates at `Int.max` (a limit past
        /// `Int.max / 2` then never settles in `append`: no cell falls that far behind).
        @usableFromInline
        let settleDistance: Int
        /// How far past its window start a `.dropOldest` lane's oldest cell may fall behind
        /// at least, before `append` gathers it: so that a small `keep` is not settled for
        /// every element.
        @inlinable
        static var settleSlack: Int { 64 }

        /// Derived from `overflow`: `.park(bound)`'s bound, a producer parks once a member
        /// holds this many; `Int.max` for the other rules, which never make it park, so that
        /// the room levels below need no test of the rule.
        @usableFromInline
        let bound: Int
        /// A producer may append while every member holds at most this many: `bound - 1`.
        @inlinable
        var roomLevel: Int { self.bound - 1 }
        /// A parked producer resumes once every member holds at most this many (see
        /// `hasRoomToResume`): `bound - max(1, bound / 2)`.
        @inlinable
        var resumeLevel: Int { self.bound - Swift.max(1, self.bound / 2) }
        /// Derived from `overflow`: no member ever loses an element (`.park`, `.evict`,
        /// `.keepAll`). Alone, such a lane takes `append`'s one-lane path
        /// (`appendToSoleLosslessLane`), which has no per-rule work but an eviction.
        @usableFromInline
        let isLossless: Bool

        /// Derived from `overflow`: how many ready elements beyond the one returned a member
        /// may take per lock acquisition (see `read`). Half the bound or limit, so the upstream
        /// can refill the other half while a subscriber works through its batch; `maxBatch`
        /// for `.keepAll`. A `.dropOldest(keep)` member takes up to `keep / 2`, which its rule
        /// may still drop: its iterator checks each against the tail before returning it
        /// (`HeldBatch.take`), as tokio's receivers check their position. `.freeze`
        /// takes none: its private queues are not positions in the shared buffer.
        @usableFromInline
        let batchLimit: Int
        /// The largest batch.
        @inlinable
        static var maxBatch: Int { 64 }

        /// The oldest position a member of this lane still reads (`tail` if none): its
        /// histogram's oldest cell, or for `.dropOldest(keep)` no earlier than `tail - keep`.
        ///
        /// `.dropOldest` lanes drop lazily, as tokio's broadcast receivers learn their lag:
        /// an element appended moves no cell. A cell before `tail - keep` has dropped what
        /// lies before that position, whatever the histogram still says; it is moved there
        /// (`settle()`) when one of its members reads or leaves, or when it has fallen
        /// `settleDistance` behind. So a send does no per-subscriber work, and the counts a
        /// reader sees are the ones moving every cell at every element would give.
        @inlinable
        var minCursor: Int { Swift.max(self.counts.startIndex, self.counts.endIndex &- self.kept) }

        /// A `.dropOldest` lane whose oldest cell lies before its window start
        /// (`minCursor`): `settle()` moves it there.
        @inlinable
        var isUnsettled: Bool {
            // The rule first: the other lanes (a leave's usual case) skip the histogram.
            self.kept != .max && self.counts.startIndex < self.counts.endIndex &- self.kept
        }

        /// Counts the members of a `.dropOldest` lane whose cells lie before the window
        /// start at the window start (at the tail, with `keep == 0`), where reading and
        /// leaving expect them (see `minCursor`).
        @inlinable
        mutating func settle() {
            let start = self.counts.endIndex &- self.kept
            let gathered = self.counts.removeAll(before: start)
            guard gathered > 0 else { return }
            if start == self.counts.endIndex {
                self.atTail &+= gathered
            } else {
                self.counts.add(gathered, at: start)
            }
        }

        /// The element at `position` (the old tail) was appended: the members caught up but
        /// not waiting now have it pending, the waiting ones take it at once (they stay at
        /// the tail).
        @inlinable
        @inline(__always)
        mutating func elementAppended(at position: Int) {
            assert(self.counts.endIndex == position, "lane histogram must end at the tail")
            self.counts.append(self.atTail &- self.waiting)
            self.atTail = self.waiting
            self.waiting = 0
        }

        /// Evicts every cell before `position`: `.evict` members that would hold too much,
        /// for `reason`, each holding `heldAt` minus its cursor (see `evictOldestCell`).
        @inlinable
        mutating func evictCells(before position: Int, for reason: SubscriberEviction.Reason, heldAt: Int) {
            while !self.counts.isEmpty && self.counts.startIndex < position {
                self.evictOldestCell(for: reason, heldAt: heldAt)
            }
        }

        /// Evicts the members of the oldest histogram cell: they leave the histogram (and stop
        /// holding the shared buffer) and learn it when they next read. Why, and what they
        /// held (`heldAt - cursor`), is kept for them in `evictions` until they learn it.
        @inlinable
        mutating func evictOldestCell(for reason: SubscriberEviction.Reason, heldAt: Int) {
            let position = self.counts.startIndex
            let members = self.counts.removeFirst().count
            guard members > 0 else { return }
            self.evicted += members
            self.recordEviction(at: position, members: members, for: reason, heldAt: heldAt)
        }
    }

    /// Whether every bounded subscriber has room for one more element, i.e. whether a
    /// producer may append without waiting. The loop takes the lanes, not the machine,
    /// which a call copies whole (a `memcpy` at every park, `compare --instructions`).
    @inlinable @inline(__always)
    var hasRoom: Bool { Self.hasRoom(in: self.lanes, tail: self.tail) }

    /// Whether a *parked* producer may go on: every bounded subscriber is down to its
    /// lane's `resumeLevel` (half the bound). A producer parks at the bound and resumes at
    /// half of it, like a high/low watermark pair: one wake-up then buys `bound / 2`
    /// elements instead of one, and a wake-up costs far more than an element. Liveness is
    /// unaffected: a subscriber above the level has elements to read.
    @inlinable @inline(__always)
    var hasRoomToResume: Bool { Self.hasRoomToResume(in: self.lanes, tail: self.tail) }

    /// `hasRoom`. Spelled out rather than through a key path: this runs at every park and
    /// unpark.
    @inlinable
    static func hasRoom(in lanes: [Lane], tail: Int) -> Bool {
        for lane in lanes where lane.members > 0 && tail - lane.counts.startIndex > lane.roomLevel { return false }
        return true
    }

    /// `hasRoomToResume`.
    @inlinable
    static func hasRoomToResume(in lanes: [Lane], tail: Int) -> Bool {
        for lane in lanes where lane.members > 0 && tail - lane.counts.startIndex > lane.resumeLevel { return false }
        return true
    }

    /// The lane of `policy`, created if no live subscriber uses it. A lane exists exactly
    /// while it has members (`removeLaneIfEmpty`), so the producer's per-element pass costs
    /// as many steps as there are distinct policies among the live subscribers.
    @inlinable
    mutating func laneIndex(for policy: SharedBufferingPolicy) -> Int {
        if let index = self.lanes.firstIndex(where: { $0.policy == policy }) {
            return index
        }
        precondition(self.lanes.count < Slot.maxLanes, "buffering: over \(Slot.maxLanes - 1) policies in use at once")
        if case .evicting(_, _?) = policy { self.hasSoftLimits = true }
        self.lanes.append(Lane(policy: policy, tail: self.tail))
        return self.lanes.count - 1
    }

    /// Removes lane `laneIndex` if its last member left: the last lane takes its index, and the
    /// slots of that lane's members are renumbered (a scan of the slots, on this cold path
    /// only, so that reading never pays an indirection).
    @inlinable
    mutating func removeLaneIfEmpty(_ laneIndex: Int) {
        guard self.lanes[laneIndex].members == 0 else { return }
        let last = self.lanes.count - 1
        if laneIndex != last {
            self.lanes.swapAt(laneIndex, last)
            for index in self.slots.indices
            where self.slots[index].isLive && self.slots[index].lane == UInt32(last) {
                self.slots[index].lane = UInt32(laneIndex)
            }
        }
        self.lanes.removeLast()
    }

    /// Moves an attached subscriber's cursor `count` positions forward (it has received the
    /// elements there), keeping the lane histogram and the shared window in step.
    @inlinable
    mutating func commit(_ count: Int, slot slotIndex: Int, lane laneIndex: Int) {
        let position = self.slots[slotIndex].cursor
        let next = position + count
        precondition(next <= self.tail, "committed past the tail")
        self.slots[slotIndex].cursor = next
        let wasOldest = position == self.lanes[laneIndex].minCursor
        if next == self.tail {
            self.lanes[laneIndex].counts.subtract(1, at: position)
            self.lanes[laneIndex].atTail += 1
        } else {
            self.lanes[laneIndex].counts.moveOne(from: position, to: next)
        }
        if wasOldest {
            self.trimElements()
        }
    }

    @inlinable
    mutating func removeFromRoomList(_ key: UInt32, lane laneIndex: Int) {
        guard let index = self.privateQueues[key]?.roomIndex, index >= 0 else { return }
        let last = self.lanes[laneIndex].roomList.removeLast()
        if last != key {
            self.lanes[laneIndex].roomList[index] = last
            self.privateQueues[last]!.roomIndex = index
        }
        self.privateQueues[key]!.roomIndex = -1
    }

    /// Drops stored elements nobody will read again (outside the replay window).
    @inlinable
    mutating func trimElements() {
        var keepFrom = self.replayStart
        for lane in self.lanes where lane.minCursor < keepFrom {
            keepFrom = lane.minCursor
        }
        self.trimElements(before: keepFrom)
    }

    /// Drops the stored elements before `position` (`append` computes it on its own pass).
    @inlinable
    mutating func trimElements(before position: Int) {
        if self.elements.startIndex < position {
            self.elements.removeFirst(Swift.min(position - self.elements.startIndex, self.elements.count))
        }
    }

    /// Takes subscriber `slotIndex` (not waiting) out of its lane: its histogram unit, frozen group
    /// or private queue, and its membership; the lane goes if it was the last member.
    /// Afterwards the slot's `lane` is `Slot.noLane` and it holds no private queue.
    @inlinable
    mutating func leaveLane(_ slotIndex: Int) {
        let slot = self.slots[slotIndex]
        let laneIndex = Int(slot.lane)
        assert(slot.waiterIndex < 0, "a waiting subscriber leaves its lane")
        if self.lanes[laneIndex].isUnsettled { self.lanes[laneIndex].settle() }
        if slot.readsPrivateQueue {
            self.removeFromRoomList(UInt32(slotIndex), lane: laneIndex)
            self.privateQueues[UInt32(slotIndex)] = nil
            self.slots[slotIndex].readsPrivateQueue = false
        } else if slot.cursor < self.lanes[laneIndex].minCursor {
            switch self.lanes[laneIndex].overflow {
            case .dropOldest:
                // Its cell moved on without it: it is counted at the window start.
                self.decrementCount(at: self.lanes[laneIndex].minCursor, lane: laneIndex)
            case .freeze:
                let group = self.lanes[laneIndex].frozen[slot.cursor]!
                if group.members == 1 {
                    self.lanes[laneIndex].frozen[slot.cursor] = nil
                } else {
                    self.lanes[laneIndex].frozen[slot.cursor]!.members -= 1
                }
            case .evict:
                self.lanes[laneIndex].evicted -= 1
                self.evictedMembers -= 1
                self.lanes[laneIndex].evictedMemberLeft(cursor: slot.cursor)
            case .park, .keepAll:
                preconditionFailure("lossless subscriber behind the shared window")
            }
        } else {
            self.decrementCount(at: slot.cursor, lane: laneIndex)
        }
        if !self.greetings.isEmpty { self.greetings[UInt32(slotIndex)] = nil }
        self.lanes[laneIndex].members -= 1
        self.slots[slotIndex].lane = Slot.noLane
        self.removeLaneIfEmpty(laneIndex)
    }

    @inlinable
    mutating func decrementCount(at position: Int, lane laneIndex: Int) {
        if position == self.tail {
            self.lanes[laneIndex].atTail -= 1
        } else {
            let wasOldest = position == self.lanes[laneIndex].minCursor
            self.lanes[laneIndex].counts.subtract(1, at: position)
            if wasOldest {
                self.trimElements()
            }
        }
    }

    /// `.freeze(keep)`: the members holding `keep` elements cannot take the one being
    /// appended at `position`. Copy their `keep` pending elements once and let the cell stop
    /// pinning the shared buffer.
    @inlinable
    mutating func freezeFullCell(lane laneIndex: Int, keep: Int, appending position: Int) {
        let full = position - keep
        guard !self.lanes[laneIndex].counts.isEmpty, self.lanes[laneIndex].minCursor == full else { return }
        let members = self.lanes[laneIndex].counts.first!
        assert(members > 0, "histogram cells at the window start are positive")
        assert(self.lanes[laneIndex].frozen[full] == nil, "a cell freezes once")
        var copy: [Element] = []
        copy.reserveCapacity(keep)
        for p in full..<position { copy.append(self.elements[p]) }
        self.lanes[laneIndex].frozen[full] = FrozenGroup(elements: copy, members: members)
        self.lanes[laneIndex].counts.removeFirst()
    }

    /// `.freeze(keep)`: the element being appended goes to every private queue of the lane
    /// that holds fewer than `keep`; a queue that it fills leaves the room list.
    @inlinable
    mutating func deliverToRoomList(_ element: Element, lane laneIndex: Int, keep: Int) {
        var index = 0
        while index < self.lanes[laneIndex].roomList.count {
            let key = self.lanes[laneIndex].roomList[index]
            self.privateQueues[key]!.push(element, at: self.tail)
            if self.privateQueues[key]!.pending >= keep {
                self.removeFromRoomList(key, lane: laneIndex)  // swaps the last one into `index`
            } else {
                index += 1
            }
        }
    }
}
