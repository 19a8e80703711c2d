// Evicting: what the `.evicting` policy adds to the machine besides its hard limit (which
// `append` applies): the soft limit (its deadlines: +SoftDeadlines), what a subscriber holds
// (its backlog and high-water mark, for sizing the limits), the greeting of a replaying
// subscriber, and the tasks waiting to learn of an eviction (`SharedSubscription.waitForEviction()`).

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

extension MulticastStateMachine {
    /// Why the members of a lane whose cursors are in `cursors` were evicted, kept until they
    /// have all left (`Lane.evictions`): each of them held `heldAt - cursor` elements then.
    /// One record stands for the cells one limit evicted at one tail, so an append or a
    /// deadline adds at most one per lane; it goes with its last member, so a lane holds no
    /// more records than members not yet gone.
    @usableFromInline
    struct EvictionRecord: Sendable {
        @usableFromInline
        var cursors: Range<Int>
        @usableFromInline
        let reason: SubscriberEviction.Reason
        @usableFromInline
        let heldAt: Int
        /// Its evicted members that have not left yet.
        @usableFromInline
        var members: Int

        @inlinable
        init(cursors: Range<Int>, reason: SubscriberEviction.Reason, heldAt: Int, members: Int) {
            self.cursors = cursors
            self.reason = reason
            self.heldAt = heldAt
            self.members = members
        }
    }

    /// The eviction of the live subscriber in `slotIndex`, if it was evicted and has not read
    /// since (`isEvicted(_:)`): the limit, what it held, and the most it ever held.
    @inlinable
    func eviction(of slotIndex: Int) -> SubscriberEviction? {
        let slot = self.slots[slotIndex]
        if slot.lane == Slot.noLane { return self.privateQueues[UInt32(slotIndex)]?.eviction }
        guard !slot.readsPrivateQueue, case .evict = self.lanes[Int(slot.lane)].overflow,
            slot.cursor < self.lanes[Int(slot.lane)].minCursor
        else { return nil }
        guard let record = self.lanes[Int(slot.lane)].evictions.last(where: { $0.cursors.contains(slot.cursor) })
        else { preconditionFailure("an evicted subscriber without a record of its eviction") }
        let backlog = record.heldAt - slot.cursor
        return SubscriberEviction(
            reason: record.reason, backlog: backlog, highWaterMark: Swift.max(backlog, slot.highWaterMark))
    }
}

extension MulticastStateMachine.Lane {
    /// The `members` of the cell at `position` were just evicted for `reason`, holding
    /// `heldAt - position` elements: recorded for them (`evictions`), in the previous record
    /// when the same limit evicted it at the same tail (the cells one eviction takes are
    /// consecutive, and no other record lies between them).
    @inlinable
    mutating func recordEviction(
        at position: Int, members: Int, for reason: SubscriberEviction.Reason, heldAt: Int
    ) {
        if let last = self.evictions.last, last.reason == reason, last.heldAt == heldAt {
            self.evictions[self.evictions.count - 1].cursors = last.cursors.lowerBound..<position + 1
            self.evictions[self.evictions.count - 1].members += members
        } else {
            self.evictions.append(
                MulticastStateMachine.EvictionRecord(
                    cursors: position..<position + 1, reason: reason, heldAt: heldAt, members: members))
        }
    }

    /// An evicted member whose cursor is `cursor` left: its record goes with the last of its
    /// members.
    @inlinable
    mutating func evictedMemberLeft(cursor: Int) {
        guard let index = self.evictions.lastIndex(where: { $0.cursors.contains(cursor) }) else {
            preconditionFailure("an evicted member without a record of its eviction")
        }
        self.evictions[index].members -= 1
        if self.evictions[index].members == 0 { self.evictions.remove(at: index) }
    }
}

extension MulticastStateMachine {
    /// The end of `appendToSoleLosslessLane` after its lane evicted members: the same, then
    /// the evictions are noticed, after the hand-over (until it, a waiting member's cell is
    /// already at the new tail while its cursor is not, and `isEvicted` would take it for
    /// evicted). Out of line, so that the usual append carries no flag across the hand-over
    /// (about 10 instructions of register spills an element, `compare --instructions`).
    @inlinable
    @inline(never)
    mutating func appendedToSoleLaneAfterEvictions<Resuming: HandOverList>(
        _ element: Element, newTail: Int, resuming: inout Resuming
    ) -> Bool where Resuming.Continuation == SubscriberContinuation {
        let hasRoom = self.appendedToSoleLane(
            element, newTail: newTail, laneStart: self.lanes[0].counts.startIndex, resuming: &resuming)
        self.evictionsHappened()
        return hasRoom
    }

    /// How many elements subscriber `id` holds (produced after it joined, not yet handed to
    /// its iterator; a replaying `.evicting` subscriber's greeting does not count), and the
    /// most it held since it joined. `nil` once it has left or was evicted (its eviction
    /// says what it held then: `eviction(of:)`).
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

/// What a transition of a `MulticastStateMachine` left for after its critical section, beside
/// its effects (`MulticastStateMachine.followUp`): set on cold paths only, so that the producer's hot path, which skips the end of its critical
/// section, pays one test of it (`MulticastStorage.offer`). Outside the generic machine: an `OptionSet`
/// has an `Element` of its own.
@usableFromInline
struct FollowUp: OptionSet, Sendable, Hashable {
    @usableFromInline
    let rawValue: UInt8

    @inlinable
    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Members were evicted: the observers of the count and the eviction watchers must
    /// hear it, at the end of the critical section (`takeNotices()`, which clears it).
    @inlinable
    static var tell: FollowUp { FollowUp(rawValue: 1) }

    /// The machine needs the time: a member went (further) past a soft limit, whose
    /// deadlines are measured from now, or the last subscriber of an `.automatic` upstream
    /// was evicted, which is a leave (it may open a window at now). The storage reads its
    /// clock after the lock and passes the reading in (`clockRead(at:through:)`, which clears it).
    /// No clock is read under the lock.
    @inlinable
    static var reading: FollowUp { FollowUp(rawValue: 2) }
}
