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
