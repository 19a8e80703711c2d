// Checks the doc-comment examples of Sources/AsyncMulticast/SharedEvent.swift: each test
// contains one verbatim, with its own lines marked `// (test only)`, and checks the output the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedEvent", .timeLimit(.minutes(3)))
struct SharedEventDocTests {
    // SharedEvent
    @Test @MainActor func theType() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        @Sendable func show(_ price: Int) { printed.record(["show", price]) }  // (test only)
        let prices = AsyncPassthroughSubject<Int, Never>()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an element
        // while the test sends, so what it misses is known.
        let screen = Task {  // (test only)
            for await event in prices.events(buffering: .bufferingNewest(8)) {
                switch event {
                case .element(let price): show(price)
                case .missed(let count): print("skipped \(count) stale prices")
                case .evicted(let eviction): print("evicted", eviction)  // only with .evicting; the last event
                }
            }
        }  // (test only)

        try await prices.waitForSubscribers(atLeast: 1)
        for price in 1...20 { prices.send(price) }
        prices.finish()
        await screen.value

        // 1 is handed to the waiting screen; of 2...20 it keeps the newest 8, 13...20, and
        // learns of the 11 before them exactly where they were.
        #expect(printed.lines == ["show 1", "skipped 11 stale prices"] + (13...20).map { "show \($0)" })
    }

    // SubscriberEvictedError
    @Test @MainActor func subscriberEvictedError() async throws {
        let feed = AsyncPassthroughSubject<String, any Error>()  // (test only)
        let client = StubClient()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take a line while
        // the test sends, so it falls behind.
        let connection = Task {  // (test only)
            do {
                for try await line in feed.buffering(.evicting(100)) { try await client.send(line) }
            } catch let error as SubscriberEvictedError {
                await client.close(reason: "too slow, evicted \(error.eviction)")
            }
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...200 { feed.send("line \(n)") }
        try await connection.value

        #expect(client.written.lines == ["line 1"], "handed to it while it waited; the others were dropped with it")
        #expect(
            client.closed.lines == ["too slow, evicted at its hard limit, holding 100 elements (high-water mark 100)"])
        #expect(feed.subscriberCount == 0)
    }

    // AsyncSharedEvents
    @Test func asyncSharedEvents() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let ticks = AsyncPassthroughSubject<Int, Never>()
        var slow = ticks.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
        ticks.send(1)
        ticks.send(2)
        ticks.send(3)
        print(await slow.next()!)  // missed(2)
        print(await slow.next()!)  // element(3)

        #expect(printed.lines == ["missed(2)", "element(3)"])
    }

    // SharedEventIterator
    @Test func sharedEventIterator() async {
        let subject = AsyncPassthroughSubject<Int, Never>()  // (test only)
        let handled = LockedLog<SharedEvent<Int>>()  // (test only)
        @Sendable func handle(_ event: SharedEvent<Int>) { handled.append(event) }  // (test only)

        var events = subject.events(buffering: .evicting(64)).makeAsyncIterator()
        subject.send(1)  // (test only)
        subject.send(2)  // (test only)
        subject.finish()  // (test only)
        while let event = await events.next() { handle(event) }

        #expect(handled.values == [.element(1), .element(2)])
    }

    // SharedEventIterator, with a subscriber that falls 64 elements behind
    @Test func sharedEventIteratorEvicted() async {
        let subject = AsyncPassthroughSubject<Int, Never>()  // (test only)
        let handled = LockedLog<SharedEvent<Int>>()  // (test only)
        @Sendable func handle(_ event: SharedEvent<Int>) { handled.append(event) }  // (test only)

        var events = subject.events(buffering: .evicting(64)).makeAsyncIterator()
        for n in 1...100 { subject.send(n) }  // (test only)
        while let event = await events.next() { handle(event) }

        #expect(handled.values == [.evicted(.hardLimit(64))], "its buffer was released when it was evicted")
        #expect(subject.subscriberCount == 0)
    }
}
