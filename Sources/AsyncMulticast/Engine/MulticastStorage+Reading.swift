// Reading, beside MulticastStateMachine+Reading.swift: a subscriber's `next()`, first without
// suspending (`refill`, the machine's `nextRequested`), then suspended (`wait`, the
// machine's `subscriberWaiting`).

extension MulticastStorage {
    /// What `refill` found, in the words of the machine's `ReadResult`.
    @usableFromInline
    enum Refill {
        /// The next element (and `batch` holds the ones after it that were ready).
        case element(Element)
        /// The subscriber has left: the end, its error, or `nil` after a cancellation or an
        /// eviction (`report.evicted` tells which).
        case ended(Result<Element?, Failure>)
        /// Nothing ready: call `wait`.
        case nothingReady
        /// Only for a reader that reports gaps (`ReadReport.reportsGaps`): a gap of
        /// `report.missed` elements comes next; nothing was taken.
        case gap
    }

    /// The synchronous part of a subscriber's `next()`, once its batch is used up: the
    /// subscriber's task was cancelled (it leaves), or it takes what is ready into `batch`,
    /// or there is nothing (after a brief catch-up wait if `mayWaitForOffers`, see
    /// `CatchUpSpin`; the caller passes `false` on an actor) and it must call `wait`.
    /// Synchronous so that an iterator refilling its batch pays for no async call.
    ///
    /// - `batch`: the elements of the subscriber's used-up batch (`ElementBatch.elements`).
    ///   Emptied, keeping its capacity, then receives the ready elements after the one
    ///   returned, in order (`MulticastStateMachine.read(_:batch:report:)`).
    /// - `held`: under `.bufferingNewest`, the batch the last read took, which its policy may
    ///   still drop (`HeldBatch`): what it still holds comes first, one element at a time,
    ///   checked against the published tail (`takeHeld(from:_:report:)`), with no lock of
    ///   the storage's. A read that takes such a batch moves it there.
    /// - `offersWhenCaughtUp`: set to the producers' offer count when this read took every
    ///   element produced so far and the subscriber skips empty reads
    ///   (`MulticastStateMachine.skipsEmptyReads(for:mayWaitForOffers:)`), else 0
    ///   (`ElementBatch.offersWhenCaughtUp`). If that count has not moved by the next
    ///   refill, no element was counted since, and that refill returns `.nothingReady` at once,
    ///   without the cancellation check, the lock and the read. This is safe whatever the
    ///   count says, because `wait` reads again under the lock before it stores the
    ///   continuation: it returns an element that arrived uncounted, the end, an error or
    ///   an eviction at once, and its cancellation handler removes a cancelled subscriber
    ///   before that read. The count only decides how often that happens.
    /// - `report`: what the subscriber missed just before the element (or end) returned,
    ///   and whether its end is an eviction.
    ///
    /// Never inlined: `ElementBatch.refill` is, and with this inside it the iterator's
    /// `next()` grew too large to be inlined into the caller's loop in turn (about 5
    /// instructions more per delivery to 64 subscribers of a subject, `compare --instructions`).
    @inlinable
    @inline(never)
    func refill(
        _ id: SubscriberID, batch: inout [Element], held: HeldBatchSlot<Element>,
        offersWhenCaughtUp: inout UInt32, report: inout ReadReport, mayWaitForOffers: Bool
    ) -> Refill {
        if let kept = held, let taken = self.takeHeld(from: kept, id, report: &report) {
            return taken
        }
        // Emptying an array is a generic call of about 70 instructions even when it is
        // already empty, which it is after every read that took a single element.
        if !batch.isEmpty { batch.removeAll(keepingCapacity: true) }
        let caughtUpOffers = offersWhenCaughtUp
        if caughtUpOffers != 0 {
            offersWhenCaughtUp = 0
            if self.catchUp.offerCount == caughtUpOffers { return .nothingReady }
        }
        if Task.isCancelled {
            self.unsubscribe(id)
            return .ended(.success(nil))
        }
        // Moved through an Optional so the machine can tell "no batching" (nil) apart;
        // `take()` keeps the array uniquely referenced, so refilling it does not copy.
        var lending: [Element]? = batch
        batch = []
        var (action, catchUpBatch) = self.takeNext(
            id, batch: &lending, report: &report, mayWaitForOffers: mayWaitForOffers,
            offersWhenCaughtUp: &offersWhenCaughtUp)
        // Never on an actor's executor: an actor (the main actor) must not busy-wait.
        if let catchUpBatch, mayWaitForOffers, self.catchUp.waitForOffers(upTo: catchUpBatch) {
            // The producer offered elements while this subscriber waited for them: take
            // them without suspending (see `CatchUpSpin` for why and for the bounds).
            (action, _) = self.takeNext(
                id, batch: &lending, report: &report, mayWaitForOffers: mayWaitForOffers,
                offersWhenCaughtUp: &offersWhenCaughtUp)
        }
        batch = lending.take()!
        // A `.bufferingNewest` read: its batch stays subject to the rule, beside the
        // subscription, where the iterator's inline `popFirst` does not see it.
        if report.batchExpiry != 0, !batch.isEmpty, let held {
            held.withLock { $0.hold(&batch, expiry: report.batchExpiry) }
        }
        switch action {
        case .element(let element, let producers):
            // The cheap form of what this read leaves to do (see `takeNext`).
            self.perform(releasing: producers)
            return .element(element)
        case .elementReleasingSenders(let element, _):
            return .element(element)  // `takeNext` performed what the read released
        case .ended(let result), .endedNoticed(let result, _):
            return .ended(result)
        case .nothingReady, .nothingReadyStartingUpstream:
            return .nothingReady  // the upstream, if this demand started it, is already running
        case .gap:
            return .gap
        }
    }

    /// The next element of a `.bufferingNewest` batch kept in `kept` that its policy has not
    /// dropped (or the gap before it, for a lag-reporting reader), checked against the
    /// published tail (`HeldBatch.take`); `nil` once it holds nothing more (what the
    /// policy dropped of it is then in `report.missed`, for the read that follows).
    @inlinable
    func takeHeld(from kept: Lock<HeldBatch<Element>>, _ id: SubscriberID, report: inout ReadReport) -> Refill? {
        let reportsGaps = report.reportsGaps
        let (taken, missed) = kept.withLock { held -> (Refill?, Int) in
            guard held.holdsMore else { return (nil, 0) }
            // The tail was published in the critical section of each append, and this
            // task's own reads and sends happened before this load. A drop it shows is
            // confirmed under the storage's lock.
            switch held.take(
                tail: self.tailPublished, reportsGaps: reportsGaps,
                exactTail: { self.state.withLock { $0.machine.heldBatchTail(of: id) } })
            {
            case .element(let element, let missed): return (.element(element), missed)
            case .gap(let missed): return (.gap, missed)
            case .usedUp(let missed): return (nil, missed)
            }
        }
        report.missed += missed
        return taken
    }

    /// One read of `next()`: the machine's `nextRequested`, and what it leaves to do (the
    /// senders' elements it appended, the upstream its demand started, the count once the
    /// subscriber has left) performed before it returns. `catchUpBatch`: nothing was ready
    /// and the upstream was not just started, and this subscriber may wait briefly for that
    /// many elements before suspending (`MulticastStateMachine.catchUpBatch(for:)`,
    /// `CatchUpSpin`). `offersWhenCaughtUp`: the producers' offer count, if the read took
    /// every element produced so far and the subscriber skips empty reads; see `refill`.
    ///
    /// Fast path: a read that took elements, found a gap or must wait without starting
    /// anything skips the end of the critical section: it changes no count and starts or
    /// cancels nothing. The producers a read released, if any, travel in `.element` and
    /// `refill` resumes them: taking them out of the action under the lock, to end there,
    /// cost a retain and a release on every read.
    @inlinable
    func takeNext(
        _ id: SubscriberID, batch: inout [Element]?, report: inout ReadReport, mayWaitForOffers: Bool,
        offersWhenCaughtUp: inout UInt32
    ) -> (action: Machine.NextAction, catchUpBatch: Int?) {
        offersWhenCaughtUp = 0
        var catchUpBatch: Int? = nil
        let (action, work) = self.state.withLock { state -> (Machine.NextAction, OutsideLock?) in
            let action = state.machine.nextRequested(id, batch: &batch, report: &report)
            switch action {
            case .element:
                // Read under the lock: an element produced after this read is counted after
                // the producer released the lock, so after this load (an element read here
                // but counted later moves the count: a skip missed, nothing worse).
                if report.caughtUp, state.machine.skipsEmptyReads(for: id, mayWaitForOffers: mayWaitForOffers) {
                    offersWhenCaughtUp = self.catchUp.offerCount
                }
                return (action, nil)
            case .elementReleasingSenders(_, let effects):
                // Not caught up: the senders' elements came after what it took.
                return (action, self.endCriticalSection(effects, &state))
            case .ended:
                return (action, nil)
            case .endedNoticed(_, let effects):
                // The subscriber has left, and observers must hear of it.
                return (action, self.endCriticalSection(effects, &state))
            case .nothingReadyStartingUpstream(let effects):
                return (action, self.endCriticalSection(effects, &state))
            case .nothingReady:
                catchUpBatch = state.machine.catchUpBatch(for: id)
                return (action, nil)
            case .gap:
                return (action, nil)
            }
        }
        self.perform(work)
        return (action, catchUpBatch)
    }

    /// The asynchronous part of a subscriber's `next()`, after `refill` found nothing: suspends until an
    /// element or terminal event arrives, or the task is cancelled (it then leaves, and
    /// this returns `nil` at once). With `report.reportsGaps`, `nil` with `report.missed > 0`
    /// is a gap found before suspending: the subscriber is still subscribed.
    @inlinable
    func wait(
        _ id: SubscriberID, report: inout ReadReport, isolation actor: isolated (any Actor)?
    ) async throws(Failure) -> Element? {
        var suspendedReport = report
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: Machine.SubscriberContinuation) in
                self.suspend(id, continuation: continuation, report: &suspendedReport, mayWaitForOffers: actor == nil)
            }
        } onCancel: {
            self.unsubscribe(id)
        }
        report = suspendedReport
        if report.offersWhenParked != 0 {
            report.offersWhenParked = self.offersWhenResumed(report.offersWhenParked, result)
        }
        return try result.get()
    }

    /// What a subscriber resumed with `result` remembers of the offer count (see
    /// `ReadReport.offersWhenParked`): the count now, if it was handed an element and that
    /// element's offer is the only one counted since it parked, when the count was `parked`;
    /// else 0 (its next refill reads).
    ///
    /// A producer counts its offer after its critical section, before it resumes the
    /// subscribers it handed the element to (`perform(delivering:to:)`), so a hand-over is
    /// counted by the time its subscriber runs: one more than `parked` means no other offer was
    /// counted. An element appended but not counted yet makes the next refill skip a read
    /// that would have found it; its `wait` then reads under the lock and returns it at once.
    /// Safe whatever the count says, as for a read that caught up (`refill`).
    @inlinable
    func offersWhenResumed(_ parked: UInt32, _ result: Result<Element?, Failure>) -> UInt32 {
        guard case .success(.some) = result else { return 0 }
        let now = self.catchUp.offerCount
        return now == parked &+ 1 ? now : 0
    }

    /// The subscriber suspended with `continuation`: the machine's `subscriberWaiting` stores
    /// it, or resumes it at once.
    ///
    /// Fast path: the usual outcome, stored without starting the upstream, changes no count
    /// and has nothing to do after the lock; it skips the end of the critical section.
    ///
    /// A subscriber that waits raises the upstream task to its own priority if that is
    /// higher (MulticastStateMachine+Priority.swift): a subscriber waiting in `next()` does
    /// not await the upstream task, so the runtime cannot know that it waits on it. Its
    /// priority is read before the lock (`waitingSubscriberPriority`). Raising is rare (once
    /// per upstream task and priority level): it allocates the end of the critical section.
    @inlinable
    func suspend(
        _ id: SubscriberID, continuation: Machine.SubscriberContinuation, report: inout ReadReport,
        mayWaitForOffers: Bool
    ) {
        let priority = self.waitingSubscriberPriority
        let work = self.state.withLock { state -> OutsideLock? in
            let outcome = state.machine.subscriberWaiting(
                id, continuation: continuation, priority: priority, report: &report)
            // Consumed, not copied: matching a copy of the outcome (its `Effects` payload)
            // cost a copy and a destroy through the enum's value witnesses on every wait,
            // about 180 instructions a wake-up (lockstep N = 64, `compare --instructions`).
            switch consume outcome {
            case .stored(nil):
                // Read under the lock, as `takeNext` does: an offer counted later is one
                // more than this count (`offersWhenResumed`).
                if state.machine.waiterSkipsEmptyReads(mayWaitForOffers: mayWaitForOffers) {
                    report.offersWhenParked = self.catchUp.offerCount
                }
                return nil
            case .stored(let raise?):
                // The running task, or the stopping one the next iteration waits behind.
                guard let task = state.upstreamTask?.task ?? state.retiringTask else { return nil }
                return OutsideLock(raise: Raise(task: task, priority: raise))
            case .storedStartingUpstream(let effects), .resumed(let effects):
                return self.endCriticalSection(effects, &state)
            }
        }
        self.perform(work)
    }
}
