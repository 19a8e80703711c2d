// multicast().autoconnect(minimumSubscribers: n): the subscriber whose joining makes the count
// reach n connects the multicast, inside its `makeAsyncIterator()`, so that all n see the
// first element. Waiting does not connect, later joiners do not reconnect, leaving does not
// disconnect; after a cancelled connection the next joiner that makes the count connects again.

import Testing

@testable import AsyncMulticast

@Suite("multicast().autoconnect(minimumSubscribers:)", .timeLimit(.minutes(2)))
struct AutoconnectMinimumTests {
    /// `autoconnect(minimumSubscribers: 2)` of a `FedSource`'s multicast, which its two
    /// subscribers `a` and `b` connected by joining.
    static func connectedByTwo() async -> (
        FedSource, AsyncMulticastSequence<Int, Never>, a: SubscriberTask<Int, Never>, b: SubscriberTask<Int, Never>
    ) {
        let source = FedSource()
        let multicast = source.multicast().autoconnect(minimumSubscribers: 2)
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let b = await SubscriberTask.join { multicast.makeAsyncIterator() }
        await source.control.waitForStart(of: 0)
        return (source, multicast, a, b)
    }

    @Test(
        "nothing is pulled until the n-th subscriber joins, even while the first ones wait; then all n see the first element"
    )
    func connectsWhenTheCountIsReached() async throws {
        let source = FedSource()
        let multicast = source.multicast().autoconnect(minimumSubscribers: 3)
        let a = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let b = await SubscriberTask.join { multicast.makeAsyncIterator() }
        a.request()
        b.request()
        try await waitUntil("two subscribers waiting") { multicast.storage.waitingCount == 2 }
        await letOthersRun()
        #expect(source.control.iteratorCount == 0, "two subscribers, even waiting, do not connect")
        #expect(multicast.storage.upstreamState == .idle)

        // The third joins, and does not even ask for an element.
        let c = await SubscriberTask.join { multicast.makeAsyncIterator() }
        #expect(multicast.storage.upstreamState == .running(epoch: 0), "connected inside the third makeAsyncIterator()")
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        #expect(await a.answer() == 1)
        #expect(await b.answer() == 1)
        #expect(await c.take(2) == [1, 2])
        #expect(await a.next() == 2)
        #expect(await b.next() == 2)
        #expect(source.control.iteratorCount == 1)
        await leaveAll(a, b, c)
    }

    @Test("later joiners do not reconnect, and leaving does not disconnect")
    func laterJoinersAndLeaving() async throws {
        let (source, multicast, a, b) = await Self.connectedByTwo()
        let late = await SubscriberTask.join { multicast.makeAsyncIterator() }
        source.control.yield(1)
        #expect(await late.next() == 1, "a later joiner shares the running connection")
        await leaveAll(a, b, late)
        #expect(multicast.subscriberCount == 0)
        #expect(multicast.storage.upstreamState == .running(epoch: 0), "nobody left, still connected")
        #expect(source.control.end(of: 0) == nil, "the upstream iteration was not cancelled")

        // Joining again, below and above the minimum, continues the same iteration.
        let x = await SubscriberTask.join { multicast.makeAsyncIterator() }
        let y = await SubscriberTask.join { multicast.makeAsyncIterator() }
        source.control.yield(2)
        #expect(await x.next() == 2)
        #expect(await y.next() == 2)
        #expect(source.control.iteratorCount == 1, "never a second iteration")
        await leaveAll(x, y)
    }

    @Test("after the connection is cancelled, the joiner that makes the count again connects again")
    func reconnectsAfterCancellation() async throws {
        let (source, multicast, a, b) = await Self.connectedByTwo()
        source.control.yield(1)
        #expect(await a.next() == 1)
        #expect(await b.next() == 1)

        multicast.connect().cancel()  // connect() while connected returns the running connection
        #expect(await a.next() == nil)
        #expect(await b.next() == nil)
        #expect(multicast.storage.upstreamState == .idle)

        let x = await SubscriberTask.join { multicast.makeAsyncIterator() }
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "one subscriber does not reconnect")
        let y = await SubscriberTask.join { multicast.makeAsyncIterator() }
        await source.control.waitForStart(of: 1)
        source.control.yield(10)
        #expect(await x.next() == 10)
        #expect(await y.next() == 10)
        await leaveAll(x, y)
    }

    @Test("subscribers that joined through the plain multicast count, but only an autoconnecting one connects")
    func otherSubscribersCount() async throws {
        let source = FedSource()
        let plain = source.multicast()
        let automatic = plain.autoconnect(minimumSubscribers: 3)
        let a = await SubscriberTask.join { plain.makeAsyncIterator() }
        let b = await SubscriberTask.join { automatic.makeAsyncIterator() }
        let c = await SubscriberTask.join { plain.makeAsyncIterator() }
        await letOthersRun()
        #expect(plain.subscriberCount == 3)
        #expect(source.control.iteratorCount == 0, "the third joined through the plain multicast, which never connects")
        // A view and a lag-reporting iterator of the autoconnecting multicast connect too.
        var lagging = automatic.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
        #expect(plain.storage.upstreamState == .running(epoch: 0))
        await source.control.waitForStart(of: 0)
        let d = await SubscriberTask.join { automatic.buffering(.unbounded).makeAsyncIterator() }
        source.control.yield(1)
        for subscriber in [a, b, c, d] { #expect(await subscriber.next() == 1) }
        #expect(await lagging.next() == .element(1))
        for subscriber in [a, b, c, d] { await subscriber.leave() }
    }

    @Test("minimumSubscribers: 1 connects when the first subscriber joins, before it asks for anything")
    func minimumOfOne() async throws {
        let source = FedSource()
        let multicast = source.multicast().autoconnect(minimumSubscribers: 1)
        #expect(multicast.storage.upstreamState == .idle)
        var iterator = multicast.makeAsyncIterator()
        #expect(multicast.storage.upstreamState == .running(epoch: 0))
        await source.control.waitForStart(of: 0)
        source.control.yield(7)
        source.control.finish()
        #expect(await iterator.next() == 7)
        #expect(await iterator.next() == nil)
    }

    @Test("once the upstream has finished, reaching the count does not start it again")
    func noRestartAfterTheEnd() async throws {
        let (source, multicast, a, b) = await Self.connectedByTwo()
        source.control.yield(1)
        source.control.finish()
        #expect(await a.drain().elements == [1])
        #expect(await b.drain().elements == [1])
        var x = multicast.makeAsyncIterator()
        var y = multicast.makeAsyncIterator()
        #expect(await x.next() == nil)
        #expect(await y.next() == nil)
        #expect(source.control.iteratorCount == 1)
    }

    @Test("minimumSubscribers: 0 is refused with a message naming the parameter")
    func zeroIsRefused() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.multicast().autoconnect(minimumSubscribers: 0)
        }
        expectMessage(
            result, contains: "autoconnect(minimumSubscribers:): minimumSubscribers must be at least 1, got 0")
    }
}
