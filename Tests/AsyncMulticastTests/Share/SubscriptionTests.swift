// subscribe(buffering:): a subscriber that joins at the call and is iterated later, once,
// from any task. What it receives, where it can go, what a second iteration does, when it
// leaves, and that it keeps the face's policy and connect rule.

import Testing

@testable import AsyncMulticast

@Suite("subscribe(buffering:)", .timeLimit(.minutes(2)))
struct SubscriptionTests {
    @Test("joins at the call: what is sent before the iteration starts is received")
    func joinsAtTheCall() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        subject.send(0)  // before: not received
        let subscription = subject.subscribe()
        #expect(subject.subscriberCount == 1)
        subject.send(1)
        subject.send(2)
        subject.finish()
        var received: [Int] = []
        for await n in subscription { received.append(n) }
        #expect(received == [1, 2])
    }

    @Test("crosses into a @Sendable closure and is read from another task")
    func readFromAnotherTask() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let subscription = subject.subscribe()
        let body: @Sendable () async -> [Int] = {
            var received: [Int] = []
            for await n in subscription { received.append(n) }
            return received
        }
        for n in 1...100 { subject.send(n) }
        subject.finish()
        let reader = Task.detached(operation: body)
        #expect(await reader.value == Array(1...100))
    }

    @Test("a second iteration, of the subscription, a copy or its events, ends at once")
    func secondIterationEndsAtOnce() async throws {
        let subject = AsyncReplaySubject<Int, Never>(replay: 2)
        subject.send(1)
        let subscription = subject.subscribe()
        let copy = subscription
        subject.send(2)
        var first = subscription.makeAsyncIterator()
        #expect(await first.next() == 1)
        #expect(await first.next() == 2)
        var second = copy.makeAsyncIterator()
        #expect(await second.next() == nil, "the subscriber was taken")
        var events = subscription.events.makeAsyncIterator()
        #expect(await events.next() == nil)
        #expect(subject.subscriberCount == 1, "only the first iteration is a subscriber")
        subject.send(3)
        #expect(await first.next() == 3)
        subject.finish()
        #expect(await first.next() == nil)
    }

    @Test("released before anyone iterated it: the subscriber leaves with its last copy")
    func releasedWithoutIterating() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
        var subscription: SharedSubscription<Int, Never>? = subject.subscribe()
        var copy = subscription
        subject.send(1)
        subject.send(2)
        // A .bounded subscriber that does not read paces a waiting sender.
        let sender = Task { await subject.send(waitingForRoom: 3) }
        try await waitUntil("the sender waiting for room") { subject.storage.producersWaitingForRoom == 1 }
        subscription = nil
        #expect(subject.subscriberCount == 1, "a copy still holds it")
        copy = nil
        #expect(subject.subscriberCount == 0)
        try await withTimeout("the sender released") { await sender.value }
        _ = (subscription, copy)
    }

    @Test("its task cancelled while it waits: next() returns nil at once and it leaves")
    func cancelledWhileWaiting() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let subscription = subject.subscribe()
        let entered = Signal<Void>()
        let reader = Task {
            var iterator = subscription.makeAsyncIterator()
            entered.send(())
            return await iterator.next()
        }
        _ = await entered.next()
        try await waitUntil("the reader waiting") { subject.storage.waitingCount == 1 }
        reader.cancel()
        #expect(try await withTimeout("next() returning") { await reader.value } == nil)
        try await waitUntil("the subscriber gone") { subject.subscriberCount == 0 }
    }

    @Test("events: a lag report, and an eviction seen as .evicted")
    func events() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let lossy = subject.subscribe(buffering: .bufferingNewest(1))
        let evictable = subject.subscribe(buffering: .evicting(2))
        for n in 1...3 { subject.send(n) }
        subject.finish()
        var lossyEvents: [SharedEvent<Int>] = []
        for await event in lossy.events { lossyEvents.append(event) }
        #expect(lossyEvents == [.missed(2), .element(3)])
        var evictedEvents: [SharedEvent<Int>] = []
        for await event in evictable.events { evictedEvents.append(event) }
        #expect(evictedEvents == [.evicted(.hardLimit(2))])
    }

    @Test("nil keeps the face's policy; a view's subscription takes the view's")
    func policies() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(1))
        let own = subject.subscribe()
        let viewed = subject.buffering(.unbounded).subscribe()
        for n in 1...3 { subject.send(n) }
        subject.finish()
        var ownReceived: [Int] = []
        for await n in own { ownReceived.append(n) }
        var viewReceived: [Int] = []
        for await n in viewed { viewReceived.append(n) }
        #expect(ownReceived == [3])
        #expect(viewReceived == [1, 2, 3])
    }

    @Test("of an autoconnected multicast: its iteration connects it; of a share(), it starts the upstream")
    func connectRule() async throws {
        let source = FedSource()
        let auto = source.multicast().autoconnect()
        let subscription = auto.subscribe()
        await letOthersRun()
        #expect(source.control.iteratorCount == 0, "joining is not demand")
        let reader = Task { await subscription.first { _ in true } }
        await source.deliver(1, startingIteration: 0, to: reader)
        auto.connect().cancel()

        let shared = FedSource()
        let sharing = shared.share()
        let client = sharing.subscribe()
        let sharedReader = Task { await client.first { _ in true } }
        await shared.control.waitForStart(of: 0)
        shared.control.yield(7)
        #expect(await sharedReader.value == 7)
    }
}
