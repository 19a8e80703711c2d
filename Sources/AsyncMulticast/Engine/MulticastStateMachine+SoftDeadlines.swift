// Soft deadlines, beside MulticastStateMachine+Evicting.swift: the soft limit of
// `.evicting(hard, softLimit:)`. A position past a lane's soft count gets its deadline from a
// reading of the clock the storage takes after the critical section that asked for it
// (`FollowUp.reading`, `clockRead(at:through:)`), for the positions past by then only; the
// timer evicts the members whose written deadline has come (`softDeadlinesDue(by:)`).

extension MulticastStateMachine.Lane {
    /// An `.evicting` policy's soft limit, read only on an `.evict` lane.
    @inlinable
    var softLimit: SharedBufferingPolicy.SoftLimit? {
        if case .evicting(_, let soft) = self.policy { return soft }
        return nil
    }

    /// `.evict` with a soft limit, after the element that made the tail `newTail` was
    /// appended (and the hard limit applied), without reading a clock. A soft limit of
    /// `.zero` evicts the members past it at once: a second hard limit (their deadline is
    /// the instant they went past it, which has come). Another returns whether a member is
    /// past it: the deadlines of the positions that went past it must then be written at
    /// a reading of the clock, taken after the lock (`stampSoftDeadlines`). Returns the
    /// members evicted, and whether a reading is wanted.
    @inlinable
    mutating func softLimitApplied(
        _ soft: SharedBufferingPolicy.SoftLimit, newTail: Int
    ) -> (evicted: Int, wantsReading: Bool) {
        // Members whose cursor is below this hold more than `soft.count`.
        let pastSoft = newTail - soft.count
        guard !self.counts.isEmpty, self.minCursor < pastSoft else {
            // Nobody is past the soft limit: no deadline to keep.
            if !self.softDeadlines.isEmpty { self.softDeadlines = IndexedRing() }
            return (0, false)
        }
        guard soft.duration > .zero else {
            let evicted = self.evicted
            self.evictCells(before: pastSoft, for: .softLimit, heldAt: newTail)
            return (self.evicted - evicted, false)
        }
        return (0, self.softDeadlines.endIndex < pastSoft || self.softDeadlines.startIndex > self.minCursor)
    }

    /// `.evict` with a soft limit, at `reading`, a reading of the clock taken before the lock
    /// (after an append that left a member past the soft limit, or by the timer): writes the
    /// deadlines of the positions that went past `soft.count` since the last reading (see
    /// `softDeadlines`), then evicts the cells whose deadline has come by `now` (`reading`,
    /// or later: an instant a timer's sleep vouched for, or the end of time when the clock
    /// failed). Returns the members evicted.
    @inlinable
    mutating func stampSoftDeadlines(
        _ soft: SharedBufferingPolicy.SoftLimit, tail: Int, stampingThrough stampTail: Int, at reading: Duration,
        evictingBy now: Duration
    ) -> Int {
        let pastSoft = tail - soft.count
        // The positions past the soft limit when the reading was asked for: the ones it times.
        let stampedPastSoft = Swift.min(stampTail, tail) - soft.count
        guard !self.counts.isEmpty, self.minCursor < pastSoft else {
            if !self.softDeadlines.isEmpty { self.softDeadlines = IndexedRing() }
            return 0
        }
        // The ring covers the cells past the soft limit, from at most `minCursor`.
        if self.softDeadlines.isEmpty {
            self.softDeadlines.rebase(to: self.minCursor)
        } else if self.softDeadlines.startIndex < self.minCursor {
            self.softDeadlines.removeFirst(
                Swift.min(self.minCursor, self.softDeadlines.endIndex) - self.softDeadlines.startIndex)
            if self.softDeadlines.isEmpty { self.softDeadlines.rebase(to: self.minCursor) }
        }
        let deadline = reading.saturatingAdding(soft.duration)
        let timed = Swift.min(stampedPastSoft, self.softDeadlines.endIndex)
        // Every position it times went past before this reading was taken, so none has a
        // later deadline than this one: a deadline written from a later reading (whose own
        // reading arrived first) comes down to it. Deadlines never decrease (the cells are
        // evicted in order), so the last position it times says whether any must; the clock
        // set back (a user's clock need not be monotonic) brings them down the same way, so
        // that no reading taken before the jump keeps a member that fell behind after it for
        // longer than the duration.
        if timed > self.softDeadlines.startIndex, self.softDeadlines[timed - 1] > deadline {
            self.capSoftDeadlines(at: deadline, below: timed)
        }
        while self.softDeadlines.endIndex < stampedPastSoft { self.softDeadlines.append(deadline) }
        return self.evictSoftDue(soft, tail: tail, by: now)
    }

    /// `.evict` with a soft limit (a duration, members): whether a position past the soft
    /// limit at `tail` has no deadline written yet.
    @inlinable
    func awaitsSoftDeadlines(tail: Int) -> Bool {
        guard case .evict = self.overflow, let soft = self.softLimit, soft.duration > .zero, self.members > 0,
            !self.counts.isEmpty
        else { return false }
        let pastSoft = tail - soft.count
        return self.minCursor < pastSoft
            && (self.softDeadlines.endIndex < pastSoft || self.softDeadlines.startIndex > self.minCursor)
    }

    /// `.evict` with a soft limit: evicts the cells whose written deadline has come by `now`,
    /// writing none. The timer's part (`softDeadlinesDue(by:)`); a reading's part after
    /// `stampSoftDeadlines` wrote its deadlines. Returns the members evicted.
    @inlinable
    mutating func evictSoftDue(_ soft: SharedBufferingPolicy.SoftLimit, tail: Int, by now: Duration) -> Int {
        let pastSoft = tail - soft.count
        let evicted = self.evicted
        while !self.counts.isEmpty, self.minCursor < pastSoft,
            self.softDeadlines.startIndex <= self.minCursor, self.minCursor < self.softDeadlines.endIndex,
            Self.isReached(self.softDeadlines[self.minCursor], at: now)
        {
            self.evictOldestCell(for: .softLimit, heldAt: tail)
        }
        return self.evicted - evicted
    }

    /// When the lane's next soft eviction is due: the deadline of its oldest cell if that
    /// cell is past the soft limit and its deadline is written; `nil` otherwise, or when
    /// that deadline saturated (it never comes).
    @inlinable
    func nextSoftDeadline(tail: Int) -> Duration? {
        guard let soft = self.softLimit, !self.counts.isEmpty, self.minCursor < tail - soft.count,
            self.softDeadlines.startIndex <= self.minCursor, self.minCursor < self.softDeadlines.endIndex
        else { return nil }
        let deadline = self.softDeadlines[self.minCursor]
        return deadline == Duration(attoseconds: .max) ? nil : deadline
    }

    /// Whether a soft deadline has come at `reading`. One that saturated (a duration or a
    /// clock reading near `Duration`'s largest value) never comes: it stands for later than
    /// any reading.
    @inlinable
    static func isReached(_ deadline: Duration, at reading: Duration) -> Bool {
        deadline <= reading && deadline != Duration(attoseconds: .max)
    }

    /// A reading earlier than the deadlines written for positions below `end` (one that
    /// arrived late, or the clock set back): each of them later than `deadline` becomes
    /// `deadline`. Rare, so the ring is rebuilt.
    @inlinable
    mutating func capSoftDeadlines(at deadline: Duration, below end: Int) {
        var capped = IndexedRing<Duration>()
        capped.rebase(to: self.softDeadlines.startIndex)
        for position in self.softDeadlines.startIndex..<self.softDeadlines.endIndex {
            let written = self.softDeadlines[position]
            capped.append(position < end ? Swift.min(written, deadline) : written)
        }
        self.softDeadlines = capped
    }
}

extension MulticastStateMachine {
    /// The general pass of `append` met a member of an `.evict` lane while a soft-limited
    /// lane exists: applies each soft limit without a reading (`Lane.softLimitApplied`),
    /// after the pass. Returns whether a member was evicted. Out of line: the pass of every
    /// other append stays small.
    @inlinable
    @inline(never)
    mutating func applySoftLimitsAfterThePass(newTail: Int) -> Bool {
        var evicted = 0
        for laneIndex in self.lanes.indices where self.lanes[laneIndex].members > 0 {
            guard case .evict = self.lanes[laneIndex].overflow, let soft = self.lanes[laneIndex].softLimit else {
                continue
            }
            let applied = self.lanes[laneIndex].softLimitApplied(soft, newTail: newTail)
            evicted += applied.evicted
            if applied.wantsReading { self.followUp.insert(.reading) }
        }
        return evicted > 0
    }

    /// The sole lane's soft limit after an append (`appendToSoleLosslessLane`): the members
    /// it evicted at once (a soft limit of `.zero`), and a reading asked for while a member
    /// is past it. Out of line: only a soft-limited lane calls it.
    @inlinable
    @inline(never)
    mutating func applySoleSoftLimit(_ soft: SharedBufferingPolicy.SoftLimit, newTail: Int) -> Bool {
        let applied = self.lanes[0].softLimitApplied(soft, newTail: newTail)
        if applied.wantsReading { self.followUp.insert(.reading) }
        return applied.evicted > 0
    }

    /// The storage read its clock, before the lock, because the machine asked for it
    /// (`FollowUp.reading`): the soft deadlines of the members that went past their soft
    /// limit are written at `now`, the members whose deadline has come are evicted, an
    /// evicted last subscriber leaves (`lastSubscriberWent(at:into:)`), and the timer is
    /// armed for the next soft deadline. Harmless when nothing waits for a reading.
    ///
    /// The reading was taken after the critical section that asked for it ended with the
    /// tail at `tail`: it writes the deadlines of the positions that went past by then
    /// only. A position that went past later, after the reading was taken perhaps, waits for
    /// the reading its own critical section asked for (the reading stays awaited), and a
    /// reading older than one already applied writes nothing.
    @inlinable
    mutating func clockRead(at now: Duration, through tail: Int) -> Effects {
        var effects = Effects()
        self.timeSoftLimits(at: now, evictingBy: now, stampingThrough: tail, into: &effects)
        return effects
    }

    /// `clockRead(at:through:)`'s work: at the reading `reading`, for the positions that
    /// went past by the tail `stampTail` (evicting what is due by `now`, see
    /// `Lane.stampSoftDeadlines`).
    @inlinable
    mutating func timeSoftLimits(
        at reading: Duration, evictingBy now: Duration, stampingThrough stampTail: Int, into effects: inout Effects
    ) {
        self.followUp.remove(.reading)
        guard self.terminal == nil else { return }
        if self.hasSoftLimits {
            let tail = self.tail
            self.evictFromSoftLimitedLanes { lane, soft in
                lane.stampSoftDeadlines(soft, tail: tail, stampingThrough: stampTail, at: reading, evictingBy: now)
            }
        }
        // Positions that went past after `stampTail`: their own reading is on its way.
        let awaitsAReading = stampTail < self.tail && self.lanes.contains { $0.awaitsSoftDeadlines(tail: self.tail) }
        self.lastSubscriberWent(at: reading, into: &effects)
        self.followUp.remove(.reading)  // the leave above was what an eviction asked it for
        if awaitsAReading { self.followUp.insert(.reading) }
        if let deadline = self.nextSoftDeadline { self.timerNeeded(by: deadline, into: &effects) }
    }

    /// The timer's soft limits, at `now` (an instant it vouches for): the members whose
    /// written deadline has come are evicted; no deadline is written. Its reading was taken
    /// before the lock, so it may be older than a member that went past its soft limit since
    /// (a `ManualClock` advanced meanwhile): writing that member's deadline at it would make
    /// the deadline early by the difference. A reading that is awaited (`FollowUp.reading`)
    /// is left to whoever asked for it: the storage reads the clock after every critical
    /// section that leaves one awaited, this one included (an evicted last subscriber).
    @inlinable
    mutating func softDeadlinesDue(by now: Duration) {
        guard self.terminal == nil, self.hasSoftLimits else { return }
        let tail = self.tail
        self.evictFromSoftLimitedLanes { lane, soft in lane.evictSoftDue(soft, tail: tail, by: now) }
    }

    /// Runs `evict` on each lane with members whose policy evicts and has a soft limit; it
    /// returns how many members it evicted. If any were, records the evictions and trims the
    /// buffer. What the clock's reading and the timer share.
    @inlinable
    mutating func evictFromSoftLimitedLanes(_ evict: (inout Lane, SharedBufferingPolicy.SoftLimit) -> Int) {
        var evicted = 0
        for laneIndex in self.lanes.indices where self.lanes[laneIndex].members > 0 {
            guard case .evict = self.lanes[laneIndex].overflow, let soft = self.lanes[laneIndex].softLimit else {
                continue
            }
            evicted += evict(&self.lanes[laneIndex], soft)
        }
        if evicted > 0 {
            self.evictionsHappened()
            self.trimElements()
        }
    }

    /// When the next soft eviction is due, over every lane (`Lane.nextSoftDeadline`).
    @inlinable
    var nextSoftDeadline: Duration? {
        guard self.hasSoftLimits else { return nil }
        var earliest: Duration? = nil
        for lane in self.lanes where lane.members > 0 {
            if let deadline = lane.nextSoftDeadline(tail: self.tail), earliest.map({ deadline < $0 }) ?? true {
                earliest = deadline
            }
        }
        return earliest
    }
}
