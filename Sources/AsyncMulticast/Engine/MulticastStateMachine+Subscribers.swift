// The subscriber table: slots and their generations, joining, leaving, and the subscribers
// suspended in `next()`.

extension MulticastStateMachine {
    /// One subscriber's place, 24 bytes (an idle subscriber's memory is mostly this): the
    /// stored fields are packed (`lane` in 16 bits, the high-water mark in 32, two rare flags
    /// in one byte) behind accessors of the natural types.
    @usableFromInline
    struct Slot: Sendable {
        @usableFromInline
        var cursor = 0
        @usableFromInline
        var generation: UInt32 = 0
        /// Index into `waiters` while suspended in `next()`, otherwise -1.
        @usableFromInline
        var waiterIndex: Int32 = -1
        @usableFromInline
        var storedHighWaterMark: UInt32 = 0
        @usableFromInline
        var storedLane: UInt16 = 0
        @usableFromInline
        var isLive = false
        @usableFromInline
        var flags: UInt8 = 0

        /// Index into `lanes`, or `Slot.noLane` once the subscriber only drains what an
        /// ended multicast connection left it (see `connectionCancelled(epoch:)`).
        @inlinable
        var lane: UInt32 {
            get { UInt32(self.storedLane) }
            set { self.storedLane = UInt16(truncatingIfNeeded: newValue) }
        }

        /// The most elements it held when it read (see `backlog(of:)`); saturates at
        /// `UInt32.max`.
        @inlinable
        var highWaterMark: Int {
            get { Int(self.storedHighWaterMark) }
            set { self.storedHighWaterMark = UInt32(clamping: newValue) }
        }

        /// The subscriber reads its private queue, `privateQueues[slot]`: a `.bufferingOldest`
        /// overflow, or what an ended connection left it.
        @inlinable
        var readsPrivateQueue: Bool {
            get { self.flags & 1 != 0 }
            set { self.flags = newValue ? self.flags | 1 : self.flags & ~1 }
        }

        /// The subscriber's demand connects an idle upstream: it joined an autoconnecting
        /// multicast (`ConnectRule.onDemand`). Set when it joins; read when it must wait.
        @inlinable
        var connectsOnDemand: Bool {
            get { self.flags & 2 != 0 }
            set { self.flags = newValue ? self.flags | 2 : self.flags & ~2 }
        }

        /// The `lane` of a subscriber that belongs to no lane any more.
        @inlinable
        static var noLane: UInt32 { UInt32(UInt16.max) }

        /// How many lanes (distinct policies) a sequence may have: a lane index must fit
        /// `storedLane` below `noLane`.
        @inlinable
        static var maxLanes: Int { Int(UInt16.max) }

        @inlinable
        init() {}

        @inlinable
        init(cursor: Int, generation: UInt32, lane: UInt32, isLive: Bool, connectsOnDemand: Bool) {
            self.cursor = cursor
            self.generation = generation
            self.lane = lane
            self.isLive = isLive
            self.connectsOnDemand = connectsOnDemand
        }
    }

    @usableFromInline
    struct Waiter: Sendable {
        @usableFromInline
        var slot: UInt32
        /// The priority of the waiting task (`TaskPriority.rawValue`), which a starting
        /// upstream task is raised to (`upstreamTaskStarted(priority:)`). Beside `slot`, in
        /// what was padding: a waiter is still 16 bytes.
        @usableFromInline
        var priority: UInt8
        @usableFromInline
        var continuation: SubscriberContinuation

        @inlinable
        init(slot: UInt32, priority: UInt8, continuation: SubscriberContinuation) {
            self.slot = slot
            self.priority = priority
            self.continuation = continuation
        }
    }

    /// A subscriber joined: it receives the replay window, then every element appended from
    /// now on, subject to `policy` (the machine's policy if `nil`). Its `connectRule` is
    /// decided here, once: `.onDemand` is kept in its slot (`Slot.connectsOnDemand`), and
    /// `.atSubscriberCount(n)` connects an idle upstream if at least `n` subscribers are now
    /// present (the effects start it).
    @inlinable
    mutating func subscriberJoined(
        policy: SharedBufferingPolicy?, connectRule: ConnectRule
    ) -> (id: SubscriberID, effects: Effects) {
        let laneIndex = self.laneIndex(for: policy ?? self.defaultPolicy)
        let offered = self.tail - Swift.max(self.replayStart, self.elements.startIndex)
        let (id, _, effects) = self.subscriberJoined(lane: laneIndex, offered: offered, connectRule: connectRule)
        return (id, effects)
    }

    /// `subscriberJoined(policy:connectRule:)` once its lane is known and the history it is
    /// offered: the last `offered` elements (all stored, in the replay window), of which its
    /// lane's rule takes what it can hold. Returns the position of the first element it
    /// receives (`tail - offered` or later): `subscriberResumed(after:policy:connectRule:)`
    /// reports what lies before it as a gap.
    @inlinable
    @inline(__always)
    mutating func subscriberJoined(
        lane laneIndex: Int, offered: Int, connectRule: ConnectRule
    ) -> (id: SubscriberID, first: Int, effects: Effects) {
        var replay = offered
        // Replayed elements an evicting subscriber receives as a greeting of its own (rare:
        // no array is made or released on the usual path).
        var greetingCount = 0
        switch self.lanes[laneIndex].overflow {
        case .dropOldest(let keep), .freeze(let keep):
            // A dropping subscriber never holds more than `keep` (the lane invariant
            // `append` relies on), so it gets at most `keep` replayed elements: the newest,
            // whatever the rule, since a replay is about the latest values.
            replay = Swift.min(replay, keep)
        case .evict:
            // All of them, as a greeting of its own: they count against no limit.
            greetingCount = replay
            replay = 0
        case .park, .keepAll:
            break
        }
        let cursor = self.tail - replay

        let slotIndex: UInt32
        if let free = self.freeSlots.popLast() {
            slotIndex = free
            if !self.departedEvictions.isEmpty { self.departedEvictions[free] = nil }
        } else {
            precondition(self.slots.count < Int(UInt32.max), "too many subscribers")
            slotIndex = UInt32(self.slots.count)
            self.slots.append(Slot())
        }
        let generation = self.slots[Int(slotIndex)].generation
        self.slots[Int(slotIndex)] = Slot(
            cursor: cursor, generation: generation, lane: UInt32(laneIndex), isLive: true,
            connectsOnDemand: connectRule == .onDemand)

        if greetingCount > 0 {
            let start = self.tail - greetingCount
            self.greetings[slotIndex] = Greeting(elements: self.greetingCopy(from: start), start: start)
            self.lastGreetingSlot = slotIndex
        }
        self.lanes[laneIndex].members += 1
        if cursor == self.tail {
            self.lanes[laneIndex].atTail += 1
        } else {
            self.lanes[laneIndex].counts.add(1, at: cursor)
        }
        self.subscriberCount += 1

        if case .lingering(let epoch) = self.upstream {
            // Back inside the keep-alive window: continue the same iteration. The timer
            // task stays: when it wakes it finds the upstream running and ends.
            self.upstream = .running(epoch: epoch)
        }
        var effects = Effects()
        if case .atSubscriberCount(let minimum) = connectRule, self.subscriberCount >= minimum,
            case .idle = self.upstream
        {
            effects = self.connectRequested().effects
        }
        self.noticing(&effects)
        return (SubscriberID(slot: slotIndex, generation: generation), self.tail - replay - greetingCount, effects)
    }

    /// The stored elements from `start` to the tail, for a greeting: the previous copy if it
    /// holds the same ones (subscribers joining at one position share one array).
    @inlinable
    func greetingCopy(from start: Int) -> [Element] {
        // Positions are absolute and an element's never changes: the same range is the
        // same elements, whoever holds the slot now.
        if let slot = self.lastGreetingSlot, let last = self.greetings[slot], last.start == start,
            last.elements.count == self.tail - start
        {
            return last.elements
        }
        return (start..<self.tail).map { self.elements[$0] }
    }

    /// Members of an `.evicting` lane were just evicted: those still holding a greeting drop
    /// it now, as an evicted subscriber's buffer is released at once (they learn of the
    /// eviction when they next read). Rare: only while greetings are being read.
    @inlinable
    mutating func dropEvictedGreetings() {
        for (key, _) in self.greetings {
            let slot = self.slots[Int(key)]
            if slot.cursor < self.lanes[Int(slot.lane)].minCursor { self.greetings[key] = nil }
        }
    }

    @inlinable
    func liveSlot(_ id: SubscriberID) -> Int? {
        let index = Int(id.slot)
        guard index < self.slots.count else { return nil }
        let slot = self.slots[index]
        guard slot.isLive, slot.generation == id.generation else { return nil }
        return index
    }

    /// The lane of subscriber `id`, if it is registered and still on a lane (not draining
    /// what an ended connection left it, `Slot.noLane`).
    ///
    /// It takes the slots, not the machine, which a call copies whole (a `memcpy` per read of
    /// a subscriber that caught up, `compare --instructions`).
    @inlinable @inline(__always)
    func liveLane(of id: SubscriberID) -> Int? { Self.liveLane(of: id, in: self.slots) }

    /// `liveLane(of:)`.
    @inlinable
    static func liveLane(of id: SubscriberID, in slots: [Slot]) -> Int? {
        let index = Int(id.slot)
        guard index < slots.count, slots[index].isLive, slots[index].generation == id.generation,
            slots[index].lane != Slot.noLane
        else { return nil }
        return Int(slots[index].lane)
    }

    /// The subscriber leaves: its task was cancelled or its iterator was released.
    /// A suspended `next()` is resumed with `nil`. Leaving twice is harmless.
    ///
    /// `now`: the storage's clock, read before the lock if this storage times windows
    /// (`timesWindows`): the last subscriber leaving opens the keep-alive window, or stops the
    /// upstream and opens the replay cache's expiry window, at that instant.
    @inlinable
    mutating func subscriberLeft(_ id: SubscriberID, at now: Duration) -> Effects {
        var effects = Effects()
        guard let slotIndex = self.liveSlot(id) else { return effects }
        if let continuation = self.removeSubscriber(slotIndex) {
            effects.resumeSubscriber(continuation)
            effects.subscriberResult = .success(nil)
        }
        self.lastSubscriberWent(at: now, into: &effects)
        if effects.producers.isEmpty {
            self.releaseProducersIfRoom(into: &effects)
        }
        self.noticing(&effects)
        return effects
    }

    /// No subscriber is left (the last one left, or was evicted: `evictionsHappened(_:)`), at
    /// `now`: a running `.automatic` upstream stops, or lingers for the keep-alive window.
    /// Nothing otherwise.
    @inlinable
    mutating func lastSubscriberWent(at now: Duration, into effects: inout Effects) {
        guard self.subscriberCount == 0, self.mode == .automatic, case .running(let epoch) = self.upstream else {
            return
        }
        switch self.keepAlive {
        case .off:
            self.stopUpstream(epoch: epoch, into: &effects)
            self.openReplayExpiryWindow(at: now, into: &effects)
        case .window:
            self.upstream = .lingering(epoch: epoch)
            self.openWindow(at: now, into: &effects)
        case .forever:
            // Nothing will stop it: no timer.
            self.upstream = .lingering(epoch: epoch)
        }
    }

    /// Frees the subscriber's slot and its share of the bookkeeping. Returns its stored
    /// continuation if it was suspended (the caller decides what to resume it with).
    @discardableResult
    @inlinable
    mutating func removeSubscriber(_ slotIndex: Int) -> SubscriberContinuation? {
        var continuation: SubscriberContinuation?
        // An evicted subscriber stopped counting when it was evicted (`evictionsHappened`).
        // Tested without a call (which would copy the machine) unless its lane evicted someone.
        let lane = self.slots[slotIndex].lane
        let evictedHere = lane == Slot.noLane || self.lanes[Int(lane)].evicted > 0
        if !evictedHere || !self.isEvicted(slotIndex) {
            self.subscriberCount -= 1
            if !self.evictionWatchers.isEmpty { self.endEvictionWatch(slotIndex) }
        } else if let eviction = self.eviction(of: slotIndex) {
            // Kept for a `waitForEviction()` that asks after the leave, until the slot is reused.
            self.departedEvictions[UInt32(slotIndex)] = (self.slots[slotIndex].generation, eviction)
        }
        let waiterIndex = Int(self.slots[slotIndex].waiterIndex)
        if waiterIndex >= 0 {
            continuation = self.waiters[waiterIndex].continuation
            let last = self.waiters.removeLast()
            if waiterIndex < self.waiters.count {
                self.waiters[waiterIndex] = last
                self.slots[Int(last.slot)].waiterIndex = Int32(waiterIndex)
            }
            self.lanes[Int(self.slots[slotIndex].lane)].waiting -= 1
            self.slots[slotIndex].waiterIndex = -1
        }
        if self.slots[slotIndex].lane == Slot.noLane {
            self.privateQueues[UInt32(slotIndex)] = nil
        } else {
            self.leaveLane(slotIndex)
        }
        if !self.missedOnRejoin.isEmpty { self.missedOnRejoin[UInt32(slotIndex)] = nil }
        self.slots[slotIndex].isLive = false
        self.slots[slotIndex].readsPrivateQueue = false
        self.slots[slotIndex].generation &+= 1
        self.freeSlots.append(UInt32(slotIndex))
        return continuation
    }

    /// Ends every waiting subscriber (they are caught up, so nothing is buffered for them)
    /// with `result`: they leave and `effects` resumes them.
    @inlinable
    mutating func endWaiters(into effects: inout Effects, with result: Result<Element?, Failure>) {
        let waiting = self.waiters.map(\.slot)
        for slot in waiting {
            effects.resumeSubscriber(self.removeSubscriber(Int(slot))!)
        }
        effects.subscriberResult = result
    }
}
