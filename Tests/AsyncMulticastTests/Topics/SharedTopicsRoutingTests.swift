// AsyncSharedTopics (`share(by:)`): where an element of the one upstream goes (to its key's
// subscribers only), how each subscriber buffers (its own policy, per key: replay, eviction,
// lag reports), what a lossless subscriber does to the other keys, and how the upstream's end
// reaches every key.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics routing", .timeLimit(.minutes(2)))
struct SharedTopicsRoutingTests {
    struct Item: Sendable, Equatable {
        let key: String
        let n: Int
    }

    /// A feed of items, and the topics keyed by `Item.key`.
    func makeTopics(
        replay: Int = 0, buffering: SharedBufferingPolicy = .bounded(64)
    ) -> (AsyncSharedTopics<String, Item, Never>, AsyncStream<Item>.Continuation) {
        let (feed, continuation) = AsyncStream.makeStream(of: Item.self)
        return (feed.share(by: \.key, replay: replay, buffering: buffering), continuation)
    }

    /// Over an unbounded upstream: a subscriber of "a" with `policy` that does not read, and
    /// one of "b"; then 1...10 for "a" and 100 for "b" are fed, in that order.
    func stalledBehindTenElements(
        buffering policy: SharedBufferingPolicy
    ) -> (
        AsyncStream<Item>.Continuation, stalled: SharedSubscription<Item, Never>, other: SharedSubscription<Item, Never>
    ) {
        let (topics, feed) = self.makeTopics(buffering: .unbounded)
        let stalled = topics.subscribe(to: "a", buffering: policy)
        let other = topics.subscribe(to: "b")
        for n in 1...10 { feed.yield(Item(key: "a", n: n)) }
        feed.yield(Item(key: "b", n: 100))
        return (feed, stalled, other)
    }

    func numbers(_ subscription: SharedSubscription<Item, Never>) async -> [Int] {
        await subscription.reduce(into: []) { $0.append($1.n) }
    }

    @Test("an element reaches only its key's subscribers: a reader of another key is never woken")
    func elementRoutedOnlyToItsKey() async throws {
        let (topics, feed) = self.makeTopics(buffering: .unbounded)
        let mine = topics.subscribe(to: "a")
        let theirs = topics.subscribe(to: "b")
        let wakeUps = Tally()
        let reader = await startCountingWakeUps(of: theirs, in: wakeUps) { $0.n }
        for n in 1...1_000 { feed.yield(Item(key: "a", n: n)) }
        // Routing is in upstream order: once "a" holds all 1,000, every one was routed.
        try await waitUntil("a's elements routed") { mine.backlog?.count == 1_000 }
        #expect(theirs.backlog?.highWaterMark == 0, "nothing was ever buffered for b")
        #expect(wakeUps.count == 0)
        feed.yield(Item(key: "b", n: -1))
        await wakeUps.wait(for: 1, "b's own element")
        feed.finish()
        #expect(await reader.value == [-1])
        #expect(wakeUps.count == 1, "one wake-up: its own element")
        #expect(await self.numbers(mine) == Array(1...1_000))
    }

    @Test("an element of a key without subscribers reaches nobody")
    func elementOfAnIdleKeyIsDropped() async throws {
        let (topics, feed) = self.makeTopics(replay: 4)
        let a = topics.subscribe(to: "a")
        feed.yield(Item(key: "idle", n: 1))
        feed.yield(Item(key: "a", n: 2))
        try await waitUntil("a's element routed") { a.backlog?.count == 1 }
        #expect(topics.keyCount == 1, "no key is created for an element")
        #expect(!topics.isLive("idle"))
        feed.finish()
        #expect(await self.numbers(a) == [2])
    }

    @Test("each subscriber buffers by its own policy, per key")
    func perKeyBufferingPolicies() async throws {
        let (topics, feed) = self.makeTopics(buffering: .bufferingNewest(2))
        let lossy = topics.subscribe(to: "a")  // the topics' policy
        let lossless = topics.subscribe(to: "a", buffering: .unbounded)
        let oldest = topics.subscribe(to: "b", buffering: .bufferingOldest(3))
        for n in 1...5 {
            feed.yield(Item(key: "a", n: n))
            feed.yield(Item(key: "b", n: n * 10))
        }
        feed.finish()
        // Read only once everything was routed: the end frees every key.
        try await waitUntil("every element routed") { topics.keyCount == 0 }
        #expect(await self.numbers(lossy) == [4, 5])
        #expect(await self.numbers(lossless) == [1, 2, 3, 4, 5])
        #expect(await self.numbers(oldest) == [10, 20, 30])
    }

    @Test("a new subscriber of a key gets that key's replay first, and no other key's")
    func replayIsPerKey() async throws {
        let (topics, feed) = self.makeTopics(replay: 1, buffering: .unbounded)
        let first = topics.subscribe(to: "a")
        let other = topics.subscribe(to: "b")
        feed.yield(Item(key: "a", n: 1))
        feed.yield(Item(key: "a", n: 2))
        feed.yield(Item(key: "b", n: 20))
        try await waitUntil("the elements routed") { first.backlog?.count == 2 && other.backlog?.count == 1 }
        let second = topics.subscribe(to: "a")
        feed.yield(Item(key: "a", n: 3))
        feed.finish()
        #expect(await self.numbers(second) == [2, 3], "a's latest, then what follows")
        #expect(await self.numbers(first) == [1, 2, 3])
        #expect(await self.numbers(other) == [20])
    }

    @Test("a lag-reporting subscriber of a key hears what it missed")
    func lagReportsPerKey() async throws {
        let (topics, feed) = self.makeTopics()
        let client = topics.subscribe(to: "a", buffering: .bufferingNewest(1))
        for n in 1...3 { feed.yield(Item(key: "a", n: n)) }
        feed.yield(Item(key: "b", n: 99))  // nobody: no effect on "a"
        feed.finish()
        try await waitUntil("every element routed") { topics.keyCount == 0 }
        var events: [SharedEvent<Item>] = []
        for await event in client.events { events.append(event) }
        #expect(events == [.missed(2), .element(Item(key: "a", n: 3))])
    }

    @Test("an evicting subscriber is evicted alone; its key's other subscribers keep their elements")
    func evictionIsPerSubscriber() async throws {
        let (topics, feed) = self.makeTopics(buffering: .evicting(2))
        let slow = topics.subscribe(to: "a")
        let patient = topics.subscribe(to: "a", buffering: .unbounded)
        let elsewhere = topics.subscribe(to: "b")
        for n in 1...3 { feed.yield(Item(key: "a", n: n)) }
        #expect(await slow.waitForEviction()?.reason == .hardLimit)
        #expect(topics.subscriberCount(of: "a") == 1)
        #expect(topics.subscriberCount(of: "b") == 1)
        feed.finish()
        var events: [SharedEvent<Item>] = []
        for await event in slow.events { events.append(event) }
        #expect(events == [.evicted(.hardLimit(2))])
        #expect(await self.numbers(patient) == [1, 2, 3])
        #expect(await self.numbers(elsewhere) == [])
    }

    @Test("a lossless subscriber that does not read holds the one upstream, and so every key")
    func losslessSubscriberHoldsEveryKey() async throws {
        let (feed, stalled, other) = self.stalledBehindTenElements(buffering: .bounded(2))
        feed.finish()
        try await waitUntil("the stalled subscriber full") { stalled.backlog?.count == 2 }
        // The pump routes in upstream order and waits for room in "a": "b"'s element, behind
        // a's third, cannot have been routed.
        #expect(other.backlog?.count == 0)
        #expect(await self.numbers(stalled) == Array(1...10))
        #expect(await self.numbers(other) == [100])
    }

    @Test("an evicting subscriber that does not read holds no other key")
    func evictingSubscriberHoldsNoOtherKey() async throws {
        let (feed, stalled, other) = self.stalledBehindTenElements(buffering: .evicting(2))
        #expect(await stalled.waitForEviction()?.reason == .hardLimit)
        try await waitUntil("b's element routed") { other.backlog?.count == 1 }
        feed.finish()
        #expect(await self.numbers(other) == [100])
    }

    @Test("the upstream's failure reaches every key's subscribers, and later subscribers at once")
    func upstreamFailureReachesEveryKey() async throws {
        let source = PushSource()
        let topics = source.share(by: { $0 % 2 })
        let evens = topics.subscribe(to: 0)
        let odds = topics.subscribe(to: 1)
        source.yield(2)
        source.yield(3)
        source.fail(.boom)
        for (subscription, expected) in [(evens, [2]), (odds, [3])] {
            var received: [Int] = []
            await #expect(throws: TestError.boom) {
                for try await n in subscription { received.append(n) }
            }
            #expect(received == expected)
        }
        #expect(topics.keyCount == 0, "the end frees every key")
        let late = topics.subscribe(to: 7)
        await #expect(throws: TestError.boom) {
            for try await _ in late {}
        }
        #expect(topics.keyCount == 0)
    }

    @Test("the upstream's end reaches every key's subscribers, and later subscribers at once")
    func upstreamFinishReachesEveryKey() async throws {
        let (topics, feed) = self.makeTopics()
        let a = topics.subscribe(to: "a")
        let b = topics.subscribe(to: "b")
        feed.yield(Item(key: "a", n: 1))
        feed.finish()
        #expect(await self.numbers(a) == [1])
        #expect(await self.numbers(b) == [])
        #expect(await self.numbers(topics.subscribe(to: "c")) == [])
    }
}
