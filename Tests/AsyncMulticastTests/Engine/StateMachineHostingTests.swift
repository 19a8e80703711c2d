// hostStopped, the transition of a hosted storage whose run() ended (AsyncSharedService), at
// the level of MulticastStateMachine: whatever the upstream's state, the machine terminates
// as finished; a running epoch is cancelled; subscribers get what was buffered, then the
// end; a later one gets the end at once. The real-task side is in Share/SharedServiceTests.

import Testing

@testable import AsyncMulticast

@Suite("State machine: a hosted upstream's run() ending")
struct StateMachineHostingTests {
    @Test("while running: the epoch is cancelled, the buffered elements are still read, then the end")
    func whileRunning() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic)
        let reader = machine.subscriberJoined()
        #expect(machine.take(reader) == .suspend(startUpstream: 0))
        #expect(!machine.produce(1, epoch: 0).isStop)
        #expect(!machine.produce(2, epoch: 0).isStop)
        let effects = machine.hostStopped()
        #expect(effects.cancelUpstream == 0)
        #expect(machine.upstream == .terminated(.finished))
        #expect(machine.produce(3, epoch: 0).isStop, "the cancelled epoch produces nothing more")
        #expect(machine.drain(reader) == [1, 2])
        #expect(!machine.isSubscribed(reader))
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .finished)
        #expect(machine.hostStopped().isEmpty, "once terminated, nothing more")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("while idle or lingering: nothing to cancel but the keep-alive timer; the machine ends")
    func whileIdleOrLingering() {
        var idle = Machine(policy: .unbounded, replay: 0, mode: .automatic)
        let idleEffects = idle.hostStopped()
        #expect(idleEffects.cancelUpstream == nil)
        #expect(idle.upstream == .terminated(.finished))

        var lingering = Machine(policy: .unbounded, replay: 1, mode: .automatic, keepAlive: .window)
        let reader = lingering.subscriberJoined()
        #expect(lingering.take(reader) == .suspend(startUpstream: 0))
        #expect(!lingering.produce(7, epoch: 0).isStop)
        _ = lingering.subscriberLeft(reader)
        #expect(lingering.upstream == .lingering(epoch: 0))
        let effects = lingering.hostStopped()
        #expect(effects.cancelUpstream == 0)
        #expect(effects.timerTask == .cancel)
        let late = lingering.subscriberJoined()
        #expect(lingering.take(late) == .element(7), "the replay survives the end, as for share()")
        #expect(lingering.take(late) == .finished)
    }
}

@Suite("State machine: a hosted run()'s lifecycle")
struct StateMachineHostLifecycleTests {
    /// A suspended `run()` asking for its next iteration.
    static func asking(
        _ machine: inout Machine, cancelled: Bool = false
    ) async -> (
        Suspended<UInt64?>, Machine.HostWait
    ) {
        let waiting = await Suspended<UInt64?>.make()
        return (waiting, machine.hostWaiting(waiting.continuation, cancelled: cancelled))
    }

    @Test("an iteration started before run(): picked up when run() first asks; run() claims once")
    func pendingBeforeRun() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, hosted: true)
        let reader = machine.subscriberJoined()
        guard case .nothingReadyStartingUpstream(let effects) = machine.nextRequested(reader) else {
            Issue.record("the first read did not start the upstream")
            return
        }
        #expect(effects.upstreamStart?.epoch == 0)
        #expect(effects.upstreamStart?.hostWakeUp == nil, "no run() waits: it is kept")
        guard case .notStarted(pending: 0?) = machine.host else {
            Issue.record("the iteration is not kept for run(): \(machine.host)")
            return
        }
        #expect(machine.hostStarted() == .claimed)
        #expect(machine.hostStarted() == .alreadyRunning)
        let (waiting, wait) = await Self.asking(&machine)
        #expect(wait == .resume(0))
        waiting.continuation.resume(returning: nil)
        #expect(machine.invariantViolation() == nil)
    }

    @Test("run() waiting: the next iteration the machine starts wakes it; a cancelled wait hands it back")
    func waitingThenWokenOrCancelled() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual, hosted: true)
        #expect(machine.hostStarted() == .claimed)
        let (first, wait) = await Self.asking(&machine)
        #expect(wait == .stored)
        #expect(machine.invariantViolation() == nil)
        let (epoch, effects) = machine.connectRequested()
        #expect(effects.startUpstream == epoch)
        let wakeUp = effects.upstreamStart?.hostWakeUp
        #expect(wakeUp != nil, "the waiting run() is handed the iteration in the same event")
        wakeUp?.resume(returning: epoch)
        #expect(await first.value() == .some(epoch))
        #expect(machine.connectionCancelled(epoch: epoch!).cancelUpstream == epoch)
        let (second, again) = await Self.asking(&machine)
        #expect(again == .stored)
        machine.hostWaitCancelled()?.resume(returning: nil)
        #expect(await second.value() == .some(nil))
        #expect(machine.hostWaitCancelled() == nil, "nothing waits any more")
        let (third, cancelled) = await Self.asking(&machine, cancelled: true)
        #expect(cancelled == .resume(nil), "a cancelled run() is not kept")
        third.continuation.resume(returning: nil)
    }

    @Test("run() ended: the machine terminates, a later run() finds it ended, and an iteration is never handed to it")
    func ended() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic, hosted: true)
        #expect(machine.hostStarted() == .claimed)
        let effects = machine.hostEnded()
        #expect(effects.isEmpty)
        #expect(machine.upstream == .terminated(.finished))
        #expect(machine.hostStarted() == .alreadyEnded)
        #expect(machine.invariantViolation() == nil)
    }
}
