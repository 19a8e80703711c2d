// The upstream's lifecycle: started on demand or by `connect()`, stopped by the last subscriber
// leaving, the keep-alive window or `connectionCancelled`, ended by `upstreamEnded` or
// `subjectCompleted`.

extension MulticastStateMachine {
    /// The subscriber in slot `slotIndex` must wait: its demand starts an idle upstream in
    /// `.automatic` mode, and in `.manual` mode if it joined an autoconnecting multicast
    /// (`Slot.connectsOnDemand`). Returns the epoch started.
    @inlinable
    mutating func startUpstreamOnDemand(for slotIndex: Int) -> UInt64? {
        guard case .idle = self.upstream else { return nil }
        switch self.mode {
        case .manual where self.slots[slotIndex].connectsOnDemand, .automatic:
            let epoch = self.nextEpoch
            self.nextEpoch += 1
            self.upstream = .running(epoch: epoch)
            // Restarted within the expiry window: the cache is kept (the timer, when it
            // fires, finds nothing pending).
            self.replayExpiryPending = false
            return epoch
        case .manual, .push:
            return nil
        }
    }

    /// Stops the upstream iteration `epoch`: it is cancelled, its parked producer released.
    @inlinable
    mutating func stopUpstream(epoch: UInt64, into effects: inout Effects) {
        self.upstream = .idle
        effects.cancelUpstream = epoch
        self.releaseProducers(into: &effects, result: false)
    }

    /// An `.automatic` upstream stopped because no subscriber is left, at `now`: its replay
    /// cache is kept, cleared at once, or expires when its window closes (opened now).
    @inlinable
    mutating func openReplayExpiryWindow(at now: Duration, into effects: inout Effects) {
        guard self.mode == .automatic, self.replayCount > 0 else { return }
        switch self.replayExpiry {
        case .never:
            break
        case .immediately:
            self.replayCacheReset()
        case .afterWindow:
            self.replayExpiryPending = true
            self.openWindow(at: now, into: &effects)
        }
    }

    /// The replay cache is cleared (`resetReplayCache()`, or it expired): subscribers joining
    /// from now on are replayed only what is produced from now on. Present subscribers keep
    /// what they have not read.
    @inlinable
    mutating func replayCacheReset() {
        self.replayFloor = self.tail
        self.replayExpiryPending = false
        self.trimElements()
    }

    /// Whether `epoch` is the upstream iteration currently allowed to produce.
    @inlinable
    func isCurrent(epoch: UInt64) -> Bool {
        switch self.upstream {
        case .running(let current), .lingering(let current):
            return current == epoch
        case .idle, .terminated:
            return false
        }
    }

    /// The upstream iteration `epoch` ended: `nil` when it finished, else its error.
    /// Subscribers receive what is buffered, then the terminal event.
    @inlinable
    mutating func upstreamEnded(epoch: UInt64, failure: Failure?) -> Effects {
        var effects = Effects()
        guard self.isCurrent(epoch: epoch) else { return effects }
        let terminal: Terminal = failure.map { .failed($0) } ?? .finished
        self.cancelTimer(into: &effects)
        self.upstream = .terminated(terminal)
        self.endWaiters(into: &effects, with: terminal.result)
        self.releaseProducers(into: &effects, result: false)
        self.noticing(&effects)
        return effects
    }

    /// The storage's upstream iteration `epoch` ended (its body returned): `heldItsTask`,
    /// the storage still held its task (it was not cancelled): the machine forgets it
    /// (`upstreamTaskReleased`), then ends as `upstreamEnded(epoch:failure:)` says.
    @inlinable
    mutating func upstreamIterationEnded(epoch: UInt64, failure: Failure?, heldItsTask: Bool) -> Effects {
        if heldItsTask { self.upstreamTaskReleased() }
        return self.upstreamEnded(epoch: epoch, failure: failure)
    }

    /// Starts the upstream if it is idle. Returns the running epoch (`nil` once terminated).
    @inlinable
    mutating func connectRequested() -> (epoch: UInt64?, effects: Effects) {
        var effects = Effects()
        switch self.upstream {
        case .running(let epoch), .lingering(let epoch):
            return (epoch, effects)
        case .terminated:
            return (nil, effects)
        case .idle:
            let epoch = self.nextEpoch
            self.nextEpoch += 1
            self.upstream = .running(epoch: epoch)
            self.upstreamStarted(epoch: epoch, into: &effects)
            self.noticing(&effects)
            return (epoch, effects)
        }
    }

    /// Cancels the upstream iteration `epoch`. The subscribers present now receive what is
    /// buffered for them, then `nil`; later subscribers wait for the next connection.
    ///
    /// Each present subscriber leaves its lane at once, taking a private copy of exactly
    /// what it still had to read: from now on it counts against no bound, no policy drops
    /// or adds anything for it, and no element of a later connection reaches it. Members
    /// at the same position share one copy.
    @inlinable
    mutating func connectionCancelled(epoch: UInt64) -> Effects {
        var effects = Effects()
        guard self.isCurrent(epoch: epoch) else { return effects }
        self.stopUpstream(epoch: epoch, into: &effects)
        self.endWaiters(into: &effects, with: .success(nil))
        var copies: [Int: [Element]] = [:]
        for slotIndex in self.slots.indices
        where self.slots[slotIndex].isLive && self.slots[slotIndex].lane != Slot.noLane {
            let slot = self.slots[slotIndex]
            let lane = self.lanes[Int(slot.lane)]
            let eviction = self.eviction(of: slotIndex)
            let pending: [Element]
            var gaps: [(index: Int, missed: Int)] = []
            if slot.readsPrivateQueue || slot.cursor < lane.minCursor || self.greetings[UInt32(slotIndex)] != nil {
                (pending, gaps) = self.pending(of: slotIndex)
            } else if let shared = copies[slot.cursor] {
                pending = shared
            } else {
                pending = self.pendingElements(of: slotIndex)
                copies[slot.cursor] = pending
            }
            let greeting = self.greetings[UInt32(slotIndex)]?.remaining ?? 0
            self.leaveLane(slotIndex)
            self.privateQueues[UInt32(slotIndex)] = PrivateQueue(queue: pending, endsWhenEmpty: true)
            self.privateQueues[UInt32(slotIndex)]!.greeting = greeting
            self.privateQueues[UInt32(slotIndex)]!.eviction = eviction
            self.privateQueues[UInt32(slotIndex)]!.endedAtTail = self.tail
            // What its policy had dropped is still reported where it was (lag reports).
            self.privateQueues[UInt32(slotIndex)]!.gaps = gaps
            self.slots[slotIndex].readsPrivateQueue = true
        }
        self.trimElements()
        self.noticing(&effects)
        return effects
    }

    /// The `run()` hosting the upstream ended (it was cancelled, or the upstream ended): the
    /// upstream, if running, is cancelled, and the machine ends as if it had finished. The
    /// subscribers receive what is buffered for them, then `nil`; later ones get `nil` at
    /// once. Ignored once terminated.
    @inlinable
    mutating func hostStopped() -> Effects {
        var effects = Effects()
        switch self.upstream {
        case .terminated:
            return effects
        case .running(let epoch), .lingering(let epoch):
            effects.cancelUpstream = epoch
        case .idle:
            break
        }
        self.cancelTimer(into: &effects)
        // A replay cache whose expiry window was open would never expire now (no timer):
        // it expires at once. Otherwise it survives the end, as `share()`'s does.
        if self.replayExpiryPending { self.replayCacheReset() }
        self.upstream = .terminated(.finished)
        self.endWaiters(into: &effects, with: Terminal.finished.result)
        self.releaseProducers(into: &effects, result: false)
        self.noticing(&effects)
        return effects
    }

    /// Completes a push-fed machine (a subject). Ignored once completed.
    @inlinable
    mutating func subjectCompleted(failure: Failure?) -> Effects {
        guard case .running(let epoch) = self.upstream else { return Effects() }
        return self.upstreamEnded(epoch: epoch, failure: failure)
    }
}
