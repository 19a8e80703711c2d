// Producing: an element offered by the upstream or a subject, and producers waiting for room.

extension MulticastStateMachine {
    /// The outcome of a producer offering an element, on the hot path: no payload, so
    /// returning it through the lock costs nothing (the waiters to resume travel separately,
    /// see `elementProduced(_:epoch:respectingBounds:resuming:)`).
    @usableFromInline
    enum ProduceOutcome: Sendable, Equatable {
        /// The element is in; go on producing.
        case proceed
        /// The element is in; park (see `producerParked`) before producing the next one.
        case park
        /// The element was not taken (stale epoch or terminated). Stop producing.
        case stop
    }

    /// The upstream iteration `epoch` (a subject's: `pushEpoch`) produced `element`: it is
    /// stored for every subscriber, and the subscribers that were waiting for it are appended
    /// to `resuming` (the caller resumes them with it, outside the lock).
    ///
    /// With `respectingBounds` false (a subject's synchronous `send`) the element is taken
    /// even when a bounded subscriber is full, and the outcome is never `.park`.
    @inlinable
    mutating func elementProduced(
        _ element: Element, epoch: UInt64, respectingBounds: Bool,
        resuming: inout [SubscriberContinuation]
    ) -> ProduceOutcome {
        guard self.isCurrent(epoch: epoch) else { return .stop }
        let hasRoom = self.append(element, resuming: &resuming)
        return respectingBounds && !hasRoom ? .park : .proceed
    }

    /// Stores `element` for every subscriber and hands it straight to the waiting ones,
    /// whose continuations are appended to `resuming`. Returns `hasRoom` as it is afterwards.
    ///
    /// One pass over the lanes does everything per element (histogram, drops, the oldest
    /// position still needed, room): this is the producer's hot path.
    @inlinable
    @discardableResult
    mutating func append(_ element: Element, resuming: inout [SubscriberContinuation]) -> Bool {
        if self.lanes.count == 1 && self.lanes[0].dropLimit < 0 && self.lanes[0].freezeLimit == 0 {
            return self.appendToSoleLosslessLane(element, resuming: &resuming)
        }
        let position = self.tail
        let newTail = position + 1
        var needed = self.replayCount > 0
        var keepFrom = Swift.max(newTail - self.replayCount, self.replayFloor)
        var hasRoom = true

        // `.bufferingOldest(n)` lanes first: freezing a full cell and feeding the private
        // queues reach beyond the lane (the shared elements, the queues).
        for laneIndex in self.lanes.indices where self.lanes[laneIndex].freezeLimit > 0 {
            guard self.lanes[laneIndex].members > 0 else { continue }
            let freezeLimit = self.lanes[laneIndex].freezeLimit
            self.freezeFullCell(lane: laneIndex, limit: freezeLimit, appending: position)
            self.deliverToRoomList(element, lane: laneIndex, limit: freezeLimit)
        }
        // Then every lane's own bookkeeping, through one mutable access to the lanes (the
        // hot path: one uniqueness check instead of one per field written).
        self.lanes.withUnsafeMutableBufferPointer { lanes in
            for laneIndex in lanes.indices {
                guard lanes[laneIndex].members > 0 else {
                    // Nobody to count: the (empty) histogram just follows the tail.
                    if lanes[laneIndex].counts.isEmpty { lanes[laneIndex].counts.rebase(to: newTail) }
                    keepFrom = Swift.min(keepFrom, lanes[laneIndex].minCursor)
                    continue
                }
                // Waiting members take the element right away (below): they stay caught up.
                lanes[laneIndex].elementAppended(at: position)
                // Members now holding `dropLimit + 1` drop their oldest: the whole cell moves on.
                let dropLimit = lanes[laneIndex].dropLimit
                if dropLimit >= 0 {
                    let floor = newTail - dropLimit
                    while !lanes[laneIndex].counts.isEmpty && lanes[laneIndex].minCursor < floor {
                        lanes[laneIndex].advanceOldestCell(tail: newTail)
                    }
                }
                // Members that would now hold `evictLimit + 1` are evicted: the cell goes.
                let evictLimit = lanes[laneIndex].evictLimit
                if evictLimit > 0 { lanes[laneIndex].evictCells(before: newTail - evictLimit) }
                let minCursor = lanes[laneIndex].minCursor
                if !lanes[laneIndex].counts.isEmpty { needed = true }
                keepFrom = Swift.min(keepFrom, minCursor)
                if newTail - minCursor > lanes[laneIndex].roomLevel { hasRoom = false }
            }
        }

        if needed || !self.elements.isEmpty {
            self.elements.append(element)
        } else {
            self.elements.rebase(to: newTail)
        }

        if !self.waiters.isEmpty { self.handOver(resuming: &resuming) }
        // What `trimElements()` would do, with the minimum computed above.
        self.trimElements(before: keepFrom)
        assert(hasRoom == self.hasRoom, "append's room check disagrees with hasRoom")
        return hasRoom
    }

    /// `append` when there is exactly one lane and it drops nothing (`.bounded`,
    /// `.unbounded`, `.evicting`): what the general pass does for such a lane, without the
    /// pass. The common case (every subscriber uses the sequence's policy), so the
    /// producer's cost per element is this.
    @inlinable
    @inline(__always)
    mutating func appendToSoleLosslessLane(_ element: Element, resuming: inout [SubscriberContinuation]) -> Bool {
        let newTail = self.tail + 1
        self.lanes[0].elementAppended(at: self.tail)
        // Evicting: members that would now hold `evictLimit + 1` are evicted (the whole cell).
        let evictLimit = self.lanes[0].evictLimit
        if evictLimit > 0 { self.lanes[0].evictCells(before: newTail - evictLimit) }
        let laneStart = self.lanes[0].minCursor
        if laneStart < newTail || self.replayCount > 0 || !self.elements.isEmpty {
            self.elements.append(element)
        } else {
            self.elements.rebase(to: newTail)
        }
        if !self.waiters.isEmpty { self.handOver(resuming: &resuming) }
        self.trimElements(before: Swift.min(Swift.max(newTail - self.replayCount, self.replayFloor), laneStart))
        let hasRoom = newTail - laneStart <= self.lanes[0].roomLevel
        assert(hasRoom == self.hasRoom, "append's room check disagrees with hasRoom")
        return hasRoom
    }

    /// Hands the element just appended to every waiting subscriber: their continuations go
    /// to `resuming`, and they stay caught up.
    @inlinable
    mutating func handOver(resuming: inout [SubscriberContinuation]) {
        let tail = self.tail
        resuming.reserveCapacity(self.waiters.count)
        for waiter in self.waiters {
            self.slots[Int(waiter.slot)].cursor = tail
            self.slots[Int(waiter.slot)].waiterIndex = -1
            resuming.append(waiter.continuation)
        }
        self.waiters.removeAll(keepingCapacity: true)
    }

    /// A subject's `send(waitingForRoom:)` offered `element`: it is produced only if every
    /// bounded subscriber has room; otherwise nothing changes and the result is `nil` (the
    /// sender waits, see `producerParked`, and offers it again).
    @inlinable
    mutating func elementProducedIfRoom(
        _ element: Element, epoch: UInt64, resuming: inout [SubscriberContinuation]
    ) -> ProduceOutcome? {
        guard self.isCurrent(epoch: epoch) else { return .stop }
        guard self.hasRoom else { return nil }
        return self.elementProduced(element, epoch: epoch, respectingBounds: false, resuming: &resuming)
    }

    /// The most recently produced element, if the shared buffer still holds it (it always
    /// does with a replay window).
    @inlinable
    var latestElement: Element? {
        self.elements.isEmpty ? nil : self.elements[self.tail - 1]
    }

    /// What a producer of `epoch` that was told to `.park` should do now, without parking:
    /// `.stop` (stale or terminated), `.proceed` (room to resume, see `hasRoomToResume`)
    /// or `.park` (still full).
    @inlinable
    func producerStatus(epoch: UInt64) -> ProduceOutcome {
        if !self.isCurrent(epoch: epoch) { return .stop }
        return self.hasRoomToResume ? .proceed : .park
    }

    /// Parks a producer that was told to `.park` until there is room (resumed with `true`)
    /// or it must stop (`false`). Resumed at once if that is already decided.
    @inlinable
    mutating func producerParked(
        epoch: UInt64, token: UInt64, continuation: ProducerContinuation
    ) -> Effects {
        var effects = Effects()
        switch self.producerStatus(epoch: epoch) {
        case .stop:
            effects.producers = [continuation]
            effects.producerResult = false
        case .proceed:
            effects.producers = [continuation]
            effects.producerResult = true
        case .park:
            self.parkedProducers.append((token, continuation))
        }
        return effects
    }

    /// Removes a parked producer (its task was cancelled) and returns its continuation.
    @inlinable
    mutating func producerCancelled(token: UInt64) -> ProducerContinuation? {
        guard let index = self.parkedProducers.firstIndex(where: { $0.token == token }) else { return nil }
        return self.parkedProducers.remove(at: index).continuation
    }

    @inlinable
    mutating func takeProducersIfRoom() -> [ProducerContinuation] {
        guard !self.parkedProducers.isEmpty, self.hasRoomToResume else { return [] }
        defer { self.parkedProducers.removeAll() }
        return self.parkedProducers.map(\.continuation)
    }

    /// Hands every parked producer to `effects`, to be resumed with `result`.
    @inlinable
    mutating func releaseProducers(into effects: inout Effects, result: Bool) {
        effects.producers = self.parkedProducers.map(\.continuation)
        effects.producerResult = result
        self.parkedProducers.removeAll()
    }
}
