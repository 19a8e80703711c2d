// Issue 3: multicast(replay:buffering:) -> AsyncMulticastSequence, MulticastConnection,
// autoconnect(); and the state machine's connect/disconnect epochs.

import Testing
@testable import AsyncMulticast

@Suite("multicast(replay:buffering:)", .timeLimit(.minutes(2)))
struct MulticastTests {
    @Test("subscribers join before anything flows; nothing is pulled until connect(); all see the first element")
    func nothingFlowsBeforeConnect() async {
        let source = FedSource()
        let multicast = source.multicast()
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let b = await SubscriberTask.join { multicast.makeAsyncIterator() }
        #expect(multicast.subscriberCount == 2)
        a.request()  // both wait for an element…
        b.request()
        await letOthersRun()
        #expect(source.control.iteratorCount == 0, "…but demand does not start a multicast")
        #expect(source.control.nextCalls == 0)

        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        #expect(source.control.iteratorCount == 1)
        source.control.yield(1, 2)
        #expect(await a.answer() == 1, "the very first element")
        #expect(await b.answer() == 1, "the very first element")
        #expect(await a.next() == 2)
        #expect(await b.next() == 2)
        connection.cancel()
        await a.leave()
        await b.leave()
    }

    @Test("subscribers that joined before connect() but never waited see the first element too")
    func idleSubscribersSeeFirstElement() async {
        let source = FedSource()
        let multicast = source.multicast()
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let b = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        #expect(await a.take(3) == [1, 2, 3])
        #expect(await b.take(3) == [1, 2, 3])
        connection.cancel()
        await a.leave()
        await b.leave()
    }

    @Test("connect() while connected returns the same connection")
    func connectIsIdempotentWhileConnected() async {
        let source = FedSource()
        let multicast = source.multicast()
        let first = multicast.connect()
        let second = multicast.connect()
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        await source.control.waitForStart(of: 0)
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "one iteration for both calls")

        let other = FedSource().multicast().connect()
        #expect(other != first, "connections of different multicasts differ")
        first.cancel()
        other.cancel()
    }

    @Test("cancel(): the upstream is cancelled, current subscribers drain then get nil, a later connect() restarts")
    func cancelDrainsThenReconnectRestarts() async {
        let source = FedSource()
        let multicast = source.multicast()
        let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let idle = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        #expect(await reader.take(3) == [1, 2, 3])  // so 1, 2, 3 were produced
        reader.request()  // now waiting for a 4th

        connection.cancel()
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled, "AsyncStream onTermination(.cancelled)")
        #expect(await reader.answer() == nil, "a waiting subscriber gets nil")
        let drained = await idle.drain()
        #expect(drained.elements == [1, 2, 3], "what was buffered, then nil")

        let later = await SubscriberTask.join { multicast.makeAsyncIterator() }
        later.request()
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "nothing restarts on its own")
        let reconnected = multicast.connect()
        #expect(reconnected != connection)
        await source.control.waitForStart(of: 1)
        #expect(source.control.iteratorCount == 2, "a fresh makeAsyncIterator()")
        source.control.yield(10)
        #expect(await later.answer() == 10, "a later subscriber is not ended by the old cancel")
        reconnected.cancel()
        #expect(await later.next() == nil)
        connection.cancel()  // cancelling an old connection again does nothing
        #expect(source.control.iteratorCount == 2)
    }

    @Test("cancelling twice is harmless; an old connection does not cancel a newer one")
    func staleCancelIsIgnored() async {
        let source = FedSource()
        let multicast = source.multicast()
        let first = multicast.connect()
        await source.control.waitForStart(of: 0)
        first.cancel()
        first.cancel()
        _ = await source.control.waitForEnd()
        let second = multicast.connect()
        await source.control.waitForStart(of: 1)
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        first.cancel()  // stale
        source.control.yield(5)
        #expect(await a.next() == 5)
        #expect(source.control.end(of: 1) == nil)
        second.cancel()
        #expect(await a.next() == nil)
    }

    @Test("subscribers leaving do not disconnect a multicast")
    func leavingDoesNotDisconnect() async {
        let source = FedSource()
        let multicast = source.multicast()
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1)
        #expect(await a.next() == 1)
        await a.leave()
        #expect(multicast.subscriberCount == 0)
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "the upstream is still running")

        let b = await SubscriberTask.join { multicast.makeAsyncIterator() }
        source.control.yield(2)
        #expect(await b.next() == 2, "the same iteration goes on")
        #expect(source.control.iteratorCount == 1)
        #expect(multicast.connect() == connection)
        connection.cancel()
        await b.leave()
    }

    @Test("autoconnect() connects on the first demand, and leaving does not disconnect")
    func autoconnect() async {
        let source = FedSource()
        let multicast = source.multicast()
        let auto = multicast.autoconnect()
        let a = await SubscriberTask.join { auto.makeAsyncIterator() }
        await letOthersRun()
        #expect(source.control.iteratorCount == 0, "joining is not demand")

        #expect(await a.startIteration(of: source, yielding: 1) == 1)
        await a.leave()
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil)

        let b = await SubscriberTask.join { auto.makeAsyncIterator() }
        source.control.yield(2)
        #expect(await b.next() == 2)
        #expect(source.control.iteratorCount == 1)
        // The connection is the multicast's: connect() hands out the running one.
        let connection = multicast.connect()
        connection.cancel()
        #expect(await b.next() == nil)
        _ = await source.control.waitForEnd()

        // After a cancel, demand through autoconnect connects again.
        let c = await SubscriberTask.join { auto.makeAsyncIterator() }
        c.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(3)
        #expect(await c.answer() == 3)
        multicast.connect().cancel()
        await c.leave()
    }

    @Test("after the upstream ended, connect() returns an inert connection")
    func connectAfterEndIsInert() async {
        let source = FedSource()
        let multicast = source.multicast(replay: 1)
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1)
        source.control.finish()
        let drained = await a.drain()
        #expect(drained.elements == [1])
        #expect(drained.failure == nil)

        let inert = multicast.connect()
        #expect(inert != connection)
        inert.cancel()
        connection.cancel()
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "nothing restarts after the end")
        let late = await SubscriberTask.join { multicast.makeAsyncIterator() }
        #expect(await late.drain().elements == [1], "replay, then the terminal event")
    }

    @Test("multicast(replay:) gives a late subscriber the latest elements")
    func multicastReplay() async {
        let source = FedSource()
        let multicast = source.multicast(replay: 2)
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        #expect(await a.take(3) == [1, 2, 3])
        let late = await SubscriberTask.join { multicast.makeAsyncIterator() }
        #expect(await late.take(2) == [2, 3])
        connection.cancel()
        #expect(await late.next() == nil)
        await a.leave()
    }
}

// MARK: - State machine: connect/disconnect epochs and end positions

@Suite("MulticastStateMachine: connect/disconnect")
struct MulticastStateMachineConnectionTests {
    typealias Machine = MulticastStateMachine<Int, Never>

    private func expectElement(
        _ action: Machine.NextAction, _ expected: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if case .element(let element, _) = action {
            #expect(element == expected, sourceLocation: sourceLocation)
        } else {
            Issue.record("expected element \(expected), got \(action)", sourceLocation: sourceLocation)
        }
    }

    private func expectEnd(_ action: Machine.NextAction, sourceLocation: SourceLocation = #_sourceLocation) {
        if case .terminal(.success(nil)) = action { return }
        Issue.record("expected the end (nil), got \(action)", sourceLocation: sourceLocation)
    }

    private func expectSuspend(
        _ action: Machine.NextAction, starting epoch: UInt64?, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if case .suspend(let start) = action {
            #expect(start == epoch, sourceLocation: sourceLocation)
        } else {
            Issue.record("expected to suspend, got \(action)", sourceLocation: sourceLocation)
        }
    }

    private func produced(_ action: Machine.ProduceAction) -> Bool {
        if case .stop = action { return false }
        return true
    }

    @Test("epochs: connect starts epoch 0, disconnect cancels it, the next connect starts epoch 1")
    func epochs() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        #expect(machine.upstream == .idle)
        let a = machine.subscriberJoined()
        expectSuspend(machine.nextRequested(a), starting: nil)  // manual: demand does not start

        let (epoch0, connectEffects) = machine.connectRequested()
        #expect(epoch0 == 0)
        #expect(connectEffects.startUpstream == 0)
        #expect(machine.upstream == .running(epoch: 0))
        let (again, againEffects) = machine.connectRequested()
        #expect(again == 0, "connecting while connected: the same epoch")
        #expect(againEffects.isEmpty)

        #expect(produced(machine.produce(1, epoch: 0)))
        let disconnect = machine.connectionCancelled(epoch: 0)
        #expect(disconnect.cancelUpstream == 0)
        #expect(machine.upstream == .idle)
        #expect(!produced(machine.produce(2, epoch: 0)), "a cancelled epoch's producer is stale")
        #expect(machine.connectionCancelled(epoch: 0).isEmpty, "disconnecting twice does nothing")

        let (epoch1, reconnect) = machine.connectRequested()
        #expect(epoch1 == 1)
        #expect(reconnect.startUpstream == 1)
        #expect(machine.connectionCancelled(epoch: 0).isEmpty, "a stale disconnect leaves epoch 1 alone")
        #expect(machine.upstream == .running(epoch: 1))
        #expect(!produced(machine.produce(3, epoch: 0)))
        #expect(produced(machine.produce(4, epoch: 1)))
    }

    @Test("subscribers present at disconnect get their buffered elements, then nil; later ones do not end")
    func presentSubscribersEndAfterTheirBuffer() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let early = machine.subscriberJoined()
        let reader = machine.subscriberJoined()
        let (epoch, _) = machine.connectRequested()
        let e = epoch!
        #expect(produced(machine.produce(1, epoch: e)))
        #expect(produced(machine.produce(2, epoch: e)))
        expectElement(machine.nextRequested(reader), 1)

        _ = machine.connectionCancelled(epoch: e)
        let late = machine.subscriberJoined()
        #expect(machine.subscriberCount == 3)

        expectElement(machine.nextRequested(early), 1)
        expectElement(machine.nextRequested(early), 2)
        expectEnd(machine.nextRequested(early))
        expectElement(machine.nextRequested(reader), 2)
        expectEnd(machine.nextRequested(reader))
        #expect(!machine.isSubscribed(early) && !machine.isSubscribed(reader), "ended subscribers left")
        expectSuspend(machine.nextRequested(late), starting: nil)
        #expect(machine.isSubscribed(late))

        let (next, _) = machine.connectRequested()
        #expect(produced(machine.produce(3, epoch: next!)))
        expectElement(machine.nextRequested(late), 3)
        expectSuspend(machine.nextRequested(late), starting: nil)
        #expect(machine.subscriberCount == 1)
    }

    @Test("a subscriber waiting at disconnect is resumed with nil at once")
    func waitingSubscriberEndsAtDisconnect() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined()
        let (epoch, _) = machine.connectRequested()
        var disconnectResumed = 0
        let result = await withUnsafeContinuation { (continuation: Machine.SubscriberContinuation) in
            let suspended = machine.subscriberSuspended(a, continuation: continuation)
            #expect(suspended.subscribers.isEmpty, "nothing to read: it waits")
            let effects = machine.connectionCancelled(epoch: epoch!)
            disconnectResumed = effects.subscribers.count
            for subscriber in effects.subscribers { subscriber.resume(returning: effects.subscriberResult) }
        }
        #expect(disconnectResumed == 1)
        #expect(result == .success(nil))
        #expect(!machine.isSubscribed(a))
        #expect(machine.subscriberCount == 0)
    }

    @Test("manual mode: an autoconnecting demand starts the upstream, leaving never stops it")
    func autoconnectingDemand() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined()
        expectSuspend(machine.nextRequested(a, connectsOnDemand: true), starting: 0)
        let leave = machine.subscriberLeft(a)
        #expect(leave.cancelUpstream == nil)
        #expect(leave.keepAliveTimer == .none)
        #expect(machine.upstream == .running(epoch: 0))
    }

    @Test("manual mode with connectsOnDemand (autoconnect's iterators) starts the upstream on demand")
    func manualConnectOnDemand() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let a = machine.subscriberJoined()
        expectSuspend(machine.nextRequested(a), starting: nil)
        expectSuspend(machine.nextRequested(a, connectsOnDemand: true), starting: 0)
        #expect(machine.upstream == .running(epoch: 0))
    }

    @Test("after the upstream finished, connect() reports no epoch")
    func connectAfterTermination() {
        var machine = Machine(policy: .unbounded, replay: 1, mode: .manual)
        let (epoch, _) = machine.connectRequested()
        #expect(produced(machine.produce(9, epoch: epoch!)))
        _ = machine.upstreamEnded(epoch: epoch!, failure: nil)
        #expect(machine.upstream == .terminated(.finished))
        let (again, effects) = machine.connectRequested()
        #expect(again == nil)
        #expect(effects.isEmpty)
        let late = machine.subscriberJoined()
        expectElement(machine.nextRequested(late), 9)
        expectEnd(machine.nextRequested(late))
    }
}
