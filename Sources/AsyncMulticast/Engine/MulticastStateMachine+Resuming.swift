// Resuming: a subscriber that joins after a position it has already seen (a reconnecting
// client's `Last-Event-ID`). Positions are the shared buffer's absolute positions: element k
// produced by this machine is position k, whatever upstream iteration produced it, since the
// numbering lives here (`tail`), in the machine the storage keeps for the sequence's lifetime,
// not in an upstream session. A restarted upstream goes on numbering from the tail; a reset or
// expired replay cache moves only the history's start (`replayFloor`).

extension MulticastStateMachine {
    /// What `subscriberResumed(after:policy:connectRule:)` decided, beside the subscriber.
    @usableFromInline
    struct Resumption: Sendable {
        @usableFromInline
        var id: SubscriberID
        /// The position of the first element the subscriber receives: the history from
        /// there, then what is produced next.
        @usableFromInline
        var first: Int
        /// Positions after the one it resumed after that it will never receive: the history
        /// no longer held them (or its policy cannot hold that many); empty when there is no
        /// gap. Always `after + 1 ..< first` or empty.
        @usableFromInline
        var gap: Range<Int>
        @usableFromInline
        var effects: Effects

        @inlinable
        init(id: SubscriberID, first: Int, gap: Range<Int>, effects: Effects) {
            self.id = id
            self.first = first
            self.gap = gap
            self.effects = effects
        }
    }

    /// The history a subscriber resuming now can be given: the stored replay window.
    @inlinable
    var historyStart: Int { Swift.max(self.replayStart, self.elements.startIndex) }

    /// A subscriber joined after `position` (`nil`: it has seen nothing, and joins as
    /// `subscriberJoined(policy:connectRule:)` does): it receives the history after
    /// `position`, then every element produced from now on, subject to `policy`. Decided in
    /// this one transition, so in one critical section with the join: no element produced
    /// between reading the history and joining can be missed or received twice.
    ///
    /// - The history still holds position + 1: it is offered everything from there.
    /// - It no longer does: it is offered the whole history, and the positions from
    ///   position + 1 to the history's start are its gap.
    /// - Its policy holds fewer than it is offered (`.bufferingNewest(n)`,
    ///   `.bufferingOldest(n)`): it receives the newest it can hold; the older ones join the gap.
    /// - `position` is at or past the newest element (a position of another sequence, or of
    ///   this one in another process): it joins at the tail, without a gap.
    @inlinable
    mutating func subscriberResumed(
        after position: Int?, policy: SharedBufferingPolicy?, connectRule: ConnectRule
    ) -> Resumption {
        let laneIndex = self.laneIndex(for: policy ?? self.defaultPolicy)
        let historyStart = self.historyStart
        guard let position else {
            let (id, first, effects) = self.subscriberJoined(
                lane: laneIndex, offered: self.tail - historyStart, connectRule: connectRule)
            return Resumption(id: id, first: first, gap: first..<first, effects: effects)
        }
        assert(position >= -1, "the public faces check the position")
        let wanted = position >= self.tail ? self.tail : position + 1
        let (id, first, effects) = self.subscriberJoined(
            lane: laneIndex, offered: self.tail - Swift.max(wanted, historyStart), connectRule: connectRule)
        return Resumption(id: id, first: first, gap: Swift.min(wanted, first)..<first, effects: effects)
    }
}
