// Checks the doc-comment examples of Sources/AsyncMulticast/AsyncSharedView.swift: each test
// contains one verbatim, with its own lines marked `// (test only)`, and checks the output the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSharedView", .timeLimit(.minutes(1)))
struct AsyncSharedViewDocTests {
    // AsyncSharedView
    @Test func theType() async throws {
        typealias Event = String  // (test only)
        let ui = StubSink()  // (test only)
        let logger = StubSink()  // (test only)

        let events = AsyncPassthroughSubject<Event, Never>()  // .unbounded by default
        Task { for await e in events { ui.apply(e) } }  // the UI may not drop
        Task { for await e in events.buffering(.bufferingNewest(100)) { logger.log(e) } }

        try await events.waitForSubscribers(atLeast: 2)
        for e in ["tap", "scroll", "tap"] { events.send(e) }
        events.finish()
        #expect(await ui.received.lines(waitingFor: 3) == ["tap", "scroll", "tap"])
        #expect(await logger.received.lines(waitingFor: 3) == ["tap", "scroll", "tap"])
    }

    // subscriberCount
    @Test func subscriberCount() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let events = AsyncPassthroughSubject<String, Never>()  // (test only)

        let logs = events.buffering(.bufferingNewest(100))
        var logger = logs.makeAsyncIterator()
        print(logs.subscriberCount == events.subscriberCount)  // true

        #expect(printed.lines == ["true"])
        #expect(logs.subscriberCount == 1)
        events.send("tap")
        #expect(await logger.next() == "tap")
    }

    // events()
    @Test @MainActor func events() async throws {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an element
        // while the test sends, so what it misses is known.
        let client = Task {  // (test only)
            for await event in feed.buffering(.bufferingOldest(8)).events() { print(event) }
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...20 { feed.send(n) }
        feed.finish()
        await client.value

        // 1 is handed to the waiting client; of 2...20 it keeps the oldest 8, 2...9, and
        // learns of the 11 after them where they were: before the end.
        #expect(printed.lines == (1...9).map { "element(\($0))" } + ["missed(11)"])
    }
}
