// The keep-alive window at the level of `MulticastStateMachine`: the last subscriber leaving
// makes a running upstream *linger* (still current, still producing) and starts or re-arms
// the timer; a subscriber joining in time continues the same iteration; the timer expiring
// while lingering cancels it. The real-task side is in Share/KeepAliveTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: keep-alive")
struct StateMachineKeepAliveTests {
    @Test(
        "last subscriberLeft while running lingers; subscriberJoined while lingering continues; keepAliveExpired while lingering cancels"
    )
    func lingeringThenRejoinThenExpiry() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, keepAlive: .window)
        let a = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: 0))

        let leave = machine.subscriberLeft(a)
        #expect(leave.cancelUpstream == nil, "keep-alive: not cancelled yet")
        #expect(leave.timerTask == .start)
        #expect(machine.upstream == .lingering(epoch: 0))
        #expect(machine.isCurrent(epoch: 0), "the lingering upstream may still produce")
        #expect(!machine.produce(1, epoch: 0).isStop, "a lingering upstream's element is taken")

        let b = machine.subscriberJoined()
        #expect(machine.upstream == .running(epoch: 0), "the same iteration continues")

        let leaveAgain = machine.subscriberLeft(b)
        #expect(leaveAgain.timerTask == .none, "the running timer is re-armed (its deadline moved), not replaced")
        #expect(machine.upstream == .lingering(epoch: 0))

        let expired = machine.keepAliveExpired()
        #expect(expired.cancelUpstream == 0)
        #expect(machine.upstream == .idle)
        #expect(machine.produce(2, epoch: 0).isStop, "a cancelled epoch's element is refused")

        let c = machine.subscriberJoined()
        #expect(machine.take(c) == .suspend(startUpstream: 1), "the next demand starts a new epoch")
    }

    @Test(
        "keepAliveExpired after a subscriber came back stops nothing; the next last subscriberLeft starts a new timer")
    func keepAliveExpiredWhileRunningStopsNothing() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, keepAlive: .window)
        let a = machine.subscriberJoined()
        _ = machine.nextRequested(a)
        #expect(machine.subscriberLeft(a).timerTask == .start)
        let b = machine.subscriberJoined()
        #expect(machine.keepAliveExpired().isEmpty, "the subscriber is back: nothing to stop")
        #expect(machine.upstream == .running(epoch: 0))
        #expect(machine.subscriberLeft(b).timerTask == .start, "that timer ended: a new one starts")
    }

    @Test("subscriberLeft while a timer runs re-arms it: many departures, one timer task")
    func subscriberLeftWhileATimerRunsReArmsIt() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, keepAlive: .window)
        var starts = 0
        var restarts = 0
        let first = machine.subscriberJoined()
        _ = machine.nextRequested(first)
        _ = machine.subscriberLeft(first)
        starts += 1
        for _ in 0..<20_000 {
            let id = machine.subscriberJoined()
            switch machine.subscriberLeft(id).timerTask {
            case .start: starts += 1
            case .none: restarts += 1
            case .replace, .cancel: Issue.record("unexpected timer action")
            }
        }
        #expect(starts == 1)
        #expect(restarts == 20_000)
        #expect(machine.upstream == .lingering(epoch: 0))
    }

    @Test("upstreamEnded while lingering cancels the timer")
    func upstreamEndedWhileLingeringCancelsTheTimer() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, keepAlive: .window)
        let a = machine.subscriberJoined()
        _ = machine.nextRequested(a)
        _ = machine.subscriberLeft(a)
        #expect(machine.upstreamEnded(epoch: 0, failure: nil).timerTask == .cancel)
        #expect(machine.upstream == .terminated(.finished))
    }

    @Test(
        "KeepAlive.forever: the last subscriberLeft lingers without a timer, however often; upstreamEnded has none to cancel"
    )
    func lingeringForeverHasNoTimer() {
        var machine = Machine(
            policy: .unbounded, replay: 1, mode: .automatic, keepAlive: .forever, replayExpiry: .afterWindow)
        let a = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: 0))
        for round in 0..<3 {
            let leaving = round == 0 ? a : machine.subscriberJoined()
            let leave = machine.subscriberLeft(leaving)
            #expect(leave.isEmpty, "no timer, nothing cancelled")
            #expect(machine.upstream == .lingering(epoch: 0))
            #expect(!machine.deadlineTimerIsRunning)
            #expect(!machine.replayExpiryPending, "the upstream never stops, so the cache never expires")
        }
        _ = machine.subscriberJoined()
        #expect(machine.upstream == .running(epoch: 0), "the same iteration continues")
        #expect(machine.upstreamEnded(epoch: 0, failure: nil).timerTask == .none)
        #expect(machine.invariantViolation() == nil)
    }

    @Test("last subscriberLeft without keep-alive cancels the upstream at once")
    func lastSubscriberLeftWithoutKeepAliveCancelsAtOnce() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        _ = machine.nextRequested(a)
        let leave = machine.subscriberLeft(a)
        #expect(leave.cancelUpstream == 0)
        #expect(leave.timerTask == .none)
        #expect(machine.upstream == .idle)
    }
}
