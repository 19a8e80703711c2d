// The model test's timer: the keep-alive and replay-expiry windows, their deadlines on the
// model's clock, the timer tasks (each named by its generation, started, replaced and
// cancelled as the machine says, stepping when they wake), as plainly as the rules say them:
//
// - a window opens when the last subscriber leaves (keep-alive), or when the upstream stops
//   with a replay cache that expires after a window; it closes at its deadline, the instant it
//   opened plus its length;
// - one timer task times the open window: a window that opens while it runs moves the
//   deadline, unless it closes before the instant the task sleeps until: then a new task
//   replaces it;
// - a task never sleeps more than a day past the latest instant it knows the clock reached
//   (its reading, or the instant its last sleep returned at, which it trusts); a failed sleep
//   closes the window at once.

@testable import AsyncMulticast

/// A timer task that has not returned yet.
struct ModelTimerTask {
    let generation: UInt64
    /// It has stepped once (before that it has not slept).
    var started = false
    /// The instant its last sleep returned at.
    var sleptUntil: Duration?
    /// The instant it sleeps until now.
    var sleepingUntil: Duration?
    /// The storage cancelled it (replaced, or the upstream ended).
    var cancelled = false

    init(generation: UInt64) { self.generation = generation }
}

extension ModelRun {
    var day: Duration { .seconds(86_400) }

    /// A window opens at `now`: its deadline; a new timer task, or the running one re-armed,
    /// or replaced. What the machine's effects must ask of the storage.
    mutating func openWindow(at now: Duration) -> Machine.TimerTaskAction {
        let length = self.replayExpiryPending ? self.config.replayExpiryWindow : self.config.keepAliveWindow
        self.timerDeadline = scriptedSaturating(now, length)
        if self.timerRunning {
            guard let wakeUp = self.timerWakeUp, self.timerDeadline < wakeUp else { return .none }
            self.cancelCurrentTimerTask()
            self.newTimerTask()
            return .replace
        }
        self.timerRunning = true
        self.newTimerTask()
        return .start
    }

    mutating func newTimerTask() {
        self.timerGeneration += 1
        self.timerWakeUp = nil
        self.timerTasks.append(ModelTimerTask(generation: self.timerGeneration))
    }

    mutating func cancelCurrentTimerTask() {
        for index in self.timerTasks.indices where self.timerTasks[index].generation == self.timerGeneration {
            self.timerTasks[index].cancelled = true
        }
    }

    /// The upstream ended: the timer task, if any, is cancelled.
    mutating func cancelTimer() -> Machine.TimerTaskAction {
        guard self.timerRunning else { return .none }
        self.timerRunning = false
        self.timerWakeUp = nil
        self.cancelCurrentTimerTask()
        return .cancel
    }

    /// The `.automatic` upstream stopped with nobody left, at `now`: its replay cache.
    mutating func replayCacheStopped(at now: Duration) -> Machine.TimerTaskAction {
        guard self.config.mode == .automatic, self.config.replay > 0 else { return .none }
        switch self.config.replayExpiry {
        case .never:
            return .none
        case .immediately:
            self.replayFloor = self.produced.count
            return .none
        case .afterWindow:
            self.replayExpiryPending = true
            return self.openWindow(at: now)
        }
    }

    /// A timer task returns: the machine counts it.
    mutating func timerTaskReturns(at index: Int) throws(ModelFailure) {
        self.timerTasks.remove(at: index)
        let waiting = self.machine.timerTaskEnded()
        try self.check(waiting == nil, "a timer task's end resumed a run() nobody started")
    }

    mutating func timerWakes(pick: Int, returned: Bool) async throws(ModelFailure) {
        guard !self.timerTasks.isEmpty else { return }
        let index = pick % self.timerTasks.count
        var task = self.timerTasks[index]
        // A cancelled task's sleep that throws: it returns without stepping.
        if task.started, task.cancelled, !returned { return try self.timerTaskReturns(at: index) }
        let sleptUntil = task.started && returned ? task.sleepingUntil : task.sleptUntil
        let failed = task.started && !returned
        let step = self.machine.timerWoke(
            generation: task.generation, at: self.time, sleptUntil: sleptUntil, sleepFailed: failed)
        task.started = true
        task.sleptUntil = sleptUntil
        guard self.timerRunning, task.generation == self.timerGeneration else {
            guard case .stale = step else { throw self.fail("a stale timer task stepped: \(step)") }
            return try self.timerTaskReturns(at: index)
        }
        let now = Swift.max(self.time, sleptUntil ?? self.time)
        if self.timerDeadline > now, !failed {
            let wakeUp = Swift.min(self.timerDeadline, scriptedSaturating(now, self.day))
            guard case .sleep(let until) = step, until == wakeUp else {
                throw self.fail("the timer stepped \(step), expected to sleep until \(wakeUp)")
            }
            self.timerWakeUp = wakeUp
            task.sleepingUntil = wakeUp
            self.timerTasks[index] = task
            return
        }
        // The window closed.
        guard case .fired(let effects, let next) = step else {
            throw self.fail("the timer stepped \(step), expected to fire")
        }
        self.timerWakeUp = nil
        var parked: [Suspended<Bool>] = []
        var cancelled: UInt64?
        if case .lingering(let epoch) = self.upstream {
            parked = self.stopUpstream(epoch)
            cancelled = epoch
            _ = self.replayCacheStopped(at: self.time)  // the window it opens is this task's
        } else if self.replayExpiryPending {
            self.replayExpiryPending = false
            self.replayFloor = self.produced.count
        }
        let expectedNext: Duration?
        if self.replayExpiryPending {
            expectedNext = Swift.min(self.timerDeadline, scriptedSaturating(self.time, self.day))
            self.timerWakeUp = expectedNext
        } else {
            expectedNext = nil
            self.timerRunning = false
        }
        try self.check(
            next == expectedNext, "the timer fired and sleeps until \(next as Any), expected \(expectedNext as Any)")
        try await self.expect(
            effects, resuming: [], with: nil, releasing: parked, with: false, cancelling: cancelled)
        if let expectedNext {
            task.sleepingUntil = expectedNext
            self.timerTasks[index] = task
        } else {
            try self.timerTaskReturns(at: index)
        }
    }

    /// The machine's timer agrees with the model's.
    func compareTimer() throws(ModelFailure) {
        let timer = self.machine.timer
        try self.check(timer.isRunning == self.timerRunning, "timer running \(timer.isRunning)")
        try self.check(
            timer.tasksRunning == self.timerTasks.count,
            "\(timer.tasksRunning) timer tasks running, expected \(self.timerTasks.count)")
        try self.check(
            self.machine.replayExpiryPending == self.replayExpiryPending,
            "replay expiry pending \(self.machine.replayExpiryPending)")
        guard self.timerRunning else { return }
        try self.check(timer.generation == self.timerGeneration, "timer generation \(timer.generation)")
        try self.check(
            timer.deadline == self.timerDeadline, "deadline \(timer.deadline), expected \(self.timerDeadline)")
        try self.check(
            timer.wakeUp == self.timerWakeUp, "wakes at \(timer.wakeUp as Any), expected \(self.timerWakeUp as Any)")
    }
}
