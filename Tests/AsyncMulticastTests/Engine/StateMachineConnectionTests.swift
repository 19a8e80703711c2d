// Manual mode, the one `multicast()` uses, at the level of `MulticastStateMachine`: demand
// starts nothing; connectRequested starts an epoch and connectionCancelled ends it; the
// subscribers present at a cancel get what was buffered for them, then nil, while later ones
// wait for the next connection; a stale epoch's producer or cancel changes nothing. The
// real-task side is in Multicast/MulticastTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: manual mode (multicast connections)")
struct StateMachineConnectionTests {
    @Test(
        "connectRequested while idle starts the next epoch; connectionCancelled while running cancels it; stale epochs do nothing"
    )
    func connectRequestedStartsAnEpochAndConnectionCancelledEndsIt() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        #expect(machine.upstream == .idle)
        let a = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: nil))  // manual: demand does not start

        let (epoch0, connectEffects) = machine.connectRequested()
        #expect(epoch0 == 0)
        #expect(connectEffects.startUpstream == 0)
        #expect(machine.upstream == .running(epoch: 0))
        let (again, againEffects) = machine.connectRequested()
        #expect(again == 0, "connecting while connected: the same epoch")
        #expect(againEffects.isEmpty)

        #expect(!machine.produce(1, epoch: 0).isStop)
        let disconnect = machine.connectionCancelled(epoch: 0)
        #expect(disconnect.cancelUpstream == 0)
        #expect(machine.upstream == .idle)
        #expect(machine.produce(2, epoch: 0).isStop, "a cancelled epoch's producer is stale")
        #expect(machine.connectionCancelled(epoch: 0).isEmpty, "disconnecting twice does nothing")

        let (epoch1, reconnect) = machine.connectRequested()
        #expect(epoch1 == 1)
        #expect(reconnect.startUpstream == 1)
        #expect(machine.connectionCancelled(epoch: 0).isEmpty, "a stale disconnect leaves epoch 1 alone")
        #expect(machine.upstream == .running(epoch: 1))
        #expect(machine.produce(3, epoch: 0).isStop)
        #expect(!machine.produce(4, epoch: 1).isStop)
    }

    @Test(
        "connectionCancelled ends the present subscribers after their buffered elements; one that joins afterwards waits for the next connection"
    )
    func connectionCancelledEndsPresentSubscribersAfterTheirBuffer() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let early = machine.subscriberJoined()
        let reader = machine.subscriberJoined()
        let (epoch, _) = machine.connectRequested()
        let e = epoch!
        #expect(!machine.produce(1, epoch: e).isStop)
        #expect(!machine.produce(2, epoch: e).isStop)
        #expect(machine.take(reader) == .element(1))

        _ = machine.connectionCancelled(epoch: e)
        let late = machine.subscriberJoined()
        #expect(machine.subscriberCount == 3)

        #expect(machine.take(early) == .element(1))
        #expect(machine.take(early) == .element(2))
        #expect(machine.take(early) == .finished)
        #expect(machine.take(reader) == .element(2))
        #expect(machine.take(reader) == .finished)
        #expect(!machine.isSubscribed(early) && !machine.isSubscribed(reader), "ended subscribers left")
        #expect(machine.take(late) == .suspend(startUpstream: nil))
        #expect(machine.isSubscribed(late))

        let (next, _) = machine.connectRequested()
        #expect(!machine.produce(3, epoch: next!).isStop)
        #expect(machine.take(late) == .element(3))
        #expect(machine.take(late) == .suspend(startUpstream: nil))
        #expect(machine.subscriberCount == 1)
    }

    @Test("connectionCancelled resumes a waiting subscriber with nil at once")
    func connectionCancelledResumesAWaitingSubscriberWithNil() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined()
        let (epoch, _) = machine.connectRequested()
        var disconnectResumed = 0
        let result = await withUnsafeContinuation { (continuation: Machine.SubscriberContinuation) in
            let suspended = machine.subscriberSuspended(a, continuation: continuation)
            #expect(suspended.subscribers.isEmpty, "nothing to read: it waits")
            let effects = machine.connectionCancelled(epoch: epoch!)
            disconnectResumed = effects.subscribers.count
            effects.perform()
        }
        #expect(disconnectResumed == 1)
        #expect(result == .success(nil))
        #expect(!machine.isSubscribed(a))
        #expect(machine.subscriberCount == 0)
    }

    @Test("an autoconnecting nextRequested while idle starts the upstream; subscriberLeft never stops it")
    func autoconnectingDemandWhileIdleStartsTheUpstream() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined(policy: nil, connectRule: .onDemand).id
        #expect(machine.take(a) == .suspend(startUpstream: 0))
        let leave = machine.subscriberLeft(a)
        #expect(leave.cancelUpstream == nil)
        #expect(leave.timerTask == .none)
        #expect(machine.upstream == .running(epoch: 0))
    }

    @Test("nextRequested while idle starts nothing, unless it connects on demand (autoconnect's iterators)")
    func demandWhileIdleStartsOnlyIfItConnectsOnDemand() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined()
        let onDemand = machine.subscriberJoined(policy: nil, connectRule: .onDemand).id
        #expect(machine.take(a) == .suspend(startUpstream: nil))
        #expect(machine.take(onDemand) == .suspend(startUpstream: 0))
        #expect(machine.upstream == .running(epoch: 0))
    }

    @Test("connectRequested after the upstream finished returns no epoch; later subscribers get the replay, then nil")
    func connectRequestedAfterTheEndReturnsNoEpoch() {
        var machine = Machine(policy: .unbounded, replay: 1, mode: .manual)
        let (epoch, _) = machine.connectRequested()
        #expect(!machine.produce(9, epoch: epoch!).isStop)
        _ = machine.upstreamEnded(epoch: epoch!, failure: nil)
        #expect(machine.upstream == .terminated(.finished))
        let (again, effects) = machine.connectRequested()
        #expect(again == nil)
        #expect(effects.isEmpty)
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .element(9))
        #expect(machine.take(late) == .finished)
    }
}
