// Producing: an element offered by the upstream or a subject, and producers waiting for room.

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
        // `_fastPath`: without it the compiler weighs both paths alike, and the shape of the
        // general pass below decides the registers of this one: 3 instructions an element
        // more (callgrind, `compare --instructions`) than the one-lane path needs.
        if _fastPath(self.lanes.count == 1 && self.lanes[0].isLossless) {
            return self.appendToSoleLosslessLane(element, resuming: &resuming)
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
                case .dropOldest(let keep):
                    // Members now holding `keep + 1` drop their oldest: the whole cell moves on.
                    let floor = newTail - keep
                    while !lanes[laneIndex].counts.isEmpty && lanes[laneIndex].minCursor < floor {
                        lanes[laneIndex].advanceOldestCell(tail: newTail)
                    }
                case .evict(let limit):
                    // Members that would now hold `limit + 1` are evicted: the cell goes.
                    let evicted = lanes[laneIndex].evicted
                    lanes[laneIndex].evictCells(before: newTail - limit)
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
    mutating func appendToSoleLosslessLane(_ element: Element, resuming: inout [SubscriberContinuation]) -> Bool {
        let newTail = self.tail + 1
        self.lanes[0].elementAppended(at: self.tail)
        switch self.lanes[0].overflow {
        case .evict(let limit):
            // Members that would now hold `limit + 1` are evicted (the whole cell).
            let evicted = self.lanes[0].evicted
            self.lanes[0].evictCells(before: newTail - limit)
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
        return self.appendedToSoleLane(element, newTail: newTail, resuming: &resuming)
    }

    /// The end of `appendToSoleLosslessLane`, once its lane's rule was applied: stores the
    /// element, hands it to the waiting members, trims, and says whether there is room.
    @inlinable
    @inline(__always)
    mutating func appendedToSoleLane(
        _ element: Element, newTail: Int, resuming: inout [SubscriberContinuation]
    ) -> Bool {
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
    /// bounded subscriber has room and no sender is waiting for room before it; otherwise
    /// nothing changes and the result is `nil` (the sender waits, see `senderParked`).
    @inlinable
    mutating func elementProducedIfRoom(
        _ element: Element, epoch: UInt64, resuming: inout [SubscriberContinuation]
    ) -> ProduceOutcome? {
        guard self.isCurrent(epoch: epoch) else { return .stop }
        guard self.hasRoom, self.parkedProducers.isEmpty else { return nil }
        return self.elementProduced(element, epoch: epoch, respectingBounds: false, resuming: &resuming)
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

    /// What a producer of `epoch` that was told to `.park` should do now, without parking:
    /// `.stop` (stale or terminated), `.proceed` (room to resume, see `hasRoomToResume`)
    /// or `.park` (still full).
    @inlinable
    func producerStatus(epoch: UInt64) -> ProduceOutcome {
        if !self.isCurrent(epoch: epoch) { return .stop }
        return self.hasRoomToResume ? .proceed : .park
    }

    /// A producer waiting for room: an upstream iteration's, which parks after its element
    /// went in (`.park`), so `element` is `nil`; or a subject's sender, which parks with the
    /// element it waits to send, appended by the machine when its turn comes (see
    /// `releaseProducersIfRoom(into:)`). Resumed with `true` when it may go on (a sender: its
    /// element is in), `false` when it must stop (a sender: its element was not taken).
    @usableFromInline
    struct ParkedProducer: Sendable {
        @usableFromInline
        var token: UInt64
        @usableFromInline
        var continuation: ProducerContinuation
        @usableFromInline
        var element: Element?

        @inlinable
        init(token: UInt64, continuation: ProducerContinuation, element: Element?) {
            self.token = token
            self.continuation = continuation
            self.element = element
        }
    }

    /// Parks an upstream producer that was told to `.park` until there is room (resumed
    /// with `true`) or it must stop (`false`). Resumed at once if that is already decided.
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
            self.parkedProducers.append(ParkedProducer(token: token, continuation: continuation, element: nil))
        }
        return effects
    }

    /// The task of an upstream producer parked with `token` (`producerParked`) was
    /// cancelled: it stops waiting, and the effects resume it with `false`. Nothing happens
    /// if it is no longer parked (it was released).
    @inlinable
    mutating func producerCancelled(token: UInt64) -> Effects {
        var effects = Effects()
        guard let index = self.parkedProducers.firstIndex(where: { $0.token == token }) else { return effects }
        effects.producers = [self.parkedProducers.remove(at: index).continuation]
        effects.producerResult = false
        return effects
    }

    /// A producer or a sender about to park (`producerParked`, `senderParked`) found its task
    /// already cancelled: its cancellation handler ran before it parked and found nothing to
    /// unpark, so it does not park, and the effects resume it with `false` at once. (A
    /// sender's caller then sends its element itself.)
    @inlinable
    func parkingCancelled(_ continuation: ProducerContinuation) -> Effects {
        var effects = Effects()
        effects.producers = [continuation]
        effects.producerResult = false
        return effects
    }

    /// Whether the parked producers may go on now. An upstream's producer waits until every
    /// bounded subscriber is down to its resume level (`hasRoomToResume`): one wake-up then
    /// buys half a bound of elements. A subject's senders go in as soon as there is room for
    /// the first one (`hasRoom`), as a sender that finds room takes it: a subscriber that
    /// answers into its own subject holds what it has not read yet, so if it had to wait
    /// for the resume level, next to another full subscriber it could wait for itself.
    @inlinable
    var parkedMayGoOn: Bool {
        self.mode == .push ? self.hasRoom : self.hasRoomToResume
    }

    /// A subject's `send(waitingForRoom:)` that found no room (`elementProducedIfRoom`
    /// returned `nil`) waits with `element`, behind the senders already waiting: the machine
    /// appends it when its turn comes (`releaseProducersIfRoom(into:)`), and the effects of
    /// that transition resume the sender with `true`.
    ///
    /// Decided at once instead: after completion the sender is resumed with `false` (its
    /// element is ignored); if the room came back since it was refused and nobody waits
    /// before it, its element goes in now, as `elementProducedIfRoom` would now take it, and
    /// it is resumed with `true`.
    @inlinable
    mutating func senderParked(_ element: Element, token: UInt64, continuation: ProducerContinuation) -> Effects {
        assert(self.mode == .push, "only a subject's senders park with their element")
        var effects = Effects()
        if self.terminal != nil {
            effects.producers = [continuation]
            effects.producerResult = false
        } else if self.parkedProducers.isEmpty && self.hasRoom {
            self.appendForSender(element, into: &effects)
            effects.producers = [continuation]
            effects.producerResult = true
        } else {
            self.parkedProducers.append(ParkedProducer(token: token, continuation: continuation, element: element))
        }
        return effects
    }

    /// The task of a sender parked with its element (`senderParked`) was cancelled: it stops
    /// waiting, and its element goes in at once, past the bound, so that nothing is lost:
    /// ahead of the senders still waiting. The effects resume it with `true`. Nothing happens
    /// if it is no longer parked (it was released, or the subject completed).
    @inlinable
    mutating func senderCancelled(token: UInt64) -> Effects {
        var effects = Effects()
        guard let index = self.parkedProducers.firstIndex(where: { $0.token == token }) else { return effects }
        let sender = self.parkedProducers.remove(at: index)
        if let element = sender.element { self.appendForSender(element, into: &effects) }
        effects.producers = [sender.continuation]
        effects.producerResult = true
        return effects
    }

    /// Room was made (a subscriber read or left). Once the parked producers may go on
    /// (`parkedMayGoOn`), they go on in the order they parked, and `effects` resumes them
    /// with `true`: an upstream's producer produces its next element itself; a subject's
    /// sender has its element appended here, while there is room for it (`hasRoom`), so that
    /// the senders' elements go in in the order the senders began waiting, whichever of
    /// their tasks runs first. From the first sender that finds no room on, the senders stay
    /// parked, in order.
    ///
    /// Not on the producer's hot path: a read pays one `isEmpty` test when nobody is parked.
    @inlinable
    mutating func releaseProducersIfRoom(into effects: inout Effects) {
        guard !self.parkedProducers.isEmpty, self.parkedMayGoOn else { return }
        assert(effects.producers.isEmpty, "producers released twice by one transition")
        var hasRoom = true  // `parkedMayGoOn` implies it
        var released = 0
        for parked in self.parkedProducers {
            if let element = parked.element {
                guard hasRoom else { break }
                hasRoom = self.appendForSender(element, into: &effects)
            }
            effects.producers.append(parked.continuation)
            released += 1
        }
        effects.producerResult = true
        self.parkedProducers.removeFirst(released)
    }

    /// Appends a sender's `element` past every bound (it was admitted, or it gives up
    /// waiting); the waiting subscribers it reaches go to `effects.handedOver`. Returns
    /// `hasRoom` as it is afterwards.
    @inlinable
    @discardableResult
    mutating func appendForSender(_ element: Element, into effects: inout Effects) -> Bool {
        var resuming: [SubscriberContinuation] = []
        let hasRoom = self.append(element, resuming: &resuming)
        for continuation in resuming { effects.handedOver.append((continuation, element)) }
        effects.parkedElementsAppended += 1
        return hasRoom
    }

    /// Hands every parked producer to `effects`, to be resumed with `result` (`false`: the
    /// upstream stopped or ended; a sender's element is not taken).
    @inlinable
    mutating func releaseProducers(into effects: inout Effects, result: Bool) {
        effects.producers = self.parkedProducers.map(\.continuation)
        effects.producerResult = result
        self.parkedProducers.removeAll()
    }
}
