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
