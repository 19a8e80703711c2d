// The timer's windows and deadlines: which window is open (keep-alive, replay expiry), how long
// each lasts, when it closes, the soft limits' next deadline (+Evicting), when the timer task
// wakes, which task is the timer (its generation), and how many timer tasks have not returned
// yet. The machine decides all of it; the storage only
// holds the task, reads the clock before it locks, and passes the reading in
// (`subscriberLeft(_:at:)`, `timerWoke(generation:at:sleptUntil:sleepFailed:)`). No clock is
// read under the lock: a clock is user code.

extension MulticastStateMachine {
    /// What the storage must do with the timer task's handle, at the end of a critical section.
    /// Without a payload, so that every `Effects` stays as small as before (the new task's
    /// name is `DeadlineTimer.generation`): a generation here made `Effects` 8 bytes larger,
    /// which cost a bounded `share()` 2 instructions a delivery (`compare --instructions`).
    /// At most one timer task is the machine's (`DeadlineTimer.isRunning`), usually re-armed
    /// rather than replaced: leaving and coming back many times within the window never piles
    /// up sleeping tasks.
    @usableFromInline
    enum TimerTaskAction: Sendable, Equatable {
        /// Nothing (a window opened while the task runs, and it will find the new deadline
        /// when it wakes: the machine moved it).
        case none
        /// A window opened and no timer task runs: create one, of the generation the machine
        /// named (`DeadlineTimer.generation`).
        case start
        /// A window opened that closes before the instant the running task sleeps until (the
        /// clock went back, or it timed a longer window): cancel the task and create one of
        /// the generation the machine named, so that each window ends at its own deadline.
        case replace
        /// The timer task is no longer needed (the upstream ended): cancel it.
        case cancel
    }

    /// The windows the timer times. The machine decides which one is open (`timedWindow`) and
    /// knows how long each lasts (`length(of:)`).
    @usableFromInline
    enum TimerWindow: Sendable, Equatable {
        /// The last subscriber left (`KeepAlive.window`): the upstream lingers.
        case keepAlive
        /// The upstream stopped (`ReplayExpiry.afterWindow`): the replay cache expires.
        case replayExpiry
    }

    /// The timer's state: the machine's half of the timer task, whose handle the storage holds.
    /// One task times every deadline: the keep-alive window's, the replay expiry's
    /// (`TimerWindow`) and the soft limits' (`nextSoftDeadline`), hence the name.
    @usableFromInline
    struct DeadlineTimer: Sendable {
        /// A timer task is the machine's: it holds a deadline, and the storage holds the task.
        @usableFromInline
        var isRunning = false
        /// Names the machine's timer task: a task that wakes with another generation (or while
        /// none runs) was replaced or cancelled, and ends without acting.
        @usableFromInline
        var generation: UInt64 = 0
        /// When the open window closes (keep-alive, or replay expiry), on the storage's clock.
        @usableFromInline
        var deadline = Duration.zero
        /// A window is open: the task closes it at `deadline`. Without one, the task times
        /// the soft limits' deadlines only (`nextSoftDeadline`).
        @usableFromInline
        var timesWindow = false
        /// When the timer task wakes next: the earliest of the window's deadline and the next
        /// soft deadline, or `longestTimerSleep` after the instant it fell asleep if that is
        /// earlier. `nil` until its first step decides.
        @usableFromInline
        var wakeUp: Duration?
        /// Timer tasks that have not returned yet, replaced or cancelled ones included: a
        /// hosted `run()` returns only once none runs (`hostWaitingForTimers(_:)`).
        @usableFromInline
        var tasksRunning = 0

        @inlinable
        init() {}
    }

    /// What `timerWoke(generation:at:sleptUntil:sleepFailed:)` tells the timer task.
    @usableFromInline
    enum TimerStep: Sendable {
        /// It was replaced or cancelled: it returns, touching nothing.
        case stale
        /// Its window has not closed yet (it moved, or the sleep was capped): sleep until then.
        case sleep(until: Duration)
        /// The window closed: perform `effects`; then sleep until `next` (the next window
        /// opened: the replay cache's expiry, once the keep-alive stopped the upstream), or,
        /// `nil`, return: the storage forgets the task, which is no longer the machine's.
        case fired(Effects, next: Duration?)
    }

    /// A keep-alive or replay-expiry window this long or longer (about 35,000 years) is
    /// forever, for a process: it is never timed (`KeepAlive.forever`, `ReplayExpiry.never`).
    /// Shorter ones are, and their deadlines never overflow.
    @inlinable
    static var longestWindow: Duration { .seconds(1 << 40) }

    /// The timer task never sleeps toward an instant more than this past the latest instant
    /// it knows the clock reached (its reading, or a sleep that returned, which is trusted):
    /// it wakes, finds the deadline still ahead, and sleeps again, so that no duration is too
    /// long for the clock. A clock set back as a sleep returns gets one longer sleep, by as
    /// much as it went back: the timer keeps the time its sleep vouched for.
    @inlinable
    static var longestTimerSleep: Duration { .seconds(86_400) }

    /// Whether any window is ever timed: only then does the storage read its clock before a
    /// leave (which may open one).
    @inlinable
    var timesWindows: Bool {
        self.mode == .automatic && (self.keepAlive == .window || self.replayExpiry == .afterWindow)
    }

    /// The window the timer times now: the replay cache's expiry once the upstream stopped
    /// with it pending, else the keep-alive.
    @inlinable
    var timedWindow: TimerWindow {
        self.replayExpiryPending ? .replayExpiry : .keepAlive
    }

    /// How long `window` lasts.
    @inlinable
    func length(of window: TimerWindow) -> Duration {
        switch window {
        case .keepAlive: return self.keepAliveWindow
        case .replayExpiry: return self.replayExpiryWindow
        }
    }

    /// When the timer wakes next: at `deadline`, or after its longest sleep from `now`.
    @inlinable
    static func wakeUp(for deadline: Duration, from now: Duration) -> Duration {
        Swift.min(deadline, now.saturatingAdding(Self.longestTimerSleep))
    }

    /// A window opened at `now` (the window the timer times now, `timedWindow`): its deadline,
    /// and the timer task that times it.
    ///
    /// - No timer task is the machine's: a new one (`.start`).
    /// - One is: the deadline moves, and the task finds it when it wakes. A window that ends
    ///   before the instant the task sleeps until replaces the task instead (`.replace`), so
    ///   that each window ends at its own deadline: the clock went back (a user's clock need
    ///   not be monotonic), or the task was timing a longer window (a replay cache's expiry).
    ///   A task that has not decided when it wakes (`wakeUp` is `nil`: it is starting, or it
    ///   is the one whose step this is) just finds the new deadline.
    @inlinable
    mutating func openWindow(at now: Duration, into effects: inout Effects) {
        self.timer.deadline = now.saturatingAdding(self.length(of: self.timedWindow))
        self.timer.timesWindow = true
        self.timerNeeded(by: self.timer.deadline, into: &effects)
    }

    /// The timer must wake by `deadline` (a window's, or a soft limit's): a timer task is
    /// started if none is the machine's (`.start`), and replaced if the running one sleeps
    /// until later (`.replace`); one that has not decided when it wakes finds it.
    @inlinable
    mutating func timerNeeded(by deadline: Duration, into effects: inout Effects) {
        if self.timer.isRunning {
            guard let wakeUp = self.timer.wakeUp, deadline < wakeUp else { return }
            self.newTimerTask()
            effects.timerTask = .replace
        } else {
            self.timer.isRunning = true
            self.newTimerTask()
            effects.timerTask = .start
        }
    }

    /// What the timer times next: the open window's deadline or the next soft deadline,
    /// whichever comes first; `nil` when there is nothing to time.
    @inlinable
    var timerTarget: Duration? {
        let window = self.timer.timesWindow ? self.timer.deadline : nil
        guard let soft = self.nextSoftDeadline else { return window }
        return window.map { Swift.min($0, soft) } ?? soft
    }

    /// A new timer task, of a new generation, that has not decided when it wakes.
    @inlinable
    mutating func newTimerTask() {
        self.timer.generation &+= 1
        self.timer.wakeUp = nil
        self.timer.tasksRunning += 1
    }

    /// The upstream ended: the timer task, if one is the machine's, is cancelled.
    @inlinable
    mutating func cancelTimer(into effects: inout Effects) {
        guard self.timer.isRunning else { return }
        self.timer.isRunning = false
        self.timer.timesWindow = false
        self.timer.wakeUp = nil
        effects.timerTask = .cancel
    }

    /// The timer task of `generation` woke: the clock read `reading` (before the lock); its
    /// last sleep returned at `sleptUntil` (trusted: the instant it slept toward has come,
    /// whatever the clock reads now; `nil` before its first sleep), or failed (`sleepFailed`:
    /// the clock cannot time the window, which closes at once, as if its deadline had passed).
    ///
    /// Nothing due yet makes the task sleep again (the window or the soft deadline moved, or
    /// the sleep was capped). A window whose deadline has come closes: a lingering upstream
    /// stops (which may open the replay cache's expiry window, timed by the same task from
    /// `reading`), or the pending replay cache expires. A soft deadline that has come evicts
    /// its members (`softDeadlinesDue(by:)`); the task writes no deadline and answers no
    /// awaited reading, since its reading may be older than what asked for one. A failed
    /// sleep makes everything the task times due at once.
    @inlinable
    mutating func timerWoke(
        generation: UInt64, at reading: Duration, sleptUntil: Duration?, sleepFailed: Bool
    ) -> TimerStep {
        guard self.timer.isRunning, self.timer.generation == generation else { return .stale }
        let now = sleptUntil.map { Swift.max(reading, $0) } ?? reading
        let windowCloses = self.timer.timesWindow && (self.timer.deadline <= now || sleepFailed)
        let softDue = self.nextSoftDeadline.map { $0 <= now || sleepFailed } ?? false
        if !windowCloses, !softDue {
            guard let target = self.timerTarget else {
                self.timer.isRunning = false
                self.timer.wakeUp = nil
                return .fired(Effects(), next: nil)
            }
            let wakeUp = Self.wakeUp(for: target, from: now)
            self.timer.wakeUp = wakeUp
            return .sleep(until: wakeUp)
        }
        var effects = Effects()
        // Undecided while the window closes: a window it opens is this task's to time.
        self.timer.wakeUp = nil
        if windowCloses {
            self.timer.timesWindow = false
            if case .lingering(let epoch) = self.upstream {
                self.stopUpstream(epoch: epoch, into: &effects)
                self.openReplayExpiryWindow(at: reading, into: &effects)
            } else if self.replayExpiryPending {
                self.replayCacheReset()
            }
        }
        // The written soft deadlines due by now; a failed sleep: every one is due.
        self.softDeadlinesDue(by: sleepFailed ? Duration(attoseconds: .max - 1) : now)
        assert(effects.timerTask == .none, "the timer's own step asked for another timer task")
        self.noticing(&effects)
        guard let target = self.timerTarget else {
            self.timer.isRunning = false
            return .fired(effects, next: nil)
        }
        let wakeUp = Self.wakeUp(for: target, from: reading)
        self.timer.wakeUp = wakeUp
        return .fired(effects, next: wakeUp)
    }

    /// A timer task returned, replaced, cancelled or not. Returns the hosted `run()` waiting
    /// for the last one (`hostWaitingForTimers(_:)`), to resume outside the lock.
    @inlinable
    mutating func timerTaskEnded() -> UnsafeContinuation<Void, Never>? {
        self.timer.tasksRunning -= 1
        guard self.timer.tasksRunning == 0, let waiting = self.timersEnded else { return nil }
        self.timersEnded = nil
        return waiting
    }

    /// A hosted `run()` that is over waits until no timer task runs: `false` (resume it at
    /// once) if none does, else its continuation is kept until the last one returns
    /// (`timerTaskEnded()`). Their sleeps were cancelled: a clock's sleep must then throw.
    @inlinable
    mutating func hostWaitingForTimers(_ continuation: UnsafeContinuation<Void, Never>) -> Bool {
        guard self.timer.tasksRunning > 0 else { return false }
        self.timersEnded = continuation
        return true
    }
}

/// What the last subscriber leaving does to a running upstream (`.automatic` mode only).
@usableFromInline
enum KeepAlive: Sendable, Hashable {
    /// It is stopped at once.
    case off
    /// It lingers for a keep-alive window (`keepAliveWindow`), timed by the machine's timer:
    /// stopped when the window closes unless a subscriber came back.
    case window
    /// It lingers until a subscriber comes back, however long that takes: no window to time.
    case forever
}

/// What happens to a replay cache when its upstream is stopped because no subscriber is left.
@usableFromInline
enum ReplayExpiry: Sendable, Hashable {
    /// It is kept: a restarted upstream's new subscribers get it first.
    case never
    /// It is cleared at once.
    case immediately
    /// It is cleared when its window (`replayExpiryWindow`) closes, unless the upstream
    /// restarted meanwhile.
    case afterWindow
}
