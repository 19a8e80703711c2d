/// Owns a ``MulticastStateMachine`` behind a lock and carries out the effects of its
/// transitions — resuming continuations, starting and cancelling the upstream task, the
/// keep-alive timer — always *after* the lock is released.
///
/// Every face of the library (`share`, `replay`, `multicast`, the subjects) is a thin
/// wrapper around one storage.
@usableFromInline
final class MulticastStorage<Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias Machine = MulticastStateMachine<Element, Failure>
    /// Runs one upstream iteration, feeding the storage through the sink.
    @usableFromInline
    typealias UpstreamBody = @Sendable (UpstreamSink) async -> Void

    @usableFromInline
    struct State: Sendable {
        @usableFromInline
        var machine: Machine
        @usableFromInline
        var upstreamTask: (epoch: UInt64, task: Task<Void, Never>)?
        /// The last cancelled upstream task. The next one waits for it to end, so that two
        /// upstream iterations (or a source's `stop` and the next `start`) never overlap.
        @usableFromInline
        var retiringTask: Task<Void, Never>?
        /// The keep-alive timer task, while the machine says one runs.
        @usableFromInline
        var timerTask: Task<Void, Never>?
        /// Names `timerTask`: a timer task that finds another generation here (or no task)
        /// was replaced or cancelled, and ends without acting.
        @usableFromInline
        var timerGeneration: UInt64 = 0
        /// When the open window (keep-alive, or replay expiry) closes, on `clock`.
        @usableFromInline
        var timerDeadline = Duration.zero
        /// When the timer task wakes up next, on `clock`: the deadline, or a day from when it
        /// fell asleep if that is earlier. `nil` until its first step decides.
        @usableFromInline
        var timerWakeUp: Duration?
        @usableFromInline
        var nextProducerToken: UInt64 = 0
        /// Told once, outside the lock, when a push-fed storage completes: each running
        /// `send(contentsOf:)` stops pulling its sequence (see `observeCompletion(_:)`).
        @usableFromInline
        var completionObservers: [(token: UInt64, onCompletion: @Sendable () -> Void)] = []
        @usableFromInline
        var nextCompletionObserverToken: UInt64 = 0
        /// Observers of the subscriber count (`subscriberCounts`).
        @usableFromInline
        var countObservers = SubscriberCountObservers()

        @inlinable
        init(machine: Machine) {
            self.machine = machine
        }
    }

    @usableFromInline
    let state: Lock<State>
    @usableFromInline
    let upstreamBody: UpstreamBody?
    @usableFromInline
    let keepAlive: Duration
    /// How long a replay cache outlives its stopped upstream (`ReplayExpiry.afterWindow`).
    @usableFromInline
    let replayExpiration: Duration
    /// The clock of the keep-alive and replay-expiry windows.
    @usableFromInline
    let clock: TimerClock
    /// Lets a subscriber that caught up wait briefly for a busy producer instead of
    /// suspending; every producer path records its offers here.
    @usableFromInline
    let catchUp = CatchUpSpin()
    /// `unsubscribe(_:)`, as formed where the storage was created, for a subscription's
    /// `deinit`.
    ///
    /// Why: a generic class's `deinit` only exists unspecialized, and the unspecialized
    /// `unsubscribe` looks up generic metadata (tuples, the machine's types) while it holds
    /// the lock, which made joining and leaving 2–3× slower under contention. The
    /// storage is created by inlined code that knows `Element` and `Failure`, so this
    /// closure calls the specialized `unsubscribe`; it costs one closure per storage, not
    /// per subscriber.
    @usableFromInline
    let leave: @Sendable (MulticastStorage, SubscriberID) -> Void

    @inlinable
    init(
        policy: SharedBufferingPolicy,
        replay: Int,
        mode: UpstreamMode,
        keepAlive: Duration = .zero,
        replayExpiration: Duration? = nil,
        clock: TimerClock = .continuous,
        upstream: UpstreamBody?
    ) {
        assert(keepAlive >= .zero, "the public faces check keepAlive")
        assert((replayExpiration ?? .zero) >= .zero, "the public faces check replayExpiration")
        assert((upstream == nil) == (mode == .push), "only push-fed storages have no upstream")
        // nil, or one as long as forever: the cache never expires.
        let expiry: ReplayExpiry
        switch replayExpiration {
        case nil: expiry = .never
        case .zero?: expiry = .immediately
        case let window? where window >= Self.longestKeepAlive: expiry = .never
        case _?: expiry = .afterWindow
        }
        // The same threshold: a window as long as forever is no window, and has no timer,
        // so that no clock (one that jumps far ahead, one that fails) can close it.
        let lingering: KeepAlive
        switch keepAlive {
        case .zero: lingering = .off
        case Self.longestKeepAlive...: lingering = .forever
        default: lingering = .window
        }
        self.state = Lock(
            State(
                machine: Machine(
                    policy: policy, replay: replay, mode: mode, keepAlive: lingering, replayExpiry: expiry)))
        self.upstreamBody = upstream
        self.keepAlive = Swift.min(keepAlive, Self.longestKeepAlive)
        self.replayExpiration = Swift.min(replayExpiration ?? .zero, Self.longestKeepAlive)
        self.clock = clock
        self.leave = { storage, id in storage.unsubscribe(id) }
    }

    /// How long `window` lasts: the storage's configuration (the machine decides which window
    /// is open, `MulticastStateMachine.timedWindow`).
    @inlinable
    func length(of window: Machine.TimerWindow) -> Duration {
        switch window {
        case .keepAlive: return self.keepAlive
        case .replayExpiry: return self.replayExpiration
        }
    }

    /// A keep-alive or replay-expiry window this long or longer (about 35,000 years) is
    /// forever, for a process: it is never timed (`KeepAlive.forever`, `ReplayExpiry.never`).
    /// Shorter ones are, and their deadlines never overflow.
    @inlinable
    static var longestKeepAlive: Duration { .seconds(1 << 40) }

    /// `instant + window`, or the largest `Duration` where that sum would overflow: a clock
    /// read near `Duration`'s limit (a user's clock may jump there) must not trap under the
    /// lock. Such a deadline is never reached; the window then stays open, as for a clock
    /// that stands still.
    @inlinable
    static func saturating(_ instant: Duration, plus window: Duration) -> Duration {
        let (sum, overflow) = instant.attoseconds.addingReportingOverflow(window.attoseconds)
        guard overflow else { return Duration(attoseconds: sum) }
        return Duration(attoseconds: window.attoseconds > 0 ? .max : .min)
    }

    /// When the window the machine's timer times now (`MulticastStateMachine.timedWindow`)
    /// closes, if it opens at `now`.
    @inlinable
    func windowDeadline(_ machine: Machine, from now: Duration) -> Duration {
        Self.saturating(now, plus: self.length(of: machine.timedWindow))
    }

    /// When the timer wakes next: at `deadline`, or after its longest sleep from `now`.
    @inlinable
    static func wakeUp(for deadline: Duration, from now: Duration) -> Duration {
        Swift.min(deadline, Self.saturating(now, plus: Self.longestTimerSleep))
    }

    /// The timer task never sleeps longer than this at once: it wakes, finds the deadline
    /// still ahead, and sleeps again, so that no duration is too long for the clock.
    @inlinable
    static var longestTimerSleep: Duration { .seconds(86_400) }

    @inlinable
    var subscriberCount: Int {
        self.state.withLock { $0.machine.subscriberCount }
    }

    // MARK: Observing the subscriber count

    /// A change of the subscriber count to announce to its observers, outside the lock.
    @usableFromInline
    typealias CountChange = SubscriberCountObservers.Change

    /// Under the lock, after a transition: the change to announce, if the count changed
    /// since the observers were last told (and there are observers).
    @inlinable
    static func countChange(_ state: inout State) -> CountChange? {
        state.countObservers.change(to: state.machine.subscriberCount)
    }

    /// Offers `change`, if any, to its observers. The usual `nil` costs a test, not a call.
    @inlinable
    @inline(__always)
    static func announce(_ change: CountChange?) {
        if let change { change.offer() }
    }

    /// Registers an observer of the subscriber count; it is offered the current count first.
    @inlinable
    func observeSubscriberCount() -> SubscriberCountCell {
        let cell = SubscriberCountCell()
        let first = self.state.withLock { state in
            state.countObservers.add(cell, count: state.machine.subscriberCount)
        }
        first.offer()
        return cell
    }

    @inlinable
    func stopObservingSubscriberCount(_ cell: SubscriberCountCell) {
        self.state.withLock { $0.countObservers.remove(cell) }
        cell.end()
    }

    /// Returns once at least `count` subscribers are registered; throws if the task is
    /// cancelled first.
    @inlinable
    func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        let cell = self.observeSubscriberCount()
        defer { self.stopObservingSubscriberCount(cell) }
        while let current = await cell.next(isolation: nil) {
            if current >= count { return }
        }
        throw CancellationError()
    }

    // MARK: Running transitions

    /// Applies `transition` under the lock, then performs its effects outside it.
    @inline(__always)
    @inlinable
    func transition(_ transition: (inout Machine) -> Machine.Effects) {
        let work = self.state.withLock { state in self.outsideLock(transition(&state.machine), &state) }
        self.carryOut(work)
    }

    /// What a transition leaves to do once the lock is released: its effects, the tasks to
    /// cancel, and the subscriber count to announce.
    @usableFromInline
    struct OutsideLock {
        @usableFromInline var effects: Machine.Effects
        @usableFromInline var upstreamTask: Task<Void, Never>?
        @usableFromInline var timerTask: Task<Void, Never>?
        @usableFromInline var change: CountChange?

        @inlinable
        init(
            effects: Machine.Effects, upstreamTask: Task<Void, Never>?, timerTask: Task<Void, Never>?,
            change: CountChange?
        ) {
            self.effects = effects
            self.upstreamTask = upstreamTask
            self.timerTask = timerTask
            self.change = change
        }
    }

    /// Under the lock, after a transition returned `effects`: starts the tasks they ask
    /// for, and takes what must be done outside the lock.
    @inlinable
    func outsideLock(_ effects: Machine.Effects, _ state: inout State) -> OutsideLock {
        OutsideLock(
            effects: effects, upstreamTask: self.startAndTakeTasks(&state, for: effects),
            timerTask: self.armKeepAlive(&state, for: effects), change: Self.countChange(&state))
    }

    /// Outside the lock: performs what `outsideLock` took.
    @inlinable
    func carryOut(_ work: OutsideLock) {
        self.perform(work.effects, cancelling: work.upstreamTask, work.timerTask)
        Self.announce(work.change)
    }

    /// Under the lock: starts the upstream task `effects` asks for, and takes the one it
    /// cancels (to be cancelled outside the lock).
    @inlinable
    func startAndTakeTasks(_ state: inout State, for effects: Machine.Effects) -> Task<Void, Never>? {
        if let epoch = effects.startUpstream { self.startUpstream(epoch: epoch, in: &state) }
        return Self.takeUpstreamTask(&state, for: effects)
    }

    @inlinable
    static func takeUpstreamTask(_ state: inout State, for effects: Machine.Effects) -> Task<Void, Never>? {
        guard let epoch = effects.cancelUpstream, let running = state.upstreamTask,
            running.epoch == epoch
        else { return nil }
        state.upstreamTask = nil
        state.retiringTask = running.task
        return running.task
    }

    /// Under the lock: opens the window `effects` asks for (a new deadline, and the timer
    /// task if none runs), or takes the timer task to cancel outside the lock.
    ///
    /// A window that ends before the instant the running timer task sleeps until replaces
    /// that task (the old one is taken, to be cancelled outside the lock), so that each
    /// window ends at its own deadline: the clock went back (a user's clock need not be
    /// monotonic), or the timer was timing a longer window (a replay cache's expiry). Else
    /// the task is only re-armed: it finds the new deadline when it wakes.
    @inlinable
    func armKeepAlive(_ state: inout State, for effects: Machine.Effects) -> Task<Void, Never>? {
        switch effects.keepAliveTimer {
        case .none:
            return nil
        case .restart:
            state.timerDeadline =
                self.windowDeadline(state.machine, from: self.clock.now())
            guard let wakeUp = state.timerWakeUp, state.timerDeadline < wakeUp else { return nil }
            let replaced = state.timerTask
            self.startTimer(&state)
            return replaced
        case .start:
            state.timerDeadline =
                self.windowDeadline(state.machine, from: self.clock.now())
            self.startTimer(&state)
            return nil
        case .cancel:
            defer {
                state.timerTask = nil
                state.timerWakeUp = nil
            }
            return state.timerTask
        }
    }

    /// Under the lock: creates the timer task of the open window, of a new generation.
    @inlinable
    func startTimer(_ state: inout State) {
        state.timerGeneration &+= 1
        let generation = state.timerGeneration
        state.timerWakeUp = nil
        // Creating a task only enqueues it; it takes the lock when it runs.
        state.timerTask = Task.detached { await self.runKeepAliveTimer(generation: generation) }
    }

    /// The timer task: sleeps on `clock` until the deadline of the latest window (it moves
    /// each time the last subscriber leaves), then lets the machine decide. When that opens
    /// the next window (the keep-alive closed, the upstream stopped, and now the replay
    /// cache's expiry window opens) it times that one too.
    ///
    /// Only a cancellation ends it early, and only the storage cancels it: when the upstream
    /// ended, or when it replaced the task (`armKeepAlive`), in both cases after updating the
    /// state, so the task leaves it alone. A sleep that throws while the task is not
    /// cancelled is the clock failing (user code): the clock cannot time the window, so the
    /// window open then closes at once, as if its deadline had passed. Never "the timer is
    /// gone but the machine believes it runs", which left every later window open for good.
    ///
    /// A sleep that returns is trusted: the instant it slept toward has come, whatever the
    /// clock reads afterwards (`now` never counts as earlier than that instant). A clock set
    /// back between its sleep returning and the timer reading it cannot reopen a window, and
    /// a sleep that returns early, even at once while `now` creeps, ends the window instead
    /// of making the timer poll the clock until the deadline: each sleep moves the timer's
    /// time at least to its wake-up instant, so the loop sleeps at most once per
    /// `longestTimerSleep` of the window.
    @inlinable
    func runKeepAliveTimer(generation: UInt64) async {
        var sleepFailed = false
        // The instant the last sleep returned at (trusted), or `nil` before the first sleep.
        var sleptUntil: Duration? = nil
        while true {
            typealias Step = (
                sleepUntil: Duration?, effects: Machine.Effects, upstream: Task<Void, Never>?, change: CountChange?
            )
            let closesNow = sleepFailed
            let trusted = sleptUntil
            let step = self.state.withLock { state -> Step? in
                // Cancelled or replaced, after a sleep that returned or failed anyway.
                guard state.timerGeneration == generation, state.timerTask != nil else { return nil }
                let now = trusted.map { Swift.max(self.clock.now(), $0) } ?? self.clock.now()
                if state.timerDeadline > now, !closesNow {
                    state.timerWakeUp = Self.wakeUp(for: state.timerDeadline, from: now)
                    return (state.timerWakeUp, Machine.Effects(), nil, nil)
                }
                let effects = state.machine.keepAliveExpired()
                let upstream = self.startAndTakeTasks(&state, for: effects)
                guard effects.keepAliveTimer == .start else {
                    state.timerTask = nil
                    state.timerWakeUp = nil
                    return (nil, effects, upstream, Self.countChange(&state))
                }
                // A new window opened: this task times it.
                state.timerDeadline =
                    self.windowDeadline(state.machine, from: now)
                state.timerWakeUp = Self.wakeUp(for: state.timerDeadline, from: now)
                return (state.timerWakeUp, effects, upstream, Self.countChange(&state))
            }
            guard let step else { return }
            self.perform(step.effects, cancelling: step.upstream)
            Self.announce(step.change)
            guard let wakeUp = step.sleepUntil else { return }
            do {
                try await self.clock.sleepUntil(wakeUp)
                sleptUntil = wakeUp
            } catch {
                if Task.isCancelled { return }  // the upstream ended, or a new task replaced it
                sleepFailed = true  // the clock failed: the open window closes at once
            }
        }
    }

    @inlinable
    func perform(
        _ effects: Machine.Effects,
        cancelling upstreamTask: Task<Void, Never>? = nil,
        _ timerTask: Task<Void, Never>? = nil
    ) {
        for continuation in effects.subscribers {
            continuation.resume(returning: effects.subscriberResult)
        }
        for (continuation, element) in effects.handedOver {
            continuation.resume(returning: .success(element))
        }
        if effects.parkedElementsAppended > 0 { self.catchUp.recordOffer() }
        for continuation in effects.producers {
            continuation.resume(returning: effects.producerResult)
        }
        upstreamTask?.cancel()
        timerTask?.cancel()
    }

    /// Creates and registers the task of upstream iteration `epoch`. Called under the lock,
    /// in the same critical section in which the machine decided to start it, so that the
    /// task is registered before anyone can cancel the epoch, and chained after the
    /// previous (cancelled) iteration: two iterations of the base never overlap. Creating
    /// a task only enqueues it; nothing runs or is resumed here.
    @inlinable
    func startUpstream(epoch: UInt64, in state: inout State) {
        guard let body = self.upstreamBody else {
            preconditionFailure("a push-fed storage was asked to start an upstream")
        }
        let sink = UpstreamSink(storage: self, epoch: epoch)
        let previous = state.retiringTask
        // Detached: the upstream must not inherit the priority or task-locals of whichever
        // subscriber happened to ask first.
        state.upstreamTask = (
            epoch,
            Task.detached {
                // A base that reacts slowly to cancellation may still be inside `next()`.
                await previous?.value
                // Cancelled before it began: do not even create the base iterator.
                guard sink.storage.state.withLock({ $0.machine.isCurrent(epoch: epoch) }) else { return }
                await body(sink)
            }
        )
    }

    // MARK: Subscribers

    /// Registers a subscriber. Its `connectRule` is the machine's to decide
    /// (`MulticastStateMachine.subscriberJoined(policy:connectRule:)`): `.onDemand` is kept
    /// with the subscriber, and `.atSubscriberCount(n)` connects the upstream if it is idle
    /// and at least `n` subscribers are now present.
    @inlinable
    func subscribe(policy: SharedBufferingPolicy? = nil, connectRule: ConnectRule = .never) -> SubscriberID {
        let (id, work) = self.state.withLock { state in
            let (id, effects) = state.machine.subscriberJoined(policy: policy, connectRule: connectRule)
            return (id, self.outsideLock(effects, &state))
        }
        self.carryOut(work)
        return id
    }

    @inlinable
    func unsubscribe(_ id: SubscriberID) {
        self.transition { $0.subscriberLeft(id) }
    }

    /// What `refill` found.
    @usableFromInline
    enum Refill {
        /// The next element (and `batch` holds the ones after it that were ready).
        case element(Element)
        /// The subscriber has left: the end, its error, or `nil` after a cancellation or an
        /// eviction (`report.evicted` tells which).
        case ended(Result<Element?, Failure>)
        /// Nothing ready: call `wait`.
        case mustWait
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
    /// - `offersWhenCaughtUp`: set to the producers' offer count when this read took every
    ///   element produced so far and the subscriber skips empty reads
    ///   (`MulticastStateMachine.skipsEmptyReads(for:mayWaitForOffers:)`), else 0
    ///   (`ElementBatch.offersWhenCaughtUp`). If that count has not moved by the next
    ///   refill, no element was counted since, and that refill returns `.mustWait` at once,
    ///   without the cancellation check, the lock and the read. This is safe whatever the
    ///   count says, because `wait` reads again under the lock before it stores the
    ///   continuation: it returns an element that arrived uncounted, the end, an error or
    ///   an eviction at once, and its cancellation handler removes a cancelled subscriber
    ///   before that read. The count only decides how often that happens.
    /// - `connectsOnDemand`: unused. Whether the subscriber's demand connects the upstream is
    ///   its connect rule, which the machine keeps since it joined (`subscribe`); the faces
    ///   still pass it.
    /// - `report`: what the subscriber missed just before the element (or end) returned,
    ///   and whether its end is an eviction.
    @inlinable
    func refill(
        _ id: SubscriberID, batch: inout [Element], offersWhenCaughtUp: inout UInt32, report: inout ReadReport,
        connectsOnDemand: Bool, mayWaitForOffers: Bool
    ) -> Refill {
        // Emptying an array is a generic call of about 70 instructions even when it is
        // already empty, which it is after every read that took a single element.
        if !batch.isEmpty { batch.removeAll(keepingCapacity: true) }
        let caughtUpOffers = offersWhenCaughtUp
        if caughtUpOffers != 0 {
            offersWhenCaughtUp = 0
            if self.catchUp.offerCount == caughtUpOffers { return .mustWait }
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
        switch action {
        case .element(let element, let producers):
            for producer in producers { producer.resume(returning: true) }
            return .element(element)
        case .elementReleasingSenders(let element, let effects):
            self.perform(effects)
            return .element(element)
        case .terminal(let result):
            return .ended(result)
        case .suspend:
            return .mustWait  // the upstream, if this demand started it, is already running
        case .gap:
            return .gap
        }
    }

    /// The asynchronous part of a subscriber's `next()`, after `refill` found nothing: suspends until an
    /// element or terminal event arrives, or the task is cancelled (it then leaves, and
    /// this returns `nil` at once). With `report.reportsGaps`, `nil` with `report.missed > 0`
    /// is a gap found before suspending: the subscriber is still subscribed.
    /// `connectsOnDemand`: unused, as in `refill`.
    @inlinable
    func wait(
        _ id: SubscriberID, report: inout ReadReport, connectsOnDemand: Bool, isolation actor: isolated (any Actor)?
    ) async throws(Failure) -> Element? {
        var suspendedReport = report
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: Machine.SubscriberContinuation) in
                self.subscriberWaiting(id, continuation: continuation, report: &suspendedReport)
            }
        } onCancel: {
            self.unsubscribe(id)
        }
        report = suspendedReport
        return try result.get()
    }

    /// The subscriber suspended with `continuation`: stores it, or resumes it at once
    /// (`MulticastStateMachine.subscriberWaiting`). `transition` with a path of its own for
    /// the usual outcome, which has no effects to move out of the lock and perform.
    @inlinable
    func subscriberWaiting(
        _ id: SubscriberID, continuation: Machine.SubscriberContinuation, report: inout ReadReport
    ) {
        let work = self.state.withLock { state -> OutsideLock? in
            switch state.machine.subscriberWaiting(id, continuation: continuation, report: &report) {
            case .stored(let epoch):
                if let epoch { self.startUpstream(epoch: epoch, in: &state) }
                // Storing a continuation changes no count; checked all the same, as every
                // transition does.
                guard let change = Self.countChange(&state) else { return nil }
                return OutsideLock(effects: Machine.Effects(), upstreamTask: nil, timerTask: nil, change: change)
            case .resumed(let effects):
                return self.outsideLock(effects, &state)
            }
        }
        if let work { self.carryOut(work) }
    }

    /// One read of `next()` under the lock; starts the upstream if this demand asks for it.
    /// `catchUpBatch`: nothing was ready and the upstream was not just started, and this
    /// subscriber may wait briefly for that many elements before suspending
    /// (`MulticastStateMachine.catchUpBatch(for:)`, `CatchUpSpin`). `offersWhenCaughtUp`:
    /// the producers' offer count, if the read took every element produced so far and the
    /// subscriber skips empty reads; see `refill`.
    @inlinable
    func takeNext(
        _ id: SubscriberID, batch: inout [Element]?, report: inout ReadReport, mayWaitForOffers: Bool,
        offersWhenCaughtUp: inout UInt32
    ) -> (action: Machine.NextAction, catchUpBatch: Int?) {
        offersWhenCaughtUp = 0
        let (action, catchUpBatch, change) = self.state.withLock { state -> (Machine.NextAction, Int?, CountChange?) in
            let action = state.machine.nextRequested(id, batch: &batch, report: &report)
            switch action {
            case .suspend(let epoch?):
                self.startUpstream(epoch: epoch, in: &state)
                return (action, nil, nil)
            case .suspend(nil):
                return (action, state.machine.catchUpBatch(for: id), nil)
            case .element:
                // Read under the lock: an element produced after this read is counted after
                // the producer released the lock, so after this load (an element read here
                // but counted later moves the count: a skip missed, nothing worse).
                if report.caughtUp, state.machine.skipsEmptyReads(for: id, mayWaitForOffers: mayWaitForOffers) {
                    offersWhenCaughtUp = self.catchUp.offerCount
                }
                return (action, nil, nil)
            case .elementReleasingSenders:
                // Not caught up: the senders' elements came after what it took.
                return (action, nil, nil)
            case .terminal:
                // The subscriber has left.
                return (action, nil, Self.countChange(&state))
            case .gap:
                return (action, nil, nil)
            }
        }
        Self.announce(change)
        return (action, catchUpBatch)
    }

    // MARK: Producers

    /// Offers an element from the upstream iteration `epoch`: the hot path of every
    /// producer. One lock acquisition, then the waiting subscribers are resumed with
    /// `element` (usually none; the array then never allocates). `.park` means a bounded
    /// subscriber is full and `respectingBounds` is true: call ``waitForRoom(epoch:)``.
    @inlinable
    func offer(_ element: Element, epoch: UInt64, respectingBounds: Bool) -> Machine.ProduceOutcome {
        var resuming: [Machine.SubscriberContinuation] = []
        let outcome = self.state.withLock {
            $0.machine.elementProduced(element, epoch: epoch, respectingBounds: respectingBounds, resuming: &resuming)
        }
        if outcome != .stop { self.delivered(element, resuming: resuming) }
        return outcome
    }

    /// `offer` for a subject's `send(waitingForRoom:)`: produces only if every bounded
    /// subscriber has room; `nil` (nothing produced) otherwise.
    @inlinable
    func offerIfRoom(_ element: Element) -> Machine.ProduceOutcome? {
        var resuming: [Machine.SubscriberContinuation] = []
        let outcome = self.state.withLock {
            $0.machine.elementProducedIfRoom(element, epoch: Self.pushEpoch, resuming: &resuming)
        }
        if outcome == .proceed { self.delivered(element, resuming: resuming) }
        return outcome
    }

    /// After an element was produced, outside the lock: a subscriber catching up may take
    /// it, and the subscribers that were waiting for it get it.
    @inlinable
    func delivered(_ element: Element, resuming: [Machine.SubscriberContinuation]) {
        self.catchUp.recordOffer()
        for continuation in resuming {
            continuation.resume(returning: .success(element))
        }
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
        let token = self.state.withLock { state -> UInt64 in
            defer { state.nextProducerToken += 1 }
            return state.nextProducerToken
        }
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
    @inlinable
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
        if let outcome = self.offerIfRoom(element) { return outcome != .stop }
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
                // Whether a cancellation (the completion's, or the caller's) reached the
                // sequence inside its `next()`. One that comes in the instant between the
                // sequence's `next()` returning and this scope ending counts too, although the
                // sequence missed it: asking again instead would hold the call forever on a
                // sequence that ignores cancellation.
                let sawCancellation = Lock(false)
                var sequenceEnded = false
                while !Task.isCancelled {
                    let pulled = await withTaskCancellationHandler(
                        operation: { () async -> Result<Element?, Elements.Failure> in
                            do throws(Elements.Failure) {
                                return .success(try await iterator.next(isolation: actor))
                            } catch {
                                return .failure(error)
                            }
                        },
                        onCancel: { sawCancellation.withLock { $0 = true } },
                        isolation: actor)
                    guard let element = try pulled.get() else {
                        sequenceEnded = true
                        break
                    }
                    guard await self.sendWhenReady(element) else { break }
                }
                // The subject completed between two `next()` calls (its element was waiting
                // for room, or the completion cancelled this task after a send): the sequence
                // never saw the cancellation the completion promises. Ask it once more, in this
                // task, cancelled (an `AsyncStream` calls `onTermination` then); what it
                // returns is ignored like any send after completion. A sequence that saw a
                // cancellation, and a caller's cancellation alone, are not asked again.
                if !sequenceEnded, !sawCancellation.withLock({ $0 }),
                    self.state.withLock({ $0.machine.terminal != nil })
                {
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
        let token = self.state.withLock { state -> UInt64? in
            guard state.machine.terminal == nil else { return nil }
            defer { state.nextCompletionObserverToken += 1 }
            state.completionObservers.append((state.nextCompletionObserverToken, onCompletion))
            return state.nextCompletionObserverToken
        }
        if token == nil { onCompletion() }
        return token
    }

    /// Forgets the completion observer `token` (its `send(contentsOf:)` returned). Harmless
    /// if it was already told.
    @inlinable
    func stopObservingCompletion(_ token: UInt64) {
        self.state.withLock { state in
            if let index = state.completionObservers.firstIndex(where: { $0.token == token }) {
                state.completionObservers.remove(at: index)
            }
        }
    }

    /// Sends `transform(latest)` in the transition that read `latest` (a current-value
    /// subject's atomic update). Ignored after completion or without a latest element.
    /// Ends as `offer` does.
    func updateLatest(_ transform: (Element) -> Element) {
        var resuming: [Machine.SubscriberContinuation] = []
        let produced = self.state.withLock { $0.machine.latestElementUpdated(by: transform, resuming: &resuming) }
        if let produced { self.delivered(produced, resuming: resuming) }
    }

    /// Completes a push-fed storage, and tells the completion observers. Ignored once
    /// completed.
    @inlinable
    func complete(failure: Failure?) {
        let (work, observers) = self.state.withLock { state in
            let effects = state.machine.subjectCompleted(failure: failure)
            // Taken in the same critical section: none can register once it has completed.
            defer { state.completionObservers = [] }
            return (self.outsideLock(effects, &state), state.completionObservers)
        }
        self.carryOut(work)
        for observer in observers { observer.onCompletion() }
    }

    /// What a subscriber joining now would be replayed, oldest first.
    @inlinable
    var replayCache: [Element] {
        self.state.withLock { $0.machine.replayCache }
    }

    /// Clears the replay cache for subscribers joining from now on.
    @inlinable
    func resetReplayCache() {
        self.state.withLock { $0.machine.replayCacheReset() }
    }

    /// The most recently produced element still in the buffer.
    @inlinable
    var latestElement: Element? {
        self.state.withLock { $0.machine.latestElement }
    }

    /// Starts the upstream if idle; returns the running epoch (`nil` once terminated).
    @inlinable
    func connect() -> UInt64? {
        var epoch: UInt64?
        self.transition { machine in
            let (running, effects) = machine.connectRequested()
            epoch = running
            return effects
        }
        return epoch
    }

    /// Cancels the upstream iteration `epoch` (a multicast connection).
    @inlinable
    func disconnect(epoch: UInt64) {
        self.transition { $0.connectionCancelled(epoch: epoch) }
    }

    /// The upstream iteration `epoch` ended.
    @inlinable
    func finish(epoch: UInt64, failure: Failure?) {
        let (effects, timerTask, change) = self.state.withLock { state in
            // The iteration is over: forget its task in the same critical section.
            if state.upstreamTask?.epoch == epoch { state.upstreamTask = nil }
            let effects = state.machine.upstreamEnded(epoch: epoch, failure: failure)
            return (effects, self.armKeepAlive(&state, for: effects), Self.countChange(&state))
        }
        self.perform(effects, cancelling: nil, timerTask)
        Self.announce(change)
    }
}
