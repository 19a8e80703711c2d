// share(by:): a router stopped while it works on an element (its key function still running
// when the key's last subscriber leaves) does not hand that element to the key's next
// subscriber. Found from outside by a probe; the check is now after the key function.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    // Blocks a thread (the key function waits on a `BlockingGate`): with the serialized tests.
    @Suite("AsyncSharedTopics: a stopped router", .timeLimit(.minutes(2)))
    struct SharedTopicsStoppedRouterTests {
        @Test(
            "a key function still running when its key's last subscriber leaves: that element does not reach the next subscriber"
        )
        func slowKeyFunctionDoesNotReachTheNextSubscriber() async throws {
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            let gate = BlockingGate(hangGuard: .seconds(30))
            let inKey = LockedFlag()
            let topics = stream.share(
                by: { n -> Int in
                    if n == 100 {
                        inKey.set()
                        gate.wait("the key of 100")
                    }
                    return 0
                }, keepAlive: .seconds(Int64.max))
            let firstLog = LockedLog<Int>()
            let first = Task { [s = topics.subscribe(to: 0)] in for await n in s { firstLog.append(n) } }
            feed.yield(1)
            try await waitUntil("1 received") { firstLog.values == [1] }
            feed.yield(100)
            try await waitUntil("the router in the key function of 100") { inKey.isSet }
            first.cancel()
            await first.value
            try await waitUntil("key 0 freed") { !topics.isLive(0) }

            let secondLog = LockedLog<Int>()
            let second = topics.subscribe(to: 0)  // 100 was taken by the stopped router before this
            let secondReader = Task { for await n in second { secondLog.append(n) } }
            gate.open()
            feed.yield(101)
            try await waitUntil("101 received") { secondLog.values.contains(101) }
            #expect(secondLog.values == [101], "100 was taken before subscribe(to: 0) returned")
            feed.finish()
            await secondReader.value
        }
    }
}

/// The router once its stop is decided: it routes nothing more, before its task is cancelled.
@Suite("AsyncSharedTopics: a router whose stop is decided", .timeLimit(.minutes(2)))
struct SharedTopicsRouterStopTests {
    @Test(
        "a router told it may no longer route, its task not cancelled, routes nothing more and returns: the next router alone routes what comes"
    )
    func stoppedRouterRoutesNothingBeforeItsCancellation() async throws {
        let hub = AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
        let topics = AsyncSubjectTopics<Int, Int, Never>()
        let received = LockedLog<Int>()
        let subscriber = topics.subscribe(to: 1)
        let reader = Task { for await n in subscriber { received.append(n) } }
        let mayRoute = Lock(true)
        let router = Task {
            await TopicsSession<Int, Int, Never>.pump(hub.subscribe(), key: { $0 % 2 }, into: topics) {
                mayRoute.withLock { $0 }
            }
        }
        try await waitUntil("the router joined the hub") { hub.subscriberCount == 1 }
        hub.send(1)
        try await waitUntil("1 routed") { received.values == [1] }
        mayRoute.withLock { $0 = false }  // what a stop decides, in its critical section, before it cancels the task
        hub.send(3)  // key 1's, taken by the router
        await router.value  // it returned by itself: nobody cancelled it
        #expect(!router.isCancelled)
        topics.send(5, to: 1)  // what the next router would route
        try await waitUntil("5") { received.values.contains(5) }
        #expect(received.values == [1, 5], "3 was taken by a router whose stop was decided")
        topics.finish()
        await reader.value
    }
}
