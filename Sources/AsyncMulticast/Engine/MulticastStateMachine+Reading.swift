// Reading: a subscriber's `next()`, first without suspending (`nextRequested`), then
// suspended (`subscriberWaiting`).

/// What a read tells a subscriber besides its element: what it missed just before it, and
/// whether its ending is an eviction. Lag-reporting iterators (`events(buffering:)`) turn
/// it into ``SharedEvent/missed(_:)`` and ``SharedEvent/evicted(_:)``; plain ones ignore `missed`.
@usableFromInline
struct ReadReport: Sendable {
    /// Set by the reader, not by the read: a gap is an event of its own (a lag-reporting
    /// iterator). A read that finds a gap then reports it alone (`missed`) and takes
    /// nothing: the element after the gap stays where its policy may still drop it, so the
    /// subscriber never holds more than its limit, and the counts are tokio's `Lagged(n)`:
    /// a later read that finds the next element dropped too reports a second gap.
    @usableFromInline
    var reportsGaps = false
    /// The read took every element produced so far: the subscriber's cursor is at the
    /// tail. Until another element is produced, its next read finds no element (it may
    /// still find the end, an error or an eviction).
    @usableFromInline
    var caughtUp = false
    /// Set by the storage, not by the machine: a subscriber that suspended in `wait`, and
    /// that may skip empty reads once resumed (`MulticastStateMachine.waiterSkipsEmptyReads(mayWaitForOffers:)`),
    /// has the producers' offer count here (`CatchUpSpin.offerCount`) as it was when the
    /// continuation was stored; 0 when it was not stored or does not skip. After it was
    /// resumed, `MulticastStorage.wait` leaves the count here if it was handed an element
    /// and that element's offer is the only one counted since (it is still at the tail, see
    /// `ElementBatch.offersWhenCaughtUp`), else 0. Declared here, after the two flags, so
    /// that it takes their word's padding: the report stays 24 bytes.
    @usableFromInline
    var offersWhenParked: UInt32 = 0
    /// Elements this subscriber's policy dropped just before the element read (with
    /// `reportsGaps`: the gap found, and nothing was read). Set by the reader too: what its
    /// policy dropped from the batch it held (`HeldBatch.take`), to which the read
    /// adds; with `reportsGaps`, a read given a count reports it as a gap.
    @usableFromInline
    var missed = 0
    /// Set by a read of a `.dropOldest(keep)` member that may take a batch: the batch's
    /// elements stay subject to the rule (`HeldBatch.take`). Its element at index
    /// `i` is dropped once the tail is past `batchExpiry + i` (the batch's first position
    /// plus `keep`, saturating). 0: the batch is the subscriber's for good (lossless lanes).
    /// Kept in `evictionCode`'s word, with its top bit clear: a `.dropOldest` read ends no
    /// subscriber by eviction, and a larger report cost every read (the join-leave cells).
    @inlinable
    var batchExpiry: Int {
        get { self.evictionCode & (1 << 63) == 0 ? Int(truncatingIfNeeded: self.evictionCode) : 0 }
        set { self.evictionCode = UInt64(truncatingIfNeeded: newValue) }
    }
    /// The read ended the subscriber because it had been evicted (`.evicting`): why, and
    /// what it held; no top bit when it was not. Packed into one word (a flag, the reason,
    /// and the backlog and high-water mark clamped to 31 bits each), which the iterator's
    /// cold path takes alone (`SharedIterator.endedByEviction(_:)`), so that its `next()`
    /// stays small. Without the top bit, the word is a `.dropOldest` read's `batchExpiry`.
    @usableFromInline
    var evictionCode: UInt64 = 0

    /// The eviction packed in `code` (`evictionCode`), if any.
    @inlinable
    static func eviction(from code: UInt64) -> SubscriberEviction? {
        guard code & (1 << 63) != 0 else { return nil }
        let mask: UInt64 = (1 << 31) - 1
        return SubscriberEviction(
            reason: code & (1 << 62) != 0 ? .softLimit : .hardLimit,
            backlog: Int((code >> 31) & mask), highWaterMark: Int(code & mask))
    }

    /// The read ended the subscriber because it had been evicted: why, and what it held
    /// (each count clamped to 2^31 - 1).
    @inlinable
    var eviction: SubscriberEviction? {
        get { Self.eviction(from: self.evictionCode) }
        set {
            guard let eviction = newValue else {
                self.evictionCode = 0
                return
            }
            let mask: UInt64 = (1 << 31) - 1
            self.evictionCode =
                1 << 63 | (eviction.reason == .softLimit ? 1 << 62 : 0)
                | Swift.min(UInt64(clamping: eviction.backlog), mask) << 31
                | Swift.min(UInt64(clamping: eviction.highWaterMark), mask)
        }
    }

    /// Whether the read ended the subscriber because it had been evicted.
    @inlinable
    var evicted: Bool { self.evictionCode & (1 << 63) != 0 }

    @inlinable
    init() {}
}

extension MulticastStateMachine {
    /// What a read found, in the words `NextAction` and the storage's `Refill` use too:
    /// `element`, a `gap` to report, `ended` (the subscriber has left: the end, the error, or
    /// `nil` after its cancellation or eviction), `nothingReady` (for the subscriber in `slot`).
    @usableFromInline
    enum ReadResult {
        case element(Element)
        case ended(Result<Element?, Failure>)
        case nothingReady(slot: Int)
        /// With `ReadReport.reportsGaps`: a gap of `report.missed` elements comes next.
        /// Nothing was taken; the subscriber did not leave.
        case gap
    }

    /// Takes the subscriber's next element if one is ready. Never suspends.
    ///
    /// Batching: besides the returned element, up to `batchLimit` further ready elements
    /// are copied into `batch` (in order), and the cursor moves past all of them. On a
    /// lossless lane they are from here on the subscriber's, like the returned one, and no
    /// longer count against its bound. So a subscriber never waits for room that its own
    /// unread batch takes up (it may be the producer that would have to make it), and a
    /// `.bounded(n)` subscriber holds at most `n` elements in the shared buffer plus at most
    /// `batchLimit` (half the bound, at most 64) in its iterator. On a `.dropOldest(keep)`
    /// lane the rule may still drop them: `report.batchExpiry` says from when, and the
    /// iterator checks each against the tail before it returns it (`HeldBatch.take`),
    /// so the subscriber receives and misses what reading them one by one would give.
    ///
    /// `report` receives what the subscriber missed just before the returned element (or
    /// before its end), and whether the end is an eviction.
    @inlinable
    mutating func read(_ id: SubscriberID, batch: inout [Element]?, report: inout ReadReport) -> ReadResult {
        guard let slotIndex = self.liveSlot(id) else { return .ended(.success(nil)) }
        assert(self.slots[slotIndex].waiterIndex < 0, "a subscriber reads while it is suspended")
        if !self.missedOnRejoin.isEmpty, let missed = self.missedOnRejoin.removeValue(forKey: UInt32(slotIndex)) {
            report.missed += missed
            if report.reportsGaps { return .gap }
        }
        if self.slots[slotIndex].readsPrivateQueue {
            return self.readPrivateQueue(slotIndex, report: &report)
        }
        let laneIndex = Int(self.slots[slotIndex].lane)
        let cursor = self.slots[slotIndex].cursor
        if cursor < self.lanes[laneIndex].minCursor {
            if self.lanes[laneIndex].isUnsettled { self.lanes[laneIndex].settle() }
            // The subscriber's cell was moved while it was not looking (see the type's docs).
            switch self.lanes[laneIndex].overflow {
            case .dropOldest:
                // Its cell moved on (see `append`): what it skipped was dropped.
                report.missed += self.lanes[laneIndex].minCursor - cursor
                self.slots[slotIndex].cursor = self.lanes[laneIndex].minCursor
                if report.reportsGaps { return .gap }
            case .freeze(let keep):
                guard var group = self.lanes[laneIndex].frozen.removeValue(forKey: cursor) else {
                    preconditionFailure("bufferingOldest subscriber behind the window without a frozen group")
                }
                self.privateQueues[UInt32(slotIndex)] = PrivateQueue(
                    queue: group.elements, nextPosition: cursor + keep)
                self.slots[slotIndex].readsPrivateQueue = true
                group.members -= 1
                if group.members > 0 { self.lanes[laneIndex].frozen[cursor] = group }
                return self.readPrivateQueue(slotIndex, report: &report)
            case .evict:
                report.eviction = self.eviction(of: slotIndex)
                self.removeSubscriber(slotIndex)
                return .ended(.success(nil))
            case .park, .keepAll:
                preconditionFailure("lossless subscriber behind the shared window")
            }
        }
        // What the reader's own batch dropped (`HeldBatch.take`), with no gap in the
        // buffer after it: reported alone all the same.
        if report.reportsGaps, report.missed > 0 { return .gap }

        if !self.greetings.isEmpty, let element = self.readGreeting(slotIndex, lane: laneIndex, batch: &batch) {
            report.caughtUp = false  // whatever it took: this read is not the usual one
            return .element(element)
        }
        let position = self.slots[slotIndex].cursor
        if position < self.tail {
            let held = self.tail - position
            if held > self.slots[slotIndex].highWaterMark { self.slots[slotIndex].highWaterMark = held }
            let element = self.elements[position]
            var taken = 1
            let limit = self.lanes[laneIndex].batchLimit
            if limit > 0, batch != nil {
                let extra = Swift.min(limit, self.tail - position - 1)
                if extra > 0 {
                    batch!.reserveCapacity(limit)
                    self.elements.copy(position + 1..<position + 1 + extra, appendingTo: &batch!)
                    taken += extra
                }
                let kept = self.lanes[laneIndex].kept
                if kept != .max {
                    // A `.dropOldest` batch: the reader keeps it apart, and until all of it
                    // may have been dropped, appends publish the tail for it.
                    let (expiry, overflowed) = (position + 1).addingReportingOverflow(kept)
                    report.batchExpiry = overflowed ? .max : expiry
                    if extra > 0 {
                        let (until, past) = report.batchExpiry.addingReportingOverflow(extra)
                        self.tailWatchedUntil = Swift.max(self.tailWatchedUntil, past ? .max : until)
                    }
                }
            }
            self.commit(taken, slot: slotIndex, lane: laneIndex)
            report.caughtUp = position + taken == self.tail
            return .element(element)
        }
        if let terminal = self.terminal {
            self.removeSubscriber(slotIndex)
            return .ended(terminal.result)
        }
        return .nothingReady(slot: slotIndex)
    }

    /// Reads the next element of the subscriber's greeting, if it has one; with batching,
    /// the batch takes what follows it: the rest of the greeting, then the shared buffer's.
    @inlinable
    mutating func readGreeting(_ slotIndex: Int, lane laneIndex: Int, batch: inout [Element]?) -> Element? {
        guard var greeting = self.greetings.removeValue(forKey: UInt32(slotIndex)) else { return nil }
        let element = greeting.elements[greeting.next]
        greeting.next += 1
        var room = batch == nil ? 0 : self.lanes[laneIndex].batchLimit
        let fromGreeting = Swift.min(room, greeting.remaining)
        if fromGreeting > 0 {
            batch!.append(contentsOf: greeting.elements[greeting.next..<greeting.next + fromGreeting])
            greeting.next += fromGreeting
            room -= fromGreeting
        }
        if greeting.remaining > 0 {
            self.greetings[UInt32(slotIndex)] = greeting
            return element
        }
        let position = self.slots[slotIndex].cursor
        let shared = Swift.min(room, self.tail - position)
        if shared > 0 {
            let held = self.tail - position
            if held > self.slots[slotIndex].highWaterMark { self.slots[slotIndex].highWaterMark = held }
            self.elements.copy(position..<position + shared, appendingTo: &batch!)
            self.commit(shared, slot: slotIndex, lane: laneIndex)
        }
        return element
    }

    /// Reads from the subscriber's private queue (`Slot.readsPrivateQueue`).
    @inlinable
    mutating func readPrivateQueue(_ slotIndex: Int, report: inout ReadReport) -> ReadResult {
        let key = UInt32(slotIndex)
        if self.privateQueues[key]!.endsWhenEmpty {
            // What an ended connection left it: no lane, nothing more will come.
            guard self.privateQueues[key]!.pending > 0 else {
                // A gap left after the last element is reported before the end.
                for gap in self.privateQueues[key]!.gaps { report.missed += gap.missed }
                if report.reportsGaps && report.missed > 0 {
                    self.privateQueues[key]!.gaps = []
                    return .gap
                }
                report.eviction = self.privateQueues[key]!.eviction
                self.removeSubscriber(slotIndex)
                return .ended(.success(nil))
            }
            if report.reportsGaps,
                self.privateQueues[key]!.takeGapBeforeHead(missed: &report.missed) || report.missed > 0
            {
                return .gap  // with what the batch its iterator held dropped
            }
            return .element(self.privateQueues[key]!.pop(missed: &report.missed))
        }
        if report.reportsGaps, self.privateQueues[key]!.takeGapBeforeHead(missed: &report.missed) || report.missed > 0 {
            return .gap  // with what the batch its iterator held dropped
        }
        let laneIndex = Int(self.slots[slotIndex].lane)
        let held = self.privateQueues[key]!.pending
        if held > self.slots[slotIndex].highWaterMark { self.slots[slotIndex].highWaterMark = held }
        let element = self.privateQueues[key]!.pop(missed: &report.missed)
        if self.privateQueues[key]!.pending == 0 {
            // Nothing private is left: rejoin the shared buffer at the tail. What was
            // produced since the last queued element was missed: the next read says so.
            let missed = self.tail - self.privateQueues[key]!.nextPosition
            if missed > 0 { self.missedOnRejoin[key, default: 0] += missed }
            self.removeFromRoomList(key, lane: laneIndex)
            self.privateQueues[key] = nil
            self.slots[slotIndex].readsPrivateQueue = false
            self.slots[slotIndex].cursor = self.tail
            self.lanes[laneIndex].atTail += 1
        } else if self.privateQueues[key]!.roomIndex < 0 {
            self.privateQueues[key]!.roomIndex = self.lanes[laneIndex].roomList.count
            self.lanes[laneIndex].roomList.append(key)
        }
        return .element(element)
    }

    /// The outcome of `nextRequested(_:)`, the non-suspending fast path of a subscriber's `next()`.
    @usableFromInline
    enum NextAction: Sendable {
        /// Return this element; resume `producers` with `true` (room was made).
        case element(Element, producers: [ProducerContinuation])
        /// Return this element, and perform `effects`: the read made room, and senders that
        /// were waiting for it had their elements appended (`releaseProducersIfRoom(into:)`).
        /// Indirect, and apart from `.element`: every read returns a `NextAction` through the
        /// lock, and `Effects` inline would make each of them several times larger.
        indirect case elementReleasingSenders(Element, Effects)
        /// Return this value (`nil` or an error): the subscriber has left.
        case ended(Result<Element?, Failure>)
        /// `ended`, when observers must hear of it (the count changed): perform `effects`
        /// (its `notices`). Indirect: rare.
        indirect case endedNoticed(Result<Element?, Failure>, Effects)
        /// Nothing ready: suspend and call `subscriberWaiting`.
        case nothingReady
        /// Nothing ready, and this demand started the upstream: perform `effects`
        /// (its `upstreamStart`), then suspend and call `subscriberWaiting`. Indirect: once
        /// per upstream iteration.
        indirect case nothingReadyStartingUpstream(Effects)
        /// With `ReadReport.reportsGaps`: report the gap of `report.missed` elements; nothing
        /// was taken.
        case gap
    }

    /// The fast path of a subscriber's `next()`: takes a ready element or terminal event
    /// without suspending; otherwise says to suspend (and whether to start the upstream:
    /// see `startUpstreamOnDemand(for:)`). Batching and the report: see
    /// `read(_:batch:report:)`.
    @inlinable
    mutating func nextRequested(_ id: SubscriberID, batch: inout [Element]?, report: inout ReadReport) -> NextAction {
        switch self.read(id, batch: &batch, report: &report) {
        case .element(let element):
            guard !self.parkedProducers.isEmpty else { return .element(element, producers: []) }
            var effects = Effects()
            self.releaseProducersIfRoom(into: &effects)
            guard effects.parkedElementsAppended > 0 else { return .element(element, producers: effects.producers) }
            report.caughtUp = false  // the senders' elements came after what it took
            self.noticing(&effects)
            return .elementReleasingSenders(element, effects)
        case .ended(let result):
            guard !self.isQuiet else { return .ended(result) }
            var effects = Effects()
            self.noticing(&effects)
            return effects.isEmpty ? .ended(result) : .endedNoticed(result, effects)
        case .nothingReady(let slotIndex):
            guard let epoch = self.startUpstreamOnDemand(for: slotIndex) else { return .nothingReady }
            var effects = Effects()
            self.upstreamStarted(epoch: epoch, into: &effects)
            self.noticing(&effects)
            return .nothingReadyStartingUpstream(effects)
        case .gap:
            return .gap
        }
    }

    /// What `subscriberWaiting` did with the continuation.
    @usableFromInline
    enum WaitOutcome {
        /// Stored until an element or the end arrives; raise the upstream task to
        /// `raiseUpstreamTo` if non-nil (`waitingSubscriberRaisesUpstream`). Otherwise
        /// nothing is to be done: the usual case, which builds no `Effects`.
        case stored(raiseUpstreamTo: UInt8?)
        /// Stored, and the subscriber's demand started the upstream: perform `effects` (its
        /// `upstreamStart`: the new task runs at every waiting subscriber's priority, this
        /// one's too).
        case storedStartingUpstream(Effects)
        /// Not stored: these effects resume it (an element arrived, it was cancelled, or
        /// the sequence ended in the meantime; or, with `ReadReport.reportsGaps`, it is
        /// resumed with `nil` while still subscribed, to report the gap in `report.missed`).
        case resumed(Effects)
    }

    /// The slow path: the subscriber suspended with `continuation`. Either it is resumed at
    /// once (an element arrived, it was cancelled, or the sequence ended in the meantime) or
    /// the continuation is stored until an element or terminal event arrives: the usual
    /// outcome, told apart so that it builds no `Effects`. `priority`: the waiting task's
    /// (`TaskPriority.rawValue`; 0 for a subject, which has no upstream to raise). `report`:
    /// see `read(_:batch:report:)`.
    @inlinable
    mutating func subscriberWaiting(
        _ id: SubscriberID, continuation: SubscriberContinuation, priority: UInt8, report: inout ReadReport
    ) -> WaitOutcome {
        var noBatch: [Element]? = nil
        switch self.read(id, batch: &noBatch, report: &report) {
        case .element(let element):
            var effects = Effects()
            effects.resumeSubscriber(continuation)
            effects.subscriberResult = .success(element)
            self.releaseProducersIfRoom(into: &effects)
            return .resumed(effects)
        case .ended(let result):
            var effects = Effects()
            effects.resumeSubscriber(continuation)
            effects.subscriberResult = result
            self.noticing(&effects)  // the subscriber left
            return .resumed(effects)
        case .gap:
            var effects = Effects()
            effects.resumeSubscriber(continuation)
            return .resumed(effects)
        case .nothingReady(let slotIndex):
            self.slots[slotIndex].waiterIndex = Int32(self.waiters.count)
            self.waiters.append(Waiter(slot: UInt32(slotIndex), priority: priority, continuation: continuation))
            self.lanes[Int(self.slots[slotIndex].lane)].waiting += 1
            guard let epoch = self.startUpstreamOnDemand(for: slotIndex) else {
                return .stored(raiseUpstreamTo: self.waitingSubscriberRaisesUpstream(to: priority))
            }
            var effects = Effects()
            self.upstreamStarted(epoch: epoch, into: &effects)
            self.noticing(&effects)
            return .storedStartingUpstream(effects)
        }
    }
}
