// Producing, beside MulticastStateMachine+Producing.swift: an element offered by an upstream
// iteration or a subject, producers and senders waiting for room, and a subject's sends.

extension MulticastStorage {
    /// Offers an element from the upstream iteration `epoch`: the hot path of every
    /// producer. One lock acquisition, then the waiting subscribers are resumed with
    /// `element` (usually none; the array then never allocates). `.park` means a bounded
    /// subscriber is full and `respectingBounds` is true: call ``waitForRoom(epoch:)``.
    ///
    /// Always inlined: it is the body of the upstream's loop (`pulling`), where the compiler
    /// stopped inlining it once it grew by the eviction notices (about 40 instructions a
    /// delivery more, `compare --instructions`).
    ///
    /// An element that evicted someone or left a member past its soft limit leaves the machine
    /// a `FollowUp`: then, and only then, the critical section ends the slow way
    /// (`endCriticalSection`: the count's observers, the eviction watchers) and the clock is
    /// read after it, for the machine (`clockFollowUp()`).
    ///
    /// The outcome leaves the lock as one byte with the follow-up's bits above it: a tuple
    /// with the end of the critical section cost about 12 instructions a delivery, a
    /// captured flag 7 to share N=1 (`compare --instructions`). The subscribers to resume
    /// leave it only when some waited (`Machine.Produced`): an empty array built for every
    /// element and released after it cost a lossy send about 20 instructions.
    @inlinable
    @inline(__always)
    func offer(_ element: Element, epoch: UInt64, respectingBounds: Bool) -> Machine.ProduceOutcome {
        let produced = self.state.withLock { state in
            let produced = state.machine.elementProduced(element, epoch: epoch, respectingBounds: respectingBounds)
            if state.machine.tailWatchedUntil != 0, state.machine.appendObserved() {
                self.publishTail(of: state.machine)
            }
            return produced
        }
        switch produced {
        case .quiet(let packed):
            let outcome = self.producerOutcome(packed)
            if outcome != .stop { self.catchUp.recordOffer() }  // `perform(delivering:to:)` with nobody
            return outcome
        case .waking(let packed, let resuming):
            let outcome = self.producerOutcome(packed)
            if outcome != .stop { self.perform(delivering: element, to: resuming) }
            return outcome
        }
    }

    /// `offer`'s outcome from its packed byte, once its follow-up is done if the machine left
    /// one: a subscriber that receives the element finds the evictions and the soft deadlines
    /// it caused done.
    @inlinable
    @inline(__always)
    func producerOutcome(_ packed: UInt8) -> Machine.ProduceOutcome {
        if _slowPath(packed > 0xF) { self.producerFollowUp() }
        // The low bits are the outcome's raw value, which is its tag: no validating switch.
        return unsafeBitCast(packed & 0xF, to: Machine.ProduceOutcome.self)
    }

    /// After a producer's critical section that left a `FollowUp` (an eviction, a member past
    /// a soft limit): its end, in a critical section of its own (the count's observers, the
    /// eviction watchers), then the clock read for the machine if it asked
    /// (`clockFollowUp()`). Rare, so out of line.
    @inlinable
    @inline(never)
    func producerFollowUp() {
        let work = self.state.withLock { state in self.endCriticalSection(Machine.Effects(), &state) }
        self.perform(work)
    }

    /// `offer` for a subject's `send(waitingForRoom:)`: produces only if every bounded
    /// subscriber has room and no sender waits before it; `.noRoom` (nothing produced)
    /// otherwise.
    @inlinable
    func offerIfRoom(_ element: Element) -> Machine.RoomOutcome {
        var resuming: [Machine.SubscriberContinuation] = []
        let (outcome, followUp) = self.state.withLock { state in
            let outcome = state.machine.elementProducedIfRoom(element, epoch: Self.pushEpoch, resuming: &resuming)
            if state.machine.tailWatchedUntil != 0, state.machine.appendObserved() {
                self.publishTail(of: state.machine)
            }
            return (outcome, state.machine.followUp.rawValue != 0)
        }
        if followUp { self.producerFollowUp() }
        if outcome == .produced { self.perform(delivering: element, to: resuming) }
        return outcome
    }

    /// Outside the lock: tells the tasks waiting to learn of an eviction
    /// (`waitForEviction(_:)`) their subscriber's eviction, or `nil` when it left otherwise.
    @inlinable
    static func resume(_ notices: [Machine.EvictionNotice]) {
        for notice in notices { notice.continuation.resume(returning: notice.eviction) }
    }

    /// An upstream iteration's producer, told to `.park`: suspends until a bounded subscriber
    /// made room (`true`) or producing must stop (`false`). A cancelled waiting task stops
    /// waiting and gets `false`. (A subject's sender waits with its element instead:
    /// `waitToSend(_:)`.)
    @inlinable
    func waitForRoom(epoch: UInt64) async -> Bool {
        // Parking is a suspension that a subscriber must undo with a thread wake-up, which
        // costs microseconds: the time to produce dozens of elements. Subscribers running
        // on other threads usually make room within a few turns of the executor, so give
        // them those turns first (each `yield` lets any queued task run before this one).
        for _ in 0..<Self.yieldsBeforeParking where !Task.isCancelled {
            await Task.yield()
            switch self.state.withLock({ $0.machine.producerStatus(epoch: epoch) }) {
            case .proceed: return true
            case .stop: return false
            case .park: continue
            }
        }
        return await self.park(
            { machine, token, continuation in
                machine.producerParked(epoch: epoch, token: token, continuation: continuation)
            },
            cancelled: { machine, token in machine.producerCancelled(token: token) })
    }

    /// Parks the calling producer or sender: `parked` is its transition, with a token that
    /// `cancelled`, the transition of its task's cancellation, uses to find it. A task
    /// cancelled before it parked is resumed with `false` at once instead
    /// (`MulticastStateMachine.parkingCancelled(_:)`).
    @inlinable
    func park(
        _ parked: (inout Machine, UInt64, Machine.ProducerContinuation) -> Machine.Effects,
        cancelled: @escaping @Sendable (inout Machine, UInt64) -> Machine.Effects
    ) async -> Bool {
        let token = self.state.withLock { $0.machine.takeToken() }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: Machine.ProducerContinuation) in
                self.transition { machine in
                    // Checked under the lock: if the cancellation handler already ran, it
                    // found nothing to unpark, so parking now would never be undone.
                    Task.isCancelled
                        ? machine.parkingCancelled(continuation) : parked(&machine, token, continuation)
                }
            }
        } onCancel: {
            self.transition { cancelled(&$0, token) }
        }
    }

    /// How many times an upstream's producer yields, re-checking for room, before it parks.
    @inlinable
    static var yieldsBeforeParking: Int { 4 }

    /// The epoch of a push-fed storage (subjects): there is only one.
    @inlinable
    static var pushEpoch: UInt64 { Machine.pushEpoch }

    /// A subject's synchronous `send`: never waits; ignored after completion.
    ///
    /// Always inlined, as `offer` is: the compiler stopped inlining it once `offer` grew by
    /// its follow-up, which cost a subject's send 26 instructions (`compare --only lossy-send`).
    @inlinable
    @inline(__always)
    func send(_ element: Element) {
        _ = self.offer(element, epoch: Self.pushEpoch, respectingBounds: false)
    }

    /// A subject's suspending send: waits while a bounded subscriber is full, or while
    /// other senders wait before it; the senders that wait go in first-in-first-out
    /// (`MulticastStateMachine.senderParked`). A cancelled task stops waiting and sends at
    /// once, past the bound, so nothing is lost. Returns `false` if the subject had
    /// completed (the element was ignored).
    ///
    /// Unlike an upstream's producer (`waitForRoom(epoch:)`), a sender that finds no room
    /// does not yield a few times before it parks: it takes its place in line at once, or a
    /// sender coming later could go in first while it yields. Parking costs less here
    /// anyway: the transition that makes room appends the parked senders' elements itself,
    /// so no subscriber waits for a sender to wake up.
    @inlinable
    @discardableResult
    func sendWhenReady(_ element: Element) async -> Bool {
        switch self.offerIfRoom(element) {
        case .produced: return true
        case .stop: return false
        case .noRoom: break
        }
        if !Task.isCancelled, await self.waitToSend(element) { return true }
        // Cancelled before it parked, or the subject completed (then this is ignored).
        return self.offer(element, epoch: Self.pushEpoch, respectingBounds: false) != .stop
    }

    /// Parks a subject's sender with `element` until the machine has appended it, in its
    /// turn (`true`), or the subject completed (`false`). A task cancelled while parked stops
    /// waiting: its element goes in at once, past the bound (`true`); one cancelled before
    /// it parked gets `false` at once, and its caller sends the element itself.
    @inlinable
    func waitToSend(_ element: Element) async -> Bool {
        await self.park(
            { machine, token, continuation in
                machine.senderParked(element, token: token, continuation: continuation)
            },
            cancelled: { machine, token in machine.senderCancelled(token: token) })
    }

    /// A subject's `send(contentsOf:)`: sends each element as `sendWhenReady` does, until
    /// the sequence ends, the task is cancelled or the subject completes. A completed subject
    /// returns at once, without iterating.
    ///
    /// The sequence is iterated in a task of its own (`feeding`), so that the subject's
    /// completion can end the call even while it waits inside the sequence's `next()`: the
    /// completion cancels that task, which the sequence sees as the cancellation of its
    /// iteration. Cancelling the caller's task instead would leak into the caller. The task
    /// captures `actor`, so it runs on the caller's actor (the sequence and its iterator,
    /// which need not be `Sendable`, stay in the caller's isolation), and this call waits
    /// for it, forwarding its own cancellation: the task never outlives the call. Only one
    /// of the two tasks runs at a time, the caller waiting for the other.
    ///
    /// A sequence that ignores cancellation keeps the call until the `next()` it is in
    /// returns; after a completion, what it returns then is ignored like any later send.
    @inlinable
    func send<Elements: AsyncSequence>(
        contentsOf elements: Elements, isolation actor: isolated (any Actor)?
    ) async throws(Elements.Failure) where Elements.Element == Element {
        guard self.state.withLock({ $0.machine.terminal == nil }) else { return }
        let feeding = Task { () async -> Result<Void, Elements.Failure> in
            _ = actor  // captured: the task runs on the caller's actor
            do throws(Elements.Failure) {
                var iterator = elements.makeAsyncIterator()
                var sequenceEnded = false
                while !Task.isCancelled {
                    guard let element = try await iterator.next(isolation: actor) else {
                        sequenceEnded = true
                        break
                    }
                    guard await self.sendWhenReady(element) else { break }
                }
                // The subject completed and the sequence has not ended: it may not have seen
                // the cancellation the completion promises (its element was waiting for room,
                // the completion cancelled this task between two pulls, or it came as the
                // sequence's `next()` was returning, which no handler can tell apart). Ask it
                // once more, in this task, cancelled (an `AsyncStream` calls `onTermination`
                // then); what it returns is ignored like any send after completion. A
                // cancelled caller alone stops between two pulls without asking.
                if !sequenceEnded, self.state.withLock({ $0.machine.terminal != nil }) {
                    withUnsafeCurrentTask { $0?.cancel() }
                    _ = try? await iterator.next(isolation: actor)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let observer = self.observeCompletion { feeding.cancel() }
        defer { if let observer { self.stopObservingCompletion(observer) } }
        try await withTaskCancellationHandler {
            await feeding.value
        } onCancel: {
            feeding.cancel()
        }.get()
    }

    /// Calls `onCompletion` once when the storage completes, outside the lock; at once (and
    /// returns `nil`) if it already has. Otherwise returns the token that
    /// `stopObservingCompletion(_:)` takes.
    @inlinable
    func observeCompletion(_ onCompletion: @escaping @Sendable () -> Void) -> UInt64? {
        var token: UInt64? = nil
        let work = self.state.withLock { state -> OutsideLock? in
            token = state.machine.completionObserverAdded(onCompletion)
            guard token == nil else { return nil }
            // Completed already: it is told at once, as the end of a critical section would.
            return OutsideLock(notices: Machine.Notices(completionObservers: [(0, onCompletion)]))
        }
        self.perform(work)
        return token
    }

    /// Forgets the completion observer `token` (its `send(contentsOf:)` returned). Harmless
    /// if it was already told.
    @inlinable
    func stopObservingCompletion(_ token: UInt64) {
        self.state.withLock { $0.machine.completionObserverRemoved(token: token) }
    }

    /// Sends `transform(latest)` in the transition that read `latest` (a current-value
    /// subject's atomic update). Ignored after completion or without a latest element.
    /// Ends as `offer` does.
    func updateLatest(_ transform: (Element) -> Element) {
        var resuming: [Machine.SubscriberContinuation] = []
        let (produced, followUp) = self.state.withLock { state in
            let produced = state.machine.latestElementUpdated(by: transform, resuming: &resuming)
            if state.machine.tailWatchedUntil != 0, state.machine.appendObserved() {
                self.publishTail(of: state.machine)
            }
            return (produced, state.machine.followUp.rawValue != 0)
        }
        if followUp { self.producerFollowUp() }
        if let produced { self.perform(delivering: produced, to: resuming) }
    }
}
