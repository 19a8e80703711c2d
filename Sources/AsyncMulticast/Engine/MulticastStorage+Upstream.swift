// The upstream's lifecycle, beside MulticastStateMachine+Upstream.swift: the upstream task
// (started and cancelled as the machine's effects say), the timer task that times the
// machine's deadlines (the keep-alive and replay-expiry windows, the soft limits), `connect`, `disconnect`, and the ends (`finish`, `complete`).

extension MulticastStorage {
    // MARK: Commands

    /// Starts the upstream if idle; returns the running epoch (`nil` once terminated).
    @inlinable
    func connect() -> UInt64? {
        let (epoch, work) = self.state.withLock { state in
            let (epoch, effects) = state.machine.connectRequested()
            return (epoch, self.endCriticalSection(effects, &state))
        }
        self.perform(work)
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
        let work = self.state.withLock { state in
            // The iteration is over: forget its task in the same critical section.
            let heldItsTask = state.upstreamTask?.epoch == epoch
            if heldItsTask { state.upstreamTask = nil }
            let effects = state.machine.upstreamIterationEnded(epoch: epoch, failure: failure, heldItsTask: heldItsTask)
            return self.endCriticalSection(effects, &state)
        }
        self.perform(work)
    }

    /// Completes a push-fed storage, and tells the completion observers (the end of the
    /// critical section takes them). Ignored once completed.
    @inlinable
    func complete(failure: Failure?) {
        self.transition { $0.subjectCompleted(failure: failure) }
    }

    /// Clears the replay cache for subscribers joining from now on.
    @inlinable
    func resetReplayCache() {
        self.state.withLock { $0.machine.replayCacheReset() }
    }

    // MARK: The upstream task

    /// Creates and registers the task of the upstream iteration `start` names, at the
    /// priority it says. Called under the lock,
    /// in the same critical section in which the machine decided to start it, so that the
    /// task is registered before anyone can cancel the epoch, and chained after the
    /// previous (cancelled) iteration: two iterations of the base never overlap. Creating
    /// a task only enqueues it; nothing runs or is resumed here. The machine chose the
    /// priority: the highest among the subscribers already waiting, if that is above a
    /// detached task's (`MulticastStateMachine.upstreamStarted(epoch:into:)`), so its first
    /// step runs at it. A hosted storage's `run()` creates its own (`startHostedUpstream`).
    @inlinable
    func startUpstream(_ start: Machine.UpstreamStart, in state: inout State) {
        let epoch = start.epoch
        guard let body = self.upstreamBody else {
            preconditionFailure("a push-fed storage was asked to start an upstream")
        }
        assert(!self.hosted, "a hosted storage's run() creates the upstream task")
        let sink = UpstreamSink(storage: self, epoch: epoch)
        let previous = state.retiringTask
        // Detached: the upstream must not inherit the priority or task-locals of whichever
        // subscriber happened to ask first.
        let task = Task.detached(priority: TaskPriority(rawValue: start.priority)) {
            // A base that reacts slowly to cancellation may still be inside `next()` (awaiting
            // it raises it to this task's priority).
            await previous?.value
            await Self.runUpstream(body, into: sink)
        }
        state.upstreamTask = (epoch, task)
    }

    /// An upstream task to raise to `priority` (`TaskPriority.rawValue`), outside the lock.
    @usableFromInline
    struct Raise: Sendable {
        @usableFromInline let task: Task<Void, Never>
        @usableFromInline let priority: UInt8

        @inlinable
        init(task: Task<Void, Never>, priority: UInt8) {
            self.task = task
            self.priority = priority
        }
    }

    /// The body of an upstream task (detached, or hosted by `run()`): the iteration, unless
    /// its epoch was cancelled before the task began; then not even the base iterator is
    /// created.
    @inlinable
    static func runUpstream(_ body: UpstreamBody, into sink: UpstreamSink) async {
        guard sink.storage.state.withLock({ $0.machine.isCurrent(epoch: sink.epoch) }) else { return }
        await body(sink)
    }

    /// The priority an upstream task starts at: a detached task's, whoever asked for it
    /// (the machine's `detachedUpstreamPriority`).
    @inlinable
    static var upstreamStartPriority: TaskPriority { TaskPriority(rawValue: Machine.detachedUpstreamPriority) }

    /// The priority of the calling task, if this storage has an upstream (in a task of its
    /// own, or in the task of a hosted `run()`), which a waiting subscriber may raise
    /// (MulticastStateMachine+Priority.swift); else (a subject) 0, which raises nothing.
    /// Read outside the lock: reading it retains and releases the task, two atomic operations
    /// that every critical section of a suspending subscriber held (`compare --only fanout`,
    /// where up to 16 subscribers share the lock on 2 cores).
    @inlinable
    var waitingSubscriberPriority: UInt8 {
        guard self.upstreamBody != nil else { return 0 }
        return Task.currentPriority.rawValue
    }

    /// Raises `task` to `priority` (SE-0462), where the toolchain and the OS have it: Swift
    /// 6.2, and on Apple platforms their 26 releases. Elsewhere a no-op.
    @inlinable
    static func escalate(_ task: Task<Void, Never>, to priority: TaskPriority) {
        #if compiler(>=6.2)
            if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
                task.escalatePriority(to: priority)
            }
        #endif
    }

    /// Under the lock: takes the upstream task `effects` cancels (to be cancelled outside the
    /// lock); the next one waits for it to end.
    @inlinable
    static func takeUpstreamTask(_ state: inout State, for effects: Machine.Effects) -> Task<Void, Never>? {
        guard let epoch = effects.cancelUpstream, let running = state.upstreamTask,
            running.epoch == epoch
        else { return nil }
        // The machine keeps its priority: a subscriber that waits for the next iteration
        // waits behind this one, and raises it (`retiringTask`).
        state.upstreamTask = nil
        state.retiringTask = running.task
        return running.task
    }

    // MARK: The timer task

    /// Under the lock, at the end of a critical section: does what `action` asks of the timer
    /// task's handle (the machine decided when, see MulticastStateMachine+Timer.swift), and
    /// returns the task to cancel outside the lock, if any.
    @inlinable
    func armTimer(_ state: inout State, for action: Machine.TimerTaskAction) -> Task<Void, Never>? {
        switch action {
        case .none:
            return nil
        case .start:
            self.startTimer(generation: state.machine.timer.generation, in: &state)
            return nil
        case .replace:
            let replaced = state.timerTask
            self.startTimer(generation: state.machine.timer.generation, in: &state)
            return replaced
        case .cancel:
            defer { state.timerTask = nil }
            return state.timerTask
        }
    }

    /// Under the lock: creates the timer task of `generation`. Creating a task only enqueues
    /// it; it takes the lock when it runs.
    @inlinable
    func startTimer(generation: UInt64, in state: inout State) {
        state.timerTask = Task.detached {
            await self.runDeadlineTimer(generation: generation)
            self.timerTaskEnded()
        }
    }

    /// A timer task returned, replaced, cancelled or not: the machine counts it, so that a
    /// hosted `run()` returns only once none runs (`stopHosting()`).
    @inlinable
    func timerTaskEnded() {
        let work = self.state.withLock { state in
            state.machine.timerTaskEnded().map { OutsideLock(timersEnded: $0) }
        }
        self.perform(work)
    }

    /// The timer task: reads the clock (before the lock: a clock is user code), tells the
    /// machine (`timerWoke`), which decides whether the window closed, and sleeps on `clock`
    /// until the instant the machine says, until the machine says it is over. When closing a
    /// window opens the next one (the keep-alive closed, the upstream stopped, and now the
    /// replay cache's expiry window opens) it times that one too.
    ///
    /// Only a cancellation ends it early, and only the storage cancels it: when the upstream
    /// ended, or when the machine replaced the task, in both cases after updating the state,
    /// so the task finds itself stale and leaves it alone. A sleep that throws while the task
    /// is not cancelled is the clock failing (user code): the clock cannot time the window,
    /// so the window open then closes at once, as if its deadline had passed. Never "the
    /// timer is gone but the machine believes it runs", which left every later window open
    /// for good.
    ///
    /// A sleep that returns is trusted: the instant it slept toward has come, whatever the
    /// clock reads afterwards (the machine never counts `now` as earlier than that instant).
    /// A clock set back between its sleep returning and the timer reading it cannot reopen a
    /// window, and a sleep that returns early, even at once while `now` creeps, ends the
    /// window instead of making the timer poll the clock until the deadline: each sleep moves
    /// the timer's time at least to its wake-up instant, so the loop sleeps at most once per
    /// `longestTimerSleep` of the window.
    @inlinable
    func runDeadlineTimer(generation: UInt64) async {
        var sleepFailed = false
        // The instant the last sleep returned at (trusted), or `nil` before the first sleep.
        var sleptUntil: Duration? = nil
        while true {
            let reading = self.clock.now()
            var sleepUntil: Duration? = nil
            let work = self.state.withLock { state -> OutsideLock? in
                switch state.machine.timerWoke(
                    generation: generation, at: reading, sleptUntil: sleptUntil, sleepFailed: sleepFailed)
                {
                case .stale:
                    return nil
                case .sleep(let until):
                    sleepUntil = until
                    return nil
                case .fired(let effects, let next):
                    // Its window closed with none after it: the task is no longer the machine's.
                    if next == nil { state.timerTask = nil }
                    sleepUntil = next
                    return self.endCriticalSection(effects, &state)
                }
            }
            self.perform(work)
            guard let wakeUp = sleepUntil else { return }
            do {
                try await self.clock.sleepUntil(wakeUp)
                sleptUntil = wakeUp
                sleepFailed = false  // only the window open when a sleep failed closes at once
            } catch {
                if Task.isCancelled { return }  // the upstream ended, or a new task replaced it
                sleepFailed = true  // the clock failed: the open window closes at once
            }
        }
    }

    /// The machine asked for the time (`FollowUp.reading`: a member past a soft limit, an
    /// evicted last subscriber): the clock is read now, outside any lock (a clock is user
    /// code), and passed in (`clockRead(at:through:)`) with the tail of the critical section
    /// that asked (`tail`). Never under the lock, never on the producer's usual path: only
    /// after an element that left a member past its soft limit or evicted the last
    /// subscriber of a `share()`.
    @inlinable
    @inline(never)
    func clockFollowUp(through tail: Int) {
        let reading = self.clock.now()
        self.transition { $0.clockRead(at: reading, through: tail) }
    }
}
