// The invariants listed at the top of MulticastStateMachine.swift, checked by code. The model
// tests call `invariantViolation()` after every transition; building with
// `-DASYNC_MULTICAST_INVARIANTS` makes `Lock` call `checkInvariants()` after every critical
// section, so that the real-task tests check them under real interleavings (.ci/run does).

/// State whose invariants `Lock` checks after every critical section when the library is
/// built with `-DASYNC_MULTICAST_INVARIANTS`.
@usableFromInline
protocol InvariantChecking {
    func checkInvariants()
}

extension MulticastStorage.State: InvariantChecking {
    @usableFromInline
    func checkInvariants() {
        self.machine.checkInvariants()
        // The machine decides whether a timer runs; the storage holds its task.
        // A timer task runs iff the machine holds a deadline (a window or a soft limit's).
        precondition(
            self.machine.timer.isRunning == (self.timerTask != nil),
            "MulticastStorage invariant broken: the machine and the storage disagree on the timer task")
        // The storage holds the task of the current iteration only.
        precondition(
            self.upstreamTask.map { self.machine.isCurrent(epoch: $0.epoch) } ?? true,
            "MulticastStorage invariant broken: the storage holds the task of an iteration that is not current")
        // Every critical section ends by telling whom the machine says must hear: nothing is
        // left for later.
        // (A producer's critical section that evicted someone leaves them to the next one, its
        // follow-up, `FollowUp.tell`.)
        precondition(
            (self.machine.evictionNotices.isEmpty || self.machine.followUp.contains(.tell))
                && (self.machine.terminal == nil || self.machine.completionObservers.isEmpty)
                && (!self.machine.isDrained || self.machine.drainObservers.isEmpty),
            "MulticastStorage invariant broken: observers left untold at the end of a critical section")
    }
}

extension MulticastStateMachine {
    /// Stops with a description of the first broken invariant (see the top of this file).
    @usableFromInline
    func checkInvariants() {
        if let violation = self.invariantViolation() {
            preconditionFailure("MulticastStateMachine invariant broken: \(violation)")
        }
    }

    /// The first broken invariant (see the top of this file), or `nil`.
    @usableFromInline
    func invariantViolation() -> String? {
        guard self.elements.endIndex == self.tail else { return "the buffer does not end at the tail" }

        var keepFrom = self.replayStart
        for lane in self.lanes { keepFrom = Swift.min(keepFrom, lane.minCursor) }
        // The subscription decides from the policy alone whether to keep a place for such
        // batches (`HeldBatchSlot`): it must agree with the lane.
        for lane in self.lanes where lane.holdsBatches != Lane.holdsBatches(lane.policy) {
            return "lane \(lane.policy) holds batches: \(lane.holdsBatches), its policy says otherwise"
        }

        guard self.elements.startIndex == Swift.max(keepFrom, 0) else {
            return "stored from \(self.elements.startIndex), needed from \(Swift.max(keepFrom, 0))"
        }

        for (slot, missed) in self.missedOnRejoin {
            guard Int(slot) < self.slots.count, self.slots[Int(slot)].isLive, missed > 0 else {
                return "a missed count kept for slot \(slot), which is not a live subscriber, or is \(missed)"
            }
        }

        for (key, greeting) in self.greetings {
            let slot = Int(key)
            guard slot < self.slots.count, self.slots[slot].isLive, self.slots[slot].lane != Slot.noLane,
                self.slots[slot].waiterIndex < 0, greeting.remaining > 0
            else { return "a greeting kept for slot \(slot): not live, off its lane, waiting, or used up" }
            guard case .evict = self.lanes[Int(self.slots[slot].lane)].overflow else {
                return "a greeting on a \(self.lanes[Int(self.slots[slot].lane)].policy) lane"
            }
            guard self.slots[slot].cursor >= self.lanes[Int(self.slots[slot].lane)].minCursor else {
                return "an evicted subscriber keeps its greeting"
            }
        }

        var membersByLane = [Int](repeating: 0, count: self.lanes.count)
        var waitingByLane = [Int](repeating: 0, count: self.lanes.count)
        var privateByLane = [Int](repeating: 0, count: self.lanes.count)
        var live = 0
        for (slotIndex, slot) in self.slots.enumerated() where slot.isLive {
            live += 1
            if slot.lane == Slot.noLane {
                guard slot.readsPrivateQueue && self.privateQueues[UInt32(slotIndex)]?.endsWhenEmpty == true else {
                    return "an ended connection's subscriber without its final queue"
                }
                guard slot.waiterIndex < 0 else { return "an ended connection's subscriber is waiting" }
                continue
            }
            let laneIndex = Int(slot.lane)
            guard laneIndex < self.lanes.count else { return "slot \(slotIndex) in a lane that does not exist" }
            membersByLane[laneIndex] += 1
            if slot.readsPrivateQueue {
                guard self.privateQueues[UInt32(slotIndex)]?.endsWhenEmpty == false else {
                    return "a subscriber in a lane reads a final queue"
                }
                privateByLane[laneIndex] += 1
            }
            if slot.waiterIndex >= 0 {
                waitingByLane[laneIndex] += 1
                guard
                    Int(slot.waiterIndex) < self.waiters.count
                        && self.waiters[Int(slot.waiterIndex)].slot == UInt32(slotIndex)
                else { return "slot \(slotIndex) and its waiter entry disagree" }
                guard slot.cursor == self.tail && !slot.readsPrivateQueue else {
                    return "a waiting subscriber is behind"
                }
            }
        }
        // An evicted subscriber stops counting when it is evicted, not when it learns it.
        let evictedLive = self.slots.indices.filter { self.slots[$0].isLive && self.isEvicted($0) }.count
        for slotIndex in self.slots.indices where self.slots[slotIndex].isLive && self.isEvicted(slotIndex) {
            let slot = self.slots[slotIndex]
            guard
                slot.lane == Slot.noLane
                    || self.lanes[Int(slot.lane)].evictions.contains(where: { $0.cursors.contains(slot.cursor) })
            else { return "evicted slot \(slotIndex) has no record of its eviction" }
        }
        guard self.evictedMembers == self.lanes.reduce(0, { $0 + $1.evicted }) else {
            return
                "\(self.evictedMembers) evicted members counted out, the lanes hold \(self.lanes.reduce(0, { $0 + $1.evicted }))"
        }
        guard live - evictedLive == self.subscriberCount else {
            return "\(live) live slots, \(evictedLive) of them evicted, subscriberCount \(self.subscriberCount)"
        }
        guard self.waiters.count == waitingByLane.reduce(0, +) else {
            return "\(self.waiters.count) waiters, \(waitingByLane.reduce(0, +)) waiting slots"
        }
        for waiter in self.waiters where waiter.priority > self.upstreamPriority {
            return "a subscriber waits at priority \(waiter.priority) above the upstream's \(self.upstreamPriority)"
        }
        for slot in self.departedEvictions.keys where self.slots[Int(slot)].isLive {
            return "slot \(slot) is live and holds a departed eviction"
        }
        for key in self.privateQueues.keys {
            guard self.slots[Int(key)].isLive && self.slots[Int(key)].readsPrivateQueue else {
                return "a private queue without its subscriber"
            }
        }

        var policies = Set<SharedBufferingPolicy>()
        for (laneIndex, lane) in self.lanes.enumerated() {
            guard lane.members > 0 else { return "lane \(laneIndex) (\(lane.policy)) has no members" }
            guard policies.insert(lane.policy).inserted else { return "two lanes for \(lane.policy)" }
            guard lane.members == membersByLane[laneIndex] else {
                return "lane \(laneIndex): members \(lane.members), slots \(membersByLane[laneIndex])"
            }
            guard lane.waiting == waitingByLane[laneIndex] else {
                return "lane \(laneIndex): waiting \(lane.waiting), waiting slots \(waitingByLane[laneIndex])"
            }
            guard lane.counts.endIndex == self.tail else {
                return "lane \(laneIndex)'s histogram ends at \(lane.counts.endIndex)"
            }
            if let violation = lane.counts.invariantViolation() {
                return "lane \(laneIndex)'s histogram: \(violation)"
            }
            let histogram = lane.counts.total
            let frozen = lane.frozen.values.reduce(0) { $0 + $1.members }
            guard lane.members == lane.atTail + histogram + frozen + privateByLane[laneIndex] + lane.evicted else {
                return
                    "lane \(laneIndex): \(lane.members) members, \(lane.atTail) at the tail + \(histogram) + \(frozen) frozen + \(privateByLane[laneIndex]) on a private queue + \(lane.evicted) evicted"
            }
            guard lane.atTail >= lane.waiting else {
                return "lane \(laneIndex): more waiting members than members at the tail"
            }
            if let violation = self.overflowViolation(lane, readingPrivateQueues: privateByLane[laneIndex]) {
                return "lane \(laneIndex) (\(lane.policy)): \(violation)"
            }
        }
        if !self.parkedProducers.isEmpty {
            guard !self.parkedMayGoOn else { return "a producer waits while it may go on" }
            for parked in self.parkedProducers where (parked.element != nil) != (self.mode == .push) {
                return self.mode == .push
                    ? "a subject's sender waits without its element" : "an upstream's producer waits with an element"
            }
        }
        if let violation = self.timerViolation() { return violation }
        if let violation = self.hostViolation() { return violation }
        guard self.replayFloor <= self.tail else { return "the replay floor is past the tail" }
        // A resumption reads the history from its start: all of it is stored (+Resuming).
        guard self.historyStart >= self.elements.startIndex, self.historyStart <= self.tail else {
            return "the history \(self.historyStart)..<\(self.tail) is not stored"
        }
        return nil
    }

    /// The first broken rule of the timer (MulticastStateMachine+Timer.swift), or `nil`: a
    /// timer task is the machine's only while a window may need timing, and it counts among
    /// the tasks running; it wakes no later than its deadline; the replay cache's expiry is
    /// pending only while the upstream is stopped and timed; a hosted `run()` waits for timer
    /// tasks only while some run.
    func timerViolation() -> String? {
        let timer = self.timer
        if timer.isRunning {
            guard self.timesWindows || self.hasSoftLimits else { return "a timer without a window to time" }
            guard timer.tasksRunning >= 1 else { return "a timer task that is not counted as running" }
        }
        guard timer.tasksRunning >= 0 else { return "\(timer.tasksRunning) timer tasks running" }
        if let wakeUp = timer.wakeUp {
            guard timer.isRunning, !timer.timesWindow || wakeUp <= timer.deadline else {
                return "a timer waking at \(wakeUp), past its deadline \(timer.deadline), or without a timer"
            }
        }
        if let violation = self.softDeadlineViolation() { return violation }
        if self.replayExpiryPending {
            guard case .idle = self.upstream, timer.isRunning else {
                return "a replay expiry pending while the upstream is not stopped, or without its timer"
            }
        }
        guard self.timersEnded == nil || timer.tasksRunning > 0 else {
            return "run() waits for timer tasks while none runs"
        }
        return nil
    }

    /// The first broken rule of a hosted machine's `run()` (MulticastStateMachine+Hosting.swift),
    /// or `nil`: `run()` waits for an iteration only while none runs; an iteration waiting to
    /// be picked up was started; once `run()` returned the machine has terminated; a `run()`
    /// waits for timer tasks only once it returned.
    func hostViolation() -> String? {
        switch self.host {
        case .notHosted:
            return nil
        case .waiting:
            guard case .idle = self.upstream else { return "run() waits while the upstream is \(self.upstream)" }
        case .notStarted(let pending?), .running(let pending?):
            guard pending < self.nextEpoch else { return "run() is to pick up iteration \(pending), never started" }
        case .notStarted(nil), .running(nil):
            break
        case .ended:
            guard self.terminal != nil else { return "run() returned while the machine goes on" }
        }
        guard self.timersEnded == nil || { if case .ended = self.host { true } else { false } }() else {
            return "a run() that has not ended waits for the timer tasks"
        }
        return nil
    }

    /// The first broken rule of `lane`'s `overflow`, or `nil`. `readingPrivateQueues`: how many
    /// of its members read a private queue.
    func overflowViolation(_ lane: Lane, readingPrivateQueues: Int) -> String? {
        guard lane.overflow == Overflow(lane.policy) else { return "overflow \(lane.overflow)" }
        // The most a member in the histogram holds (the oldest cell's).
        let held = self.tail - lane.minCursor
        // Evicted members, frozen cells and private queues belong to one rule each.
        let evicts: Bool
        let freezes: Bool
        switch lane.overflow {
        case .park, .keepAll:
            // `.park`: a member may hold more than its bound past a subject's synchronous
            // `send`, which cannot wait.
            (evicts, freezes) = (false, false)
        case .evict(let limit):
            guard held <= limit else { return "holds \(held), more than its eviction limit \(limit)" }
            if let problem = Self.softDeadlineViolation(lane, soft: lane.softLimit, tail: self.tail) { return problem }
            (evicts, freezes) = (true, false)
        case .dropOldest(let keep):
            guard held <= keep else { return "holds \(held), more than \(keep)" }
            (evicts, freezes) = (false, false)
        case .freeze(let keep):
            guard held <= keep else { return "holds \(held), more than \(keep)" }
            for (position, group) in lane.frozen {
                guard position < lane.minCursor && group.members > 0 && group.elements.count == keep else {
                    return "a frozen group at \(position) is not a full, older cell"
                }
            }
            for (index, key) in lane.roomList.enumerated() {
                let queue = self.privateQueues[key]!
                guard queue.roomIndex == index && queue.pending < keep else {
                    return "the room list holds a full or misplaced queue"
                }
            }
            (evicts, freezes) = (false, true)
        }
        guard evicts || lane.evicted == 0 else { return "\(lane.evicted) evicted members" }
        guard lane.evictions.reduce(0, { $0 + $1.members }) == lane.evicted,
            !lane.evictions.contains(where: { $0.members <= 0 })
        else { return "the eviction records count other members than the \(lane.evicted) evicted" }
        var recordsEnd = Int.min
        for record in lane.evictions {
            guard recordsEnd <= record.cursors.lowerBound, record.cursors.upperBound <= lane.minCursor,
                record.heldAt >= record.cursors.upperBound - 1
            else { return "eviction records out of order, past minCursor or held below their cursors" }
            recordsEnd = record.cursors.upperBound
        }
        guard evicts || lane.softDeadlines.isEmpty else { return "soft deadlines without a soft limit" }
        guard freezes || (lane.frozen.isEmpty && lane.roomList.isEmpty && readingPrivateQueues == 0) else {
            return "frozen cells or private queues"
        }
        return nil
    }

    /// The first broken rule of an `.evict` lane's soft deadlines, or `nil`: none without a
    /// soft limit; while kept, they end where holding more than the soft limit starts (at
    /// most at the tail before the last append, which wrote them) and never decrease.
    static func softDeadlineViolation(_ lane: Lane, soft: SharedBufferingPolicy.SoftLimit?, tail: Int) -> String? {
        let deadlines = lane.softDeadlines
        guard let soft else { return deadlines.isEmpty ? nil : "soft deadlines without a soft limit" }
        guard !deadlines.isEmpty else { return nil }
        guard deadlines.endIndex <= tail - soft.count else {
            return "soft deadlines up to \(deadlines.endIndex), past \(tail - soft.count)"
        }
        var previous = Duration.zero
        for position in deadlines.startIndex..<deadlines.endIndex {
            guard position == deadlines.startIndex || deadlines[position] >= previous else {
                return "soft deadlines decrease at \(position)"
            }
            previous = deadlines[position]
        }
        return nil
    }

    /// The first broken rule of the soft limits' deadlines and the timer that times them, or
    /// `nil`. Unless a reading is awaited (`FollowUp.reading`, after the critical section
    /// that asked for it): a member past a soft limit has its deadline written (the lane's
    /// deadlines cover the positions from its oldest member to where holding more than the
    /// soft count starts), and the timer runs and wakes no later than the next soft
    /// deadline. An `.automatic` upstream runs without subscribers only while the reading
    /// that makes the eviction of its last one a leave is awaited.
    func softDeadlineViolation() -> String? {
        guard self.terminal == nil, !self.followUp.contains(.reading) else { return nil }
        if self.mode == .automatic, self.subscriberCount == 0, case .running = self.upstream {
            return "a running .automatic upstream without subscribers, and no leave awaited"
        }
        for lane in self.lanes where lane.members > 0 {
            guard let soft = lane.softLimit, soft.duration > .zero else { continue }
            let pastSoft = self.tail - soft.count
            guard !lane.counts.isEmpty, lane.minCursor < pastSoft else { continue }
            guard lane.softDeadlines.startIndex <= lane.minCursor, lane.softDeadlines.endIndex == pastSoft else {
                return
                    "members past the soft limit \(soft) without their deadlines (\(lane.softDeadlines.startIndex)..<\(lane.softDeadlines.endIndex), oldest at \(lane.minCursor), past it below \(pastSoft))"
            }
        }
        if let next = self.nextSoftDeadline {
            guard self.timer.isRunning else { return "a soft deadline \(next), and no timer" }
            if let wakeUp = self.timer.wakeUp, wakeUp > next {
                return "the timer wakes at \(wakeUp), after the next soft deadline \(next)"
            }
        }
        return nil
    }
}
