// Parking: producers waiting for room, and a subject's senders waiting with their element,
// beside MulticastStateMachine+Producing.swift.

extension MulticastStateMachine {
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
    /// returned `.noRoom`) waits with `element`, behind the senders already waiting: the machine
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
