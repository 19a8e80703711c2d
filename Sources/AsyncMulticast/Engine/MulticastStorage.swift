import Synchronization

// The storage: a `MulticastStateMachine` behind a lock, the handles its decisions are about
// (the upstream task, the retiring one, the timer task), and the effects of its transitions
// carried out once the lock is released.
//
// COMMANDS ABOVE THE LOCK, EVENTS BELOW IT (the rule of swift-nio's state machines). The
// storage's methods are the commands the faces call (`subscribe`, `refill`, `offer`,
// `connect`, ...); the machine's transitions are named after the events the storage observed
// (`subscriberJoined`, `nextRequested`, `elementProduced`, `connectRequested`, `timerWoke`,
// `hostWaiting`, ...). The machine decides, on everything: the storage holds no decision
// state, only handles, and reads the clock (user code) before it locks, passing the reading
// in. Each command reads:
//
//   1. lock;
//   2. one machine event;
//   3. end the critical section: `endCriticalSection(_:_:)`, still under the lock, turns the
//      event's `Effects` into the one shape of what is left to do, `OutsideLock`: it starts
//      the upstream task they ask for, as they say, and registers it (or wakes the hosted
//      `run()` they hand it to), takes the tasks to cancel, starts the timer task, and
//      carries what the machine says the observers must hear. It asks the machine nothing:
//      the event decided it all (`Effects.upstreamStart`, `Effects.notices`);
//   4. unlock, and `perform(_:)` it: resume, cancel, raise, announce. Nothing is resumed,
//      cancelled or called back while the lock is held.
//
// THE ONE SHAPE, AND ITS CHEAP FORMS. What a critical section leaves to do is an
// `OutsideLock?`, performed by `perform(_:)`, at every lock site, except on the paths of
// every delivery, read, join and leave, where the instruction gate (Benchmarks/Thresholds/
// instructions.txt) measured that building or allocating it costs: there a cheap form of the
// same shape carries the part of it that the outcome can need, and is performed by its own
// `perform`, in `performWork`'s order:
//
//   - `nil`: nothing (most joins, leaves and reads: `endCriticalSectionIfNeeded`);
//   - `QuickLeave`, `perform(_:)`: a leave's waiter resumed with `nil` and the retired
//     upstream task, two words, no allocation (a cancelled `next()` returns about 7% sooner,
//     `compare --only cancel`);
//   - a delivery, `perform(delivering:to:)`: the element and the waiting subscribers it
//     reaches, gathered by the machine into an array that is empty and never allocated
//     without waiters (`offer`, the producer's hot path: no `Effects` is built);
//   - a read's released producers, `perform(releasing:)`: carried in `NextAction.element`
//     (taking them out of the action under the lock cost a retain and a release per read).
//
// Two reads of the machine stay beside its event, both pure queries of the state the event
// left, not events: a read that took elements asks `skipsEmptyReads`, and one that must wait
// `catchUpBatch` (`takeNext`), on the reading path, where carrying their answers in every
// `NextAction` would widen each read's result; and `armTimer` reads the generation the event
// gave the timer task it asks for (`TimerTaskAction` has no payload, to keep `Effects` small).
//
// The storage is split along the machine's seams, each file beside the machine's of the
// same concern: +Subscribers (joining, leaving, the observers' commands), +Reading,
// +Producing, +Upstream (the upstream task and the timer task), +Hosting (a hosted `run()`).

/// Owns a ``MulticastStateMachine`` behind a lock and carries out the effects of its
/// transitions — resuming continuations, starting and cancelling the upstream task, the
/// timer task that times its windows and deadlines — always *after* the lock is released.
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
        /// The timer task, while the machine says one is its (`DeadlineTimer.isRunning`).
        @usableFromInline
        var timerTask: Task<Void, Never>?

        @inlinable
        init(machine: Machine) {
            self.machine = machine
        }
    }

    @usableFromInline
    let state: Lock<State>
    @usableFromInline
    let upstreamBody: UpstreamBody?
    /// Whether the upstream runs inside `run()` (an `AsyncSharedService`) instead of a
    /// detached task of its own.
    @usableFromInline
    let hosted: Bool
    /// The clock of the keep-alive and replay-expiry windows, and of soft limits. Read before
    /// the lock, and passed to the machine: before a leave that may open a window, by the
    /// timer task, and after a critical section that asked for it (`FollowUp.reading`).
    @usableFromInline
    let clock: TimerClock
    /// The machine times windows (`MulticastStateMachine.timesWindows`): a leave reads the
    /// clock before it locks, since it may open one. Fixed when the storage is made.
    @usableFromInline
    let timesWindows: Bool
    /// Lets a subscriber that caught up wait briefly for a busy producer instead of
    /// suspending; every producer path records its offers here.
    @usableFromInline
    let catchUp = CatchUpSpin()
    /// The machine's tail (how many elements were produced), stored in the critical
    /// section of every append while the machine says so (`appendObserved()`: while a batch a
    /// `.bufferingNewest` read took may still lose elements to later ones): `offer`,
    /// `offerIfRoom`, `updateLatest`, and the end of a critical section that appended
    /// parked senders' elements. A `.bufferingNewest` subscriber checks the batch it holds
    /// against it without the lock (`HeldBatch.take`).
    @usableFromInline
    let publishedTail = Atomic<Int>(0)
    /// The policy of a subscriber that names none (the machine's `defaultPolicy`), for the
    /// faces that prepare per subscriber what its policy needs (`HeldBatchSlot`).
    @usableFromInline
    let defaultPolicy: SharedBufferingPolicy
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
        hosted: Bool = false,
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
        case let window? where window >= Machine.longestWindow: expiry = .never
        case _?: expiry = .afterWindow
        }
        // The same threshold: a window as long as forever is no window, and has no timer,
        // so that no clock (one that jumps far ahead, one that fails) can close it.
        let lingering: KeepAlive
        switch keepAlive {
        case .zero: lingering = .off
        case Machine.longestWindow...: lingering = .forever
        default: lingering = .window
        }
        let machine = Machine(
            policy: policy, replay: replay, mode: mode, keepAlive: lingering, replayExpiry: expiry,
            windows: (
                Swift.min(keepAlive, Machine.longestWindow), Swift.min(replayExpiration ?? .zero, Machine.longestWindow)
            ),
            hosted: hosted)
        self.timesWindows = machine.timesWindows
        self.defaultPolicy = policy
        self.state = Lock(State(machine: machine))
        self.upstreamBody = upstream
        self.hosted = hosted
        self.clock = clock
        self.leave = { storage, id in storage.unsubscribe(id) }
    }

    /// Under the lock, after a transition that appended: publishes the machine's tail
    /// (`publishedTail`). Relaxed: a reader reads it after a critical section of its own
    /// (its read of the batch) or of its task's (a send), which the lock orders after this.
    @inlinable
    @inline(__always)
    func publishTail(of machine: borrowing Machine) {
        self.publishedTail.store(machine.tail, ordering: .relaxed)
    }

    /// The tail last published (`publishTail(of:)`), read without the lock.
    @inlinable
    @inline(__always)
    var tailPublished: Int { self.publishedTail.load(ordering: .relaxed) }

    // MARK: The end of every critical section

    /// What a critical section leaves to do once the lock is released: the one shape every
    /// command ends with (`nil`: nothing).
    ///
    /// A class, so that a command moves one word out of its lock: as a value (about 150
    /// bytes, a whole `Effects`), the usual `nil` was copied with `memcpy` out of the
    /// `withLock` closure of every join and leave (the reading paths boxed it already). Only a
    /// critical section that left something to do allocates one (see `endCriticalSection`):
    /// most joins, leaves and reads leave nothing. Those that do (an upstream to start, a
    /// count change while `subscriberCounts` is observed, a cancelled waiter to resume
    /// beside other work) pay one allocation, which measured cheaper than the copy. A leave
    /// that only resumes its waiter and retires the upstream needs none (`endLeave`): the
    /// allocation came before the waiter's resumption, and cost a cancelled `next()` about
    /// 7% of its latency (`compare --only cancel`).
    @usableFromInline
    final class OutsideLock: Sendable {
        /// What the machine's transition returned: continuations to resume.
        @usableFromInline let effects: Machine.Effects
        /// The upstream task the effects retired, to cancel.
        @usableFromInline let upstreamTask: Task<Void, Never>?
        /// The timer task the effects retired or replaced, to cancel.
        @usableFromInline let timerTask: Task<Void, Never>?
        /// The upstream task to raise, and the priority (`TaskPriority.rawValue`) the machine
        /// raised it to (MulticastStateMachine+Priority.swift).
        @usableFromInline let raise: Raise?
        /// What the observers must hear: the count's change, the completion, evictions that
        /// did not happen (MulticastStateMachine+Observers.swift).
        @usableFromInline let notices: Machine.Notices
        /// A hosted storage's `run()`, and what it must do next: run this iteration, or stop
        /// (`nil`).
        @usableFromInline let hostWakeUp: HostWakeUp?
        /// A hosted storage's ended `run()`, waiting for the last timer task: it may return.
        @usableFromInline let timersEnded: UnsafeContinuation<Void, Never>?
        /// The machine asked for the time (`FollowUp.reading`): read the clock, then tell it
        /// (`clockRead(at:through:)`), in a critical section of its own.
        @usableFromInline let readsClock: Bool
        /// The tail when it asked: the reading, taken after this critical section, times only
        /// the positions that went past a soft limit by then.
        @usableFromInline let readingTail: Int

        @inlinable
        init(
            effects: Machine.Effects = Machine.Effects(), upstreamTask: Task<Void, Never>? = nil,
            timerTask: Task<Void, Never>? = nil, raise: Raise? = nil, notices: Machine.Notices = Machine.Notices(),
            hostWakeUp: HostWakeUp? = nil, timersEnded: UnsafeContinuation<Void, Never>? = nil,
            readsClock: Bool = false,
            readingTail: Int = 0
        ) {
            self.readsClock = readsClock
            self.readingTail = readingTail
            self.effects = effects
            self.upstreamTask = upstreamTask
            self.timerTask = timerTask
            self.raise = raise
            self.notices = notices
            self.hostWakeUp = hostWakeUp
            self.timersEnded = timersEnded
        }
    }

    /// A command made of one transition without a result: lock, the event, the end of the
    /// critical section, then `perform`.
    @inline(__always)
    @inlinable
    func transition(_ event: (inout Machine) -> Machine.Effects) {
        let work = self.state.withLock { state in self.endCriticalSectionIfNeeded(event(&state.machine), &state) }
        self.perform(work)
    }

    /// `endCriticalSection`, skipped (without a call) when there is visibly nothing to do:
    /// no effects (the notices travel in them). Most joins and leaves (`compare --only
    /// churn`, `memory`).
    @inline(__always)
    @inlinable
    func endCriticalSectionIfNeeded(_ effects: Machine.Effects, _ state: inout State) -> OutsideLock? {
        if effects.isEmpty && state.machine.followUp.isEmpty { return nil }
        return self.endCriticalSection(effects, &state)
    }

    /// Under the lock, after the machine's event returned `effects`: the handles' part, with
    /// no further word from the machine. Starts and registers the upstream task they ask
    /// for at the priority they say (a hosted storage's `run()` is woken instead, if they say
    /// so, and the task still stopping raised), takes the one they cancel, starts or takes
    /// the timer task (`armTimer`), and carries what the observers must hear. The rest is
    /// `perform(_:)`'s.
    ///
    /// Never inlined: a command has one call, on its slow path, and inlining the whole end
    /// into each made the readers' hot paths too large to inline in turn.
    @inlinable
    @inline(never)
    func endCriticalSection(
        _ effects: Machine.Effects, _ state: inout State
    ) -> OutsideLock? {
        var raise: Raise? = nil
        var hostWakeUp: HostWakeUp? = nil
        if let start = effects.upstreamStart {
            if self.hosted {
                // `run()` creates the task at the waiting subscribers' priority
                // (`startHostedUpstream`); until then they wait behind the one still stopping.
                hostWakeUp = start.hostWakeUp.map { ($0, .some(start.epoch)) }
                if let stopping = state.retiringTask, let priority = start.raiseStopping {
                    raise = Raise(task: stopping, priority: priority)
                }
            } else {
                self.startUpstream(start, in: &state)
            }
        }
        let upstreamTask = Self.takeUpstreamTask(&state, for: effects)
        let timerTask = self.armTimer(&state, for: effects.timerTask)
        if effects.parkedElementsAppended > 0, state.machine.tailWatchedUntil != 0, state.machine.appendObserved() {
            self.publishTail(of: state.machine)
        }
        var notices = effects.notices
        var readsClock = false
        var readingTail = 0
        if _slowPath(!state.machine.followUp.isEmpty) {
            // A transition that evicted left its notices and its wish for the time to the end
            // of the critical section (`FollowUp`): rare, and never on the producer's usual path.
            notices.merge(state.machine.takeNotices())
            readsClock = state.machine.followUp.contains(.reading)
            readingTail = state.machine.tail
        }
        // Nothing left to do, as for most joins and leaves: no allocation (`compare --only
        // churn` lost about 13% of its joins per second to one `OutsideLock` per join and
        // per leave).
        if upstreamTask == nil, timerTask == nil, notices.isEmpty, hostWakeUp == nil, raise == nil,
            effects.firstSubscriber == nil, effects.producers.isEmpty, effects.handedOver.isEmpty,
            effects.parkedElementsAppended == 0, !readsClock
        {
            return nil
        }
        return OutsideLock(
            effects: effects, upstreamTask: upstreamTask, timerTask: timerTask, raise: raise, notices: notices,
            hostWakeUp: hostWakeUp, readsClock: readsClock, readingTail: readingTail)
    }

    /// Outside the lock: does what a critical section left to do, in this order: resumes the
    /// subscribers and producers, cancels the retired tasks, raises the upstream task,
    /// announces the subscriber count, tells the completion observers, the eviction
    /// watchers and the drain observers, resumes a hosted `run()`. `nil`: nothing.
    ///
    /// Always inlined, so that the usual `nil` costs its test at the call site.
    @inline(__always)
    @inlinable
    func perform(_ work: OutsideLock?) {
        if let work { self.performWork(work) }
    }

    /// The cheap form of a leave (`unsubscribe`): its waiter resumed with `nil`, then the
    /// retired upstream task cancelled, in `performWork`'s order.
    @inline(__always)
    @inlinable
    func perform(_ quick: QuickLeave) {
        quick.waiter?.resume(returning: .success(nil))
        quick.upstreamTask?.cancel()
    }

    /// The cheap form of a delivery (`offer`): a subscriber catching up may take `element`,
    /// and the subscribers that were waiting for it get it.
    @inlinable
    @inline(__always)
    func perform(delivering element: Element, to resuming: [Machine.SubscriberContinuation]) {
        self.catchUp.recordOffer()
        for continuation in resuming {
            continuation.resume(returning: .success(element))
        }
    }

    /// The cheap form of a read that took an element (`refill`): the producers it released
    /// (room was made), usually none, resumed with `true`.
    @inlinable
    @inline(__always)
    func perform(releasing producers: [Machine.ProducerContinuation]) {
        for producer in producers { producer.resume(returning: true) }
    }

    /// `perform(_:)` with something to do.
    @inlinable
    func performWork(_ work: OutsideLock) {
        self.resume(work.effects)
        work.upstreamTask?.cancel()
        work.timerTask?.cancel()
        if let raise = work.raise { Self.escalate(raise.task, to: TaskPriority(rawValue: raise.priority)) }
        // The usual `nil` costs a test, not a call.
        if let change = work.notices.change { change.offer() }
        if let observers = work.notices.completionObservers {
            for observer in observers { observer.onCompletion() }
        }
        if let notices = work.notices.evictionNotices { Self.resume(notices) }
        if let drained = work.notices.drained {
            for cell in drained { cell.resolve(true) }
        }
        if let wakeUp = work.hostWakeUp { wakeUp.continuation.resume(returning: wakeUp.epoch) }
        work.timersEnded?.resume()
        if work.readsClock { self.clockFollowUp(through: work.readingTail) }
    }

    /// Resumes the continuations `effects` hands over, and counts the senders' elements it
    /// appended as offers (`CatchUpSpin`).
    @inlinable
    func resume(_ effects: Machine.Effects) {
        assert(
            effects.firstSubscriber != nil || effects.moreSubscribers.isEmpty, "a further subscriber without a first")
        if let first = effects.firstSubscriber {
            first.resume(returning: effects.subscriberResult)
            for continuation in effects.moreSubscribers {
                continuation.resume(returning: effects.subscriberResult)
            }
        }
        for (continuation, element) in effects.handedOver {
            continuation.resume(returning: .success(element))
        }
        if effects.parkedElementsAppended > 0 { self.catchUp.recordOffer() }
        for continuation in effects.producers {
            continuation.resume(returning: effects.producerResult)
        }
    }

    // MARK: Queries

    @inlinable
    var subscriberCount: Int {
        self.state.withLock { $0.machine.subscriberCount }
    }

    /// What a subscriber joining now would be replayed, oldest first.
    @inlinable
    var replayCache: [Element] {
        self.state.withLock { $0.machine.replayCache }
    }

    /// The most recently produced element still in the buffer.
    @inlinable
    var latestElement: Element? {
        self.state.withLock { $0.machine.latestElement }
    }
}
