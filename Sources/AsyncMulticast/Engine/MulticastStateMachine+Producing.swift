// Producing: an element offered by the upstream or a subject (producers waiting for room: +Parking).

extension MulticastStateMachine {
    /// The outcome of a producer offering an element, on the hot path: no payload, so
    /// returning it through the lock costs nothing (the waiters to resume travel separately,
    /// see `elementProduced(_:epoch:respectingBounds:resuming:)`).
    @usableFromInline
    enum ProduceOutcome: UInt8, Sendable, Equatable {
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
    mutating func elementProduced<Resuming: HandOverList>(
        _ element: Element, epoch: UInt64, respectingBounds: Bool,
        resuming: inout Resuming
    ) -> ProduceOutcome where Resuming.Continuation == SubscriberContinuation {
        guard self.isCurrent(epoch: epoch) else { return .stop }
        let hasRoom = self.append(element, resuming: &resuming)
        return respectingBounds && !hasRoom ? .park : .proceed
    }

    /// `elementProduced(_:epoch:respectingBounds:resuming:)` on the producer's hot path
    /// (`MulticastStorage.offer`): the outcome with the follow-up in one byte (`Produced`),
    /// and the subscribers to resume only when some were waiting, so that the usual send,
    /// which wakes nobody, builds and releases no array. A sole `.bufferingNewest` lane with
    /// nobody waiting takes its own append: the element moves no cell, and the window slides
    /// by one (`slideSoleDroppingLane`).
    ///
    /// Always inlined: in the caller's registers the dropping lane's path costs a lossy send
    /// about 20 instructions less than behind a call.
    @inlinable
    @inline(__always)
    mutating func elementProduced(_ element: Element, epoch: UInt64, respectingBounds: Bool) -> Produced {
        if self.waiters.isEmpty, self.lanes.count == 1, case .dropOldest = self.lanes[0].overflow,
            self.isCurrent(epoch: epoch)
        {
            if !self.slideSoleDroppingLane(element) { self.appendToSoleDroppingLaneUnslid(element) }
            return .quiet(ProduceOutcome.proceed.rawValue | self.followUp.rawValue &<< 4)
        }
        guard self.waiters.isEmpty else {
            var resuming: [SubscriberContinuation] = []
            let outcome = self.elementProduced(
                element, epoch: epoch, respectingBounds: respectingBounds, resuming: &resuming)
            return .waking(outcome.rawValue | self.followUp.rawValue &<< 4, resuming)
        }
        var nobody = NobodyWaits<SubscriberContinuation>()
        let outcome = self.elementProduced(
            element, epoch: epoch, respectingBounds: respectingBounds, resuming: &nobody)
        return .quiet(outcome.rawValue | self.followUp.rawValue &<< 4)
    }

    /// What `elementProduced(_:epoch:respectingBounds:)` returns: the outcome's raw value in
    /// the low 4 bits and the `FollowUp`'s above them (one byte out of the lock), with the
    /// continuations of the subscribers that were waiting for the element, if any.
    @usableFromInline
    enum Produced {
        /// Nobody was waiting.
        case quiet(UInt8)
        /// The storage resumes these with the element, outside the lock.
        case waking(UInt8, [SubscriberContinuation])
    }

    /// Stores `element` for every subscriber and hands it straight to the waiting ones,
    /// whose continuations are appended to `resuming`. Returns `hasRoom` as it is afterwards.
    ///
    /// One pass over the lanes does everything per element (histogram, drops, the oldest
    /// position still needed, room): this is the producer's hot path.
    @inlinable
    @discardableResult
    mutating func append<Resuming: HandOverList>(_ element: Element, resuming: inout Resuming) -> Bool
    where Resuming.Continuation == SubscriberContinuation {
        // `_fastPath`: without it the compiler weighs both paths alike, and the shape of the
        // general pass below decides the registers of this one: 3 instructions an element
        // more (callgrind, `compare --instructions`) than the one-lane path needs.
        if _fastPath(self.lanes.count == 1 && self.lanes[0].isLossless) {
            return self.appendToSoleLosslessLane(element, resuming: &resuming)
        }
        if self.lanes.count == 1, case .dropOldest = self.lanes[0].overflow {
            return self.appendToSoleDroppingLane(element, resuming: &resuming)
        }
        let position = self.tail
        let newTail = position + 1
        var needed = self.replayCount > 0
        var keepFrom = Swift.max(newTail - self.replayCount, self.replayFloor)
        var hasRoom = true
        var evictedAny = false

        // `.freeze` lanes first: freezing a full cell and feeding the private queues reach
        // beyond the lane (the shared elements, the queues).
        for laneIndex in self.lanes.indices {
            switch self.lanes[laneIndex].overflow {
            case .freeze(let keep):
                guard self.lanes[laneIndex].members > 0 else { continue }
                self.freezeFullCell(lane: laneIndex, keep: keep, appending: position)
                self.deliverToRoomList(element, lane: laneIndex, keep: keep)
            case .park, .evict, .dropOldest, .keepAll:
                continue
            }
        }
        // Then every lane's own bookkeeping, through one mutable access to the lanes (the
        // hot path: one uniqueness check instead of one per field written).
        let hasSoftLimits = self.hasSoftLimits
        var softLimited = false
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
                switch lanes[laneIndex].overflow {
                case .dropOldest:
                    // Members now holding `keep + 1` drop their oldest, lazily: `minCursor`
                    // says where they read from, and a cell moves only once it is far behind.
                    if newTail &- lanes[laneIndex].counts.startIndex > lanes[laneIndex].settleDistance {
                        lanes[laneIndex].settle()
                    }
                case .evict(let limit):
                    // Members that would now hold `limit + 1` are evicted: the cell goes.
                    let evicted = lanes[laneIndex].evicted
                    lanes[laneIndex].evictCells(before: newTail - limit, for: .hardLimit, heldAt: newTail - 1)
                    if lanes[laneIndex].evicted != evicted { evictedAny = true }
                    if hasSoftLimits { softLimited = true }  // applied after this pass
                case .park, .freeze, .keepAll:
                    break  // `.park`: the room check below; `.freeze`: done above
                }
                let minCursor = lanes[laneIndex].minCursor
                if !lanes[laneIndex].counts.isEmpty { needed = true }
                keepFrom = Swift.min(keepFrom, minCursor)
                if newTail - minCursor > lanes[laneIndex].roomLevel { hasRoom = false }
            }
        }

        // After the pass (an eviction: the trim recomputes).
        if softLimited, self.applySoftLimitsAfterThePass(newTail: newTail) { evictedAny = true }

        if needed || !self.elements.isEmpty {
            self.elements.append(element)
        } else {
            self.elements.rebase(to: newTail)
        }

        if !self.waiters.isEmpty { self.handOver(resuming: &resuming) }
        if evictedAny {
            self.evictionsHappened()
            self.trimElements()
        } else {
            self.trimElements(before: keepFrom)  // what `trimElements()` would do, with that minimum
        }
        assert(hasRoom == self.hasRoom, "append's room check disagrees with hasRoom")
        return hasRoom
    }

    /// `append` when there is exactly one lane and it drops nothing (`Lane.isLossless`:
    /// `.park`, `.evict`, `.keepAll`): what the general pass does for such a lane, without
    /// the pass. The common case (every subscriber uses the sequence's policy), so the
    /// producer's cost per element is this.
    @inlinable
    @inline(__always)
    mutating func appendToSoleLosslessLane<Resuming: HandOverList>(_ element: Element, resuming: inout Resuming) -> Bool
    where Resuming.Continuation == SubscriberContinuation {
        let newTail = self.tail + 1
        self.lanes[0].elementAppended(at: self.tail)
        switch self.lanes[0].overflow {
        case .evict(let limit):
            // Members that would now hold `limit + 1` are evicted (the whole cell).
            let evicted = self.lanes[0].evicted
            self.lanes[0].evictCells(before: newTail - limit, for: .hardLimit, heldAt: newTail - 1)
            var evictedAny = self.lanes[0].evicted != evicted
            if let soft = self.lanes[0].softLimit, self.applySoleSoftLimit(soft, newTail: newTail) {
                evictedAny = true
            }
            if evictedAny {
                return self.appendedToSoleLaneAfterEvictions(element, newTail: newTail, resuming: &resuming)
            }
        case .park, .keepAll:
            break  // `.park`: the room check below
        case .dropOldest, .freeze:
            assertionFailure("a lane that drops takes the general pass")
        }
        // A lossless lane's `minCursor` is its histogram's start.
        return self.appendedToSoleLane(
            element, newTail: newTail, laneStart: self.lanes[0].counts.startIndex, resuming: &resuming)
    }

    /// `append` when there is exactly one lane and it is a `.dropOldest` one (every
    /// subscriber of a `.bufferingNewest` subject, say): what the general pass does for it,
    /// without the pass. Its members drop lazily (`Lane.minCursor`): the element moves no
    /// cell, unless the oldest one has fallen `settleDistance` behind.
    @inlinable
    mutating func appendToSoleDroppingLane<Resuming: HandOverList>(_ element: Element, resuming: inout Resuming) -> Bool
    where Resuming.Continuation == SubscriberContinuation {
        guard self.slideSoleDroppingLane(element) else {
            return self.appendedToSoleLane(
                element, newTail: self.tail &+ 1, laneStart: self.lanes[0].minCursor, resuming: &resuming)
        }
        if !self.waiters.isEmpty { self.handOver(resuming: &resuming) }
        assert(self.hasRoom, "a dropping lane never lacks room")
        return true
    }

    /// The sole `.dropOldest` lane's part of appending `element` (its histogram follows the
    /// tail, its oldest cell settles once far behind), then, in the usual step once the
    /// window is full, the element itself: the stored window slides by one. Returns `false`
    /// if the element is not stored yet (the window is not full, or a replay window or a
    /// floor holds more): `appendedToSoleLane` stores it. The waiting members are not
    /// handed it (the caller does).
    @inlinable
    @inline(__always)
    mutating func slideSoleDroppingLane(_ element: Element) -> Bool {
        let position = self.tail
        let newTail = position &+ 1
        self.lanes[0].elementAppended(at: position)
        var oldest = self.lanes[0].counts.startIndex
        if newTail &- oldest > self.lanes[0].settleDistance {
            self.lanes[0].settle()
            oldest = self.lanes[0].counts.startIndex
        }
        // `Lane.minCursor`, from the oldest cell read once.
        let laneStart = Swift.max(oldest, newTail &- self.lanes[0].kept)
        let keepFrom = Swift.min(Swift.max(newTail &- self.replayCount, self.replayFloor), laneStart)
        guard keepFrom == self.elements.startIndex &+ 1, !self.elements.isEmpty else { return false }
        self.elements.appendRemovingFirst(element)
        return true
    }

    /// `elementProduced`'s sole `.dropOldest` lane when the window did not slide
    /// (`slideSoleDroppingLane` returned `false`): the element is stored and the window
    /// trimmed. Nobody waits. Out of line: only while the window fills.
    @inlinable
    @inline(never)
    mutating func appendToSoleDroppingLaneUnslid(_ element: Element) {
        var nobody = NobodyWaits<SubscriberContinuation>()
        self.appendedToSoleLane(
            element, newTail: self.tail &+ 1, laneStart: self.lanes[0].minCursor, resuming: &nobody)
    }

    /// The end of `appendToSoleLosslessLane`, once its lane's rule was applied: stores the
    /// element, hands it to the waiting members, trims, and says whether there is room.
    @inlinable
    @inline(__always)
    @discardableResult
    mutating func appendedToSoleLane<Resuming: HandOverList>(
        _ element: Element, newTail: Int, laneStart: Int, resuming: inout Resuming
    ) -> Bool where Resuming.Continuation == SubscriberContinuation {
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
    mutating func handOver<Resuming: HandOverList>(resuming: inout Resuming)
    where Resuming.Continuation == SubscriberContinuation {
        let tail = self.tail
        resuming.reserveCapacity(self.waiters.count)
        for waiter in self.waiters {
            self.slots[Int(waiter.slot)].cursor = tail
            self.slots[Int(waiter.slot)].waiterIndex = -1
            resuming.append(waiter.continuation)
        }
        self.waiters.removeAll(keepingCapacity: true)
    }

    /// What `elementProducedIfRoom` did with a waiting-for-room sender's element. No payload,
    /// like `ProduceOutcome`.
    @usableFromInline
    enum RoomOutcome: UInt8, Sendable, Equatable {
        /// The element is in (the subscribers waiting for it are in `resuming`).
        case produced
        /// Nothing changed: a bounded subscriber is full, or a sender waits before this one.
        /// The sender waits for room (`senderParked`).
        case noRoom
        /// The element was not taken: the subject has completed (or the epoch is stale).
        case stop
    }

    /// A subject's `send(waitingForRoom:)` offered `element`: it is produced only if every
    /// bounded subscriber has room and no sender is waiting for room before it; otherwise
    /// nothing changes (`.noRoom`: the sender waits, see `senderParked`).
    @inlinable
    mutating func elementProducedIfRoom(
        _ element: Element, epoch: UInt64, resuming: inout [SubscriberContinuation]
    ) -> RoomOutcome {
        guard self.isCurrent(epoch: epoch) else { return .stop }
        guard self.hasRoom, self.parkedProducers.isEmpty else { return .noRoom }
        let outcome = self.elementProduced(element, epoch: epoch, respectingBounds: false, resuming: &resuming)
        return outcome == .stop ? .stop : .produced
    }

    /// The most recently produced element, if the shared buffer still holds it (it always
    /// does with a replay window).
    @inlinable
    var latestElement: Element? {
        self.elements.isEmpty ? nil : self.elements[self.tail - 1]
    }

    /// A current-value subject's update: `transform(latest)` is produced as a synchronous
    /// `send` would (`elementProduced`, past every bound), in the same transition that read
    /// `latest`, so that no other element goes in between. Returns the element produced, or
    /// `nil` (nothing produced) without a latest element or once completed; the subscribers
    /// waiting for it are appended to `resuming`.
    @inlinable
    mutating func latestElementUpdated(
        by transform: (Element) -> Element, resuming: inout [SubscriberContinuation]
    ) -> Element? {
        guard let latest = self.latestElement else { return nil }
        let element = transform(latest)
        let outcome = self.elementProduced(
            element, epoch: Self.pushEpoch, respectingBounds: false, resuming: &resuming)
        return outcome == .proceed ? element : nil
    }

    /// The epoch of a push-fed machine (a subject): there is only one, running from the start.
    @inlinable
    static var pushEpoch: UInt64 { 0 }
}
