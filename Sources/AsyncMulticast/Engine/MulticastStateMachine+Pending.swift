// Pending: what a subscriber would still read if nothing more were produced (a connection's
// end hands it over as a private queue), beside MulticastStateMachine+Lanes.swift.

extension MulticastStateMachine {
    /// The elements subscriber `slotIndex` (not waiting) would still read, in order, if
    /// nothing more were produced: its private queue if it reads one, else its part of the
    /// shared buffer.
    @inlinable
    func pendingElements(of slotIndex: Int) -> [Element] {
        self.pending(of: slotIndex).elements
    }

    /// ``pendingElements(of:)``, and what the subscriber missed among them (`gaps`, for lag
    /// reports): `(index, missed)` where `index` counts the pending elements before the gap
    /// (all of them: before the end), oldest first. No gaps for lossless subscribers.
    @inlinable
    func pending(of slotIndex: Int) -> (elements: [Element], gaps: [(index: Int, missed: Int)]) {
        let pending = self.pendingAfterGreeting(of: slotIndex)
        guard let greeting = self.greetings[UInt32(slotIndex)] else { return pending }
        // An evicted subscriber has nothing left (its greeting goes when it learns it).
        let lane = self.lanes[Int(self.slots[slotIndex].lane)]
        if self.slots[slotIndex].cursor < lane.minCursor { return pending }
        return (Array(greeting.elements[greeting.next...]) + pending.elements, pending.gaps)
    }

    /// ``pending(of:)`` but for a greeting not read yet.
    @inlinable
    func pendingAfterGreeting(of slotIndex: Int) -> (elements: [Element], gaps: [(index: Int, missed: Int)]) {
        let slot = self.slots[slotIndex]
        if slot.readsPrivateQueue {
            // A private queue (a `.bufferingOldest` overflow): its own gaps, then what it had
            // no room for since its last queued element.
            let queue = self.privateQueues[UInt32(slotIndex)]!
            var gaps = queue.gaps.map { (index: $0.index - queue.popped, missed: $0.missed) }
            if self.tail > queue.nextPosition { gaps.append((queue.pending, self.tail - queue.nextPosition)) }
            return (queue.remaining, gaps)
        }
        let lane = self.lanes[Int(slot.lane)]
        guard slot.cursor < lane.minCursor else {
            return ((slot.cursor..<self.tail).map { self.elements[$0] }, [])
        }
        switch lane.overflow {
        case .freeze:
            // A frozen cell: its oldest elements, then everything since was missed.
            let frozen = lane.frozen[slot.cursor]!.elements
            let missed = self.tail - (slot.cursor + frozen.count)
            return (frozen, missed > 0 ? [(frozen.count, missed)] : [])
        case .evict:
            return ([], [])
        case .dropOldest:
            // Moved forward while it was not looking: the gap comes first.
            let elements = (lane.minCursor..<self.tail).map { self.elements[$0] }
            return (elements, [(0, lane.minCursor - slot.cursor)])
        case .park, .keepAll:
            preconditionFailure("lossless subscriber behind the shared window")
        }
    }
}
