// AsyncSubjectTopics: where an element goes (to its key's subscribers only), how each
// subscriber buffers (its own policy, per key), and how the topics end.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSubjectTopics routing", .timeLimit(.minutes(2)))
struct SubjectTopicsRoutingTests {
    struct Broken: Error, Equatable {}

    @Test("an element reaches only its key's subscribers: a reader of another key is never woken")
    func elementRoutedOnlyToItsKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let mine = topics.subscribe(to: "a")
        let theirs = topics.subscribe(to: "b")
        let wakeUps = Tally()
        let reader = await startCountingWakeUps(of: theirs, in: wakeUps) { $0 }
        for n in 1...1_000 { topics.send(n, to: "a") }
        #expect(theirs.backlog?.highWaterMark == 0, "nothing was ever buffered for b")
        #expect(wakeUps.count == 0)
        topics.send(-1, to: "b")
        await wakeUps.wait(for: 1, "b's own element")
        topics.finish()
        #expect(await reader.value == [-1])
        #expect(wakeUps.count == 1, "one wake-up: its own element")
        #expect(await mine.reduce(into: []) { $0.append($1) } == Array(1...1_000))
    }

    @Test("each subscriber buffers by its own policy, per key")
    func perKeyBufferingPolicies() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>(buffering: .bufferingNewest(2))
        let lossy = topics.subscribe(to: "a")  // the topics' policy
        let lossless = topics.subscribe(to: "a", buffering: .unbounded)
        let oldest = topics.subscribe(to: "b", buffering: .bufferingOldest(3))
        for n in 1...5 {
            topics.send(n, to: "a")
            topics.send(n * 10, to: "b")
        }
        topics.finish()
        #expect(await lossy.reduce(into: []) { $0.append($1) } == [4, 5])
        #expect(await lossless.reduce(into: []) { $0.append($1) } == [1, 2, 3, 4, 5])
        #expect(await oldest.reduce(into: []) { $0.append($1) } == [10, 20, 30])
    }

    @Test("a lag-reporting subscriber of a key hears what it missed")
    func lagReportsPerKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let client = topics.subscribe(to: "a", buffering: .bufferingNewest(1))
        for n in 1...3 { topics.send(n, to: "a") }
        topics.send(99, to: "b")  // nobody: no effect on "a"
        topics.finish()
        var events: [SharedEvent<Int>] = []
        for await event in client.events { events.append(event) }
        #expect(events == [.missed(2), .element(3)])
    }

    @Test("an evicting subscriber is evicted alone; its key's other subscribers keep their elements")
    func evictionIsPerSubscriber() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>(buffering: .evicting(2))
        let slow = topics.subscribe(to: "a")
        let patient = topics.subscribe(to: "a", buffering: .unbounded)
        for n in 1...3 { topics.send(n, to: "a") }
        #expect(await slow.waitForEviction()?.reason == .hardLimit)
        #expect(topics.subscriberCount(of: "a") == 1)
        topics.finish()
        var events: [SharedEvent<Int>] = []
        for await event in slow.events { events.append(event) }
        #expect(events == [.evicted(.hardLimit(2))])
        #expect(await patient.reduce(into: []) { $0.append($1) } == [1, 2, 3])
    }

    @Test("finish ends every key: buffered elements first, then the end; every key is freed")
    func finishEndsEveryKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>(replay: 1, keepAlive: .seconds(60))
        let a = topics.subscribe(to: "a")
        let b = topics.subscribe(to: "b")
        topics.send(1, to: "a")
        topics.send(2, to: "b")
        topics.send(3, to: "idle")  // kept by its replay
        #expect(topics.keyCount == 3)
        topics.finish()
        #expect(topics.keyCount == 0, "finish forgets every key at once")
        #expect(await a.reduce(into: []) { $0.append($1) } == [1])
        #expect(await b.reduce(into: []) { $0.append($1) } == [2])
    }

    @Test("after finish: a new subscriber ends at once, sends and completions are ignored")
    func afterFinish() async throws {
        let topics = AsyncSubjectTopics<String, Int, Broken>(replay: 2, keepAlive: .seconds(60))
        topics.finish()
        topics.send(1, to: "a")
        topics.fail(Broken())
        #expect(topics.keyCount == 0, "a send after finish creates no key")
        let late = topics.subscribe(to: "a")
        #expect(topics.keyCount == 0)
        var received: [Int] = []
        for try await n in late { received.append(n) }  // ends without the ignored error
        #expect(received == [])
    }

    @Test("fail ends every key with the error, for present and later subscribers")
    func failEndsEveryKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Broken>()
        let present = topics.subscribe(to: "a")
        topics.send(1, to: "a")
        topics.fail(Broken())
        topics.finish()  // ignored
        var received: [Int] = []
        await #expect(throws: Broken.self) {
            for try await n in present { received.append(n) }
        }
        #expect(received == [1])
        let late = topics.subscribe(to: "b")
        await #expect(throws: Broken.self) {
            for try await _ in late {}
        }
    }

    @Test("waiting for a key to be freed ends when the topics complete")
    func finishReleasesFreeWaiters() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let held = topics.subscribe(to: "a")
        let waiting = Task { try await topics.waitUntilFreed("a") }
        try await waitUntil("the waiter registered") {
            topics.shard(for: "a").withLock { $0.entries["a"]?.freeWaiters.count == 1 }
        }
        topics.finish()
        try await withTimeout("waiter resumed") { try await waiting.value }
        _ = held
    }
}

/// Starts the reader of another key, waiting in `next()`: every element it is resumed with
/// is a wake-up, counted in `wakeUps`. Returns once it is reading; its task returns what it
/// received (`value` of each element).
func startCountingWakeUps<Element: Sendable>(
    of subscription: SharedSubscription<Element, Never>, in wakeUps: Tally,
    _ value: @escaping @Sendable (Element) -> Int
) async -> Task<[Int], Never> {
    let waiting = Signal<Void>()
    let reader = Task { () -> [Int] in
        var received: [Int] = []
        var iterator = subscription.makeAsyncIterator()
        waiting.send(())
        while let element = await iterator.next() {
            wakeUps.add()
            received.append(value(element))
        }
        return received
    }
    _ = await waiting.next("the reader of b started")
    return reader
}
