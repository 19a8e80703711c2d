// The timer's decisions at the level of `MulticastStateMachine`: deadlines from the instant a
// window opens, the wake-up capped at a day past the latest instant the task knows, re-arming
// versus replacing the task, stale generations, trusted sleeps, failed sleeps, the replay
// cache's expiry window timed by the same task, and the count of timer tasks a hosted run()
// waits for. The storage passes every clock reading in: nothing here reads a clock.

import Testing

@testable import AsyncMulticast

@Suite("State machine: the timer")
struct StateMachineTimerTests {
    /// A machine whose upstream (epoch 0) runs with one subscriber, which then leaves at `leftAt`.
    static func lingering(
        keepAlive: Duration, replay: Int = 0, expiry: ReplayExpiry = .never, expiryWindow: Duration = .zero,
        leftAt: Duration
    ) -> (Machine, Machine.Effects) {
        var machine = Machine(
            policy: .unbounded, replay: replay, mode: .automatic, keepAlive: .window, replayExpiry: expiry,
            windows: (keepAlive, expiryWindow))
        let a = machine.subscriberJoined()
        precondition(machine.take(a) == .suspend(startUpstream: 0))
        let effects = machine.subscriberLeft(a, at: leftAt)
        return (machine, effects)
    }

    /// Checks that the timer's `step` closed the window, the last one (the task returns), with
    /// effects that cancel no upstream (`cancelUpstream == 0`).
    static func expectTheLastWindowClosed(
        _ step: Machine.TimerStep, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard case .fired(let effects, let next) = step else {
            Issue.record("expected the window to close", sourceLocation: sourceLocation)
            return
        }
        #expect(effects.cancelUpstream == 0, sourceLocation: sourceLocation)
        #expect(next == nil, "no window after it: the task returns", sourceLocation: sourceLocation)
    }

    @Test("a window opened at 10 s closes at 15 s: the task sleeps until then, then stops the upstream")
    func deadlineFromTheInstantTheWindowOpened() {
        var (machine, left) = Self.lingering(keepAlive: .seconds(5), leftAt: .seconds(10))
        #expect(left.timerTask == .start)
        #expect(machine.timer.generation == 1)
        #expect(machine.timer.deadline == .seconds(15))
        guard
            case .sleep(let until) = machine.timerWoke(
                generation: 1, at: .seconds(10), sleptUntil: nil, sleepFailed: false)
        else {
            Issue.record("expected a sleep")
            return
        }
        #expect(until == .seconds(15))
        Self.expectTheLastWindowClosed(
            machine.timerWoke(generation: 1, at: .seconds(15), sleptUntil: .seconds(15), sleepFailed: false))
        #expect(!machine.timer.isRunning)
        let waiting = machine.timerTaskEnded()
        #expect(waiting == nil)
        #expect(machine.timer.tasksRunning == 0)
        #expect(machine.invariantViolation() == nil)
    }

    @Test("a later window re-arms the sleeping task; an earlier one (the clock went back) replaces it")
    func reArmOrReplace() {
        var (machine, _) = Self.lingering(keepAlive: .seconds(5), leftAt: .seconds(100))
        _ = machine.timerWoke(generation: 1, at: .seconds(100), sleptUntil: nil, sleepFailed: false)
        #expect(machine.timer.wakeUp == .seconds(105))
        let b = machine.subscriberJoined()
        let rearmed = machine.subscriberLeft(b, at: .seconds(102))
        #expect(rearmed.timerTask == .none, "107 is after 105: re-armed")
        #expect(machine.timer.deadline == .seconds(107))
        guard
            case .sleep(let until) = machine.timerWoke(
                generation: 1, at: .seconds(105), sleptUntil: .seconds(105), sleepFailed: false)
        else {
            Issue.record("expected a sleep")
            return
        }
        #expect(until == .seconds(107), "the task finds the moved deadline")
        let c = machine.subscriberJoined()
        let replaced = machine.subscriberLeft(c, at: .seconds(10))
        #expect(replaced.timerTask == .replace, "15 is before 107")
        #expect(machine.timer.generation == 2, "the new task's name")
        #expect(machine.timer.tasksRunning == 2, "the replaced task has not returned yet")
        guard
            case .stale = machine.timerWoke(
                generation: 1, at: .seconds(107), sleptUntil: .seconds(107), sleepFailed: false)
        else {
            Issue.record("the replaced task must find itself stale")
            return
        }
        #expect(machine.upstream == .lingering(epoch: 0), "a stale task touches nothing")
        _ = machine.timerTaskEnded()
        #expect(machine.timer.tasksRunning == 1)
        #expect(machine.invariantViolation() == nil)
    }

    @Test("a window of three days: the task sleeps a day at a time; a trusted sleep counts even if the clock went back")
    func longWindowsAndTrustedSleeps() {
        let day = Duration.seconds(86_400)
        var (machine, _) = Self.lingering(keepAlive: day * 3, leftAt: .zero)
        var trusted: Duration? = nil
        for expected in [day, day * 2, day * 3] {
            guard
                case .sleep(let until) = machine.timerWoke(
                    generation: 1, at: .zero, sleptUntil: trusted, sleepFailed: false)
            else {
                Issue.record("expected a sleep")
                return
            }
            #expect(until == expected, "a day past the trusted instant, whatever the clock reads (0)")
            trusted = until
        }
        Self.expectTheLastWindowClosed(
            machine.timerWoke(generation: 1, at: .zero, sleptUntil: trusted, sleepFailed: false))
    }

    @Test("a failed sleep closes the window at once")
    func failedSleepClosesTheWindow() {
        var (machine, _) = Self.lingering(keepAlive: .seconds(60), leftAt: .zero)
        _ = machine.timerWoke(generation: 1, at: .zero, sleptUntil: nil, sleepFailed: false)
        Self.expectTheLastWindowClosed(
            machine.timerWoke(generation: 1, at: .seconds(1), sleptUntil: nil, sleepFailed: true))
    }

    @Test("the keep-alive closing opens the replay cache's expiry window, timed by the same task from its reading")
    func chainedReplayExpiry() {
        var (machine, _) = Self.lingering(
            keepAlive: .seconds(5), replay: 1, expiry: .afterWindow, expiryWindow: .seconds(7), leftAt: .zero)
        #expect(!machine.produce(1, epoch: 0).isStop)
        _ = machine.timerWoke(generation: 1, at: .zero, sleptUntil: nil, sleepFailed: false)
        guard
            case .fired(let stopped, let next) = machine.timerWoke(
                generation: 1, at: .seconds(6), sleptUntil: .seconds(5), sleepFailed: false)
        else {
            Issue.record("expected the keep-alive to close")
            return
        }
        #expect(stopped.cancelUpstream == 0)
        #expect(stopped.timerTask == .none, "the same task times the next window")
        #expect(next == .seconds(13), "from the clock's reading, 6 s, not the trusted 5 s")
        #expect(machine.replayCache == [1])
        guard
            case .fired(let expired, nil) = machine.timerWoke(
                generation: 1, at: .seconds(13), sleptUntil: .seconds(13), sleepFailed: false)
        else {
            Issue.record("expected the expiry window to close")
            return
        }
        #expect(expired.isEmpty)
        #expect(machine.replayCache.isEmpty)
        #expect(machine.invariantViolation() == nil)
    }

    @Test("a hosted run() waits for the timer tasks still running, and is resumed by the last one's end")
    func hostWaitsForTimerTasks() async {
        var (machine, _) = Self.lingering(keepAlive: .seconds(5), leftAt: .zero)
        let stopped = machine.hostStopped()
        #expect(stopped.timerTask == .cancel)
        // A continuation of the right type, resumed by the test once the machine hands it back.
        let (stream, sender) = AsyncStream.makeStream(of: UnsafeContinuation<Void, Never>.self)
        let resumed = Lock(false)
        let task = Task {
            await withUnsafeContinuation { sender.yield($0) }
            resumed.withLock { $0 = true }
        }
        var continuation: UnsafeContinuation<Void, Never>?
        for await next in stream {
            continuation = next
            break
        }
        let waits = machine.hostWaitingForTimers(continuation!)
        #expect(waits, "the cancelled task has not returned yet")
        #expect(machine.invariantViolation() == nil)
        let last = machine.timerTaskEnded()
        #expect(last != nil, "the last task's end hands back the waiting run()")
        last?.resume()
        await task.value
        #expect(resumed.withLock { $0 })
        let waitsAgain = machine.hostWaitingForTimers(continuation!)
        #expect(!waitsAgain, "no task runs: it would resume at once")
    }
}
