// multicast(replay:buffering:) -> AsyncMulticastSequence, MulticastConnection and
// autoconnect(), with real tasks. The connect/cancel epochs behind them are checked in
// Engine/StateMachineConnectionTests.swift.

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
        await leaveAll(a, b)
    }

    /// A multicast of a `FedSource` (keeping `replay`) that `count` subscribers joined,
    /// without waiting, before `connect()`; connected, and its iteration 0 started.
    static func joinedThenConnected(
        _ count: Int, replay: Int = 0
    ) async -> (
        FedSource, AsyncMulticastSequence<Int, Never>, MulticastConnection, [SubscriberTask<Int, Never>]
    ) {
        let source = FedSource()
        let multicast = source.multicast(replay: replay)
        var joined: [SubscriberTask<Int, Never>] = []
        for _ in 0..<count { joined.append(await SubscriberTask.join { multicast.makeAsyncIterator() }) }
        let connection = multicast.connect()
        await source.control.waitForStart(of: 0)
        return (source, multicast, connection, joined)
    }

    @Test("subscribers that joined before connect() but never waited see the first element too")
    func idleSubscribersSeeFirstElement() async {
        let (source, _, connection, joined) = await Self.joinedThenConnected(2)
        let (a, b) = (joined[0], joined[1])
        source.control.yield(1, 2, 3)
        #expect(await a.take(3) == [1, 2, 3])
        #expect(await b.take(3) == [1, 2, 3])
        connection.cancel()
        await leaveAll(a, b)
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
        let (source, multicast, connection, joined) = await Self.joinedThenConnected(2)
        let (reader, idle) = (joined[0], joined[1])
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

    /// At `cancel()` the subscribers present keep exactly what was buffered for them, and that
    /// includes the element the upstream was parked with: the upstream offers every element it
    /// pulled before it parks for room (`.bounded(n)` parks once a subscriber holds `n`), so that
    /// element is already in the buffer when the cancel resumes the parked upstream with
    /// `false`. The base is asked for one more element only after the cancel, in the cancelled
    /// task, so that it sees the cancellation (Guides/Share.md, "Last one out"); what it returns
    /// reaches no one. The base here ignores cancellation, so that last answer is a real
    /// element (2), and the test shows it is not delivered.
    @Test("cancel() while the upstream is parked: subscribers keep exactly what was buffered, its last offer included")
    func cancelWhileParkedKeepsExactlyWhatWasBuffered() async throws {
        let probe = Probe()
        let multicast = Instrumented((0..<10).async, probe: probe).multicast(buffering: .bounded(2))
        let holder = SubscriberBox(multicast.makeAsyncIterator())  // reads nothing before the cancel
        let reader = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let connection = multicast.connect()
        // `reader` receiving 1 shows that 1 was offered: `holder` then holds 0 and 1, its bound,
        // so the upstream parks after offering 1 and asks the base for nothing more.
        #expect(await reader.take(2) == [0, 1])
        #expect(probe.pulls == 2, "the base was asked for 0 and 1, then the upstream parked with 1 offered")

        connection.cancel()
        var kept: [Int] = []
        while let element = await holder.next() { kept.append(element) }
        #expect(kept == [0, 1], "exactly what was buffered, the element the upstream parked with included")
        #expect(await reader.next() == nil)

        try await waitUntil("the cancelled upstream iteration to end") { probe.liveIterators == 0 }
        #expect(probe.pulls == 3, "asked once more, after the cancel, so that the base sees it")
        #expect(await holder.next() == nil, "the element that last pull returned reached no one")
        await reader.leave()
    }

    /// The other half of Guides/Multicast.md's "`cancel()` drains, then ends": an element the
    /// base hands over after the cancel, here one it was still computing, reaches no one; the
    /// subscribers present keep what was buffered at the cancel (nothing here).
    @Test("cancel() while the base computes an element: that element reaches no one")
    func elementHandedOverAfterTheCancelIsDiscarded() async throws {
        let source = StubbornSource()
        let probe = Probe()
        let multicast = Instrumented(source, probe: probe).multicast()
        let present = SubscriberBox(multicast.makeAsyncIterator())
        let connection = multicast.connect()
        _ = await source.control.pulled.next("the upstream asking the base for its first element")

        connection.cancel()
        source.control.answer(1)  // the base ignores the cancellation and hands 1 over
        try await waitUntil("the cancelled upstream iteration to end") { probe.liveIterators == 0 }
        #expect(probe.pulls == 1, "it was not asked again: it had seen the cancellation")
        #expect(await present.next() == nil, "1 reached no one")

        let later = SubscriberBox(multicast.makeAsyncIterator())
        let reconnected = multicast.connect()
        _ = await source.control.pulled.next("the new iteration asking for its first element")
        source.control.answer(10)
        #expect(await later.next() == 10, "the new iteration's element, not the discarded one")
        _ = await source.control.pulled.next("the new iteration asking for its second element")
        reconnected.cancel()
        source.control.answer(nil)
        try await waitUntil("the second iteration to end") { probe.liveIterators == 0 }
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
        let b = await source.expectANewSubscriberContinuesIterationZero(
            "the upstream is still running", receiving: 2
        ) { multicast.makeAsyncIterator() }
        #expect(multicast.connect() == connection)
        connection.cancel()
        await b.leave()
    }

    enum AutoconnectedFace: String, NamedTestCase {
        case view, viewOfView, events, viewEvents, anyShared
    }

    @Test(
        "every way to subscribe to an autoconnected multicast connects it on demand: the rule is the face's, not a member's",
        arguments: AutoconnectedFace.allCases)
    func autoconnectThroughEveryMember(_ face: AutoconnectedFace) async throws {
        let source = FedSource()
        let auto = source.multicast().autoconnect()
        let shared: any AsyncSubscribableSequence<Int, Never> = auto
        let received = Task {
            switch face {
            case .view:
                var iterator = auto.buffering(.bufferingNewest(4)).makeAsyncIterator()
                return await iterator.next().map { SharedEvent.element($0) }
            case .viewOfView:
                var iterator = auto.buffering(.unbounded).buffering(.bounded(4)).makeAsyncIterator()
                return await iterator.next().map { SharedEvent.element($0) }
            case .events:
                var iterator = auto.events().makeAsyncIterator()
                return await iterator.next()
            case .viewEvents:
                var iterator = auto.buffering(.bufferingOldest(4)).events().makeAsyncIterator()
                return await iterator.next()
            case .anyShared:
                var iterator = shared.makeAsyncIterator()
                return await iterator.next().map { SharedEvent.element($0) }
            }
        }
        await source.control.waitForStart(of: 0)  // the wait connected it
        source.control.yield(1)
        #expect(await received.value == .element(1))
        #expect(source.control.iteratorCount == 1)
        auto.connect().cancel()
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
        let (source, multicast, connection, joined) = await Self.joinedThenConnected(1, replay: 1)
        let a = joined[0]
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
        let (source, multicast, connection, joined) = await Self.joinedThenConnected(1, replay: 2)
        let a = joined[0]
        source.control.yield(1, 2, 3)
        #expect(await a.take(3) == [1, 2, 3])
        let late = await SubscriberTask.join { multicast.makeAsyncIterator() }
        #expect(await late.take(2) == [2, 3])
        connection.cancel()
        #expect(await late.next() == nil)
        await a.leave()
    }
}
