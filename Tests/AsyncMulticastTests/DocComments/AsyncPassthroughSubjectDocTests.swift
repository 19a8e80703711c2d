// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncPassthroughSubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncPassthroughSubject", .timeLimit(.minutes(1)))
struct AsyncPassthroughSubjectDocTests {
    // AsyncPassthroughSubject
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)

        let events = AsyncPassthroughSubject<String, Never>()
        var listener = events.makeAsyncIterator()  // subscribed from here on
        events.send("hello")
        events.send("world")
        events.finish()
        while let e = await listener.next() { print("got", e) }  // got hello, got world

        #expect(printed.lines == ["got hello", "got world"])
    }

    // send(waitingForRoom:)
    @Test func sendWaitingForRoom() async {
        let file = (1...40).map { "line \($0)" }  // (test only)

        let lines = AsyncPassthroughSubject<String, Never>(buffering: .bounded(16))
        let reader = lines.makeAsyncIterator()  // (test only)
        let reading = Task {  // (test only)
            var reader = reader  // (test only)
            var read: [String] = []  // (test only)
            while let line = await reader.next() { read.append(line) }  // (test only)
            return read  // (test only)
        }  // (test only)
        for line in file { await lines.send(waitingForRoom: line) }  // paced by the slowest reader

        lines.finish()
        #expect(await reading.value == file)
    }

    // send(contentsOf:)
    @Test func sendContentsOf() async throws {
        let chat = AsyncPassthroughSubject<String, Never>()  // (test only)
        let (databaseNotifications, database) = AsyncThrowingStream.makeStream(of: String.self)  // (test only)
        let (webSocketMessages, webSocket) = AsyncThrowingStream.makeStream(of: String.self)  // (test only)
        var reader = chat.makeAsyncIterator()  // (test only)

        Task { try await chat.send(contentsOf: databaseNotifications) }
        Task { try await chat.send(contentsOf: webSocketMessages) }

        database.yield("db: 1")
        webSocket.yield("ws: 1")
        database.finish()
        webSocket.finish()
        let fed = [await reader.next(), await reader.next()]
        #expect(Set(fed) == ["db: 1", "ws: 1"], "both sources feed the one subject")
        // Neither source's end completed the subject.
        chat.send("still open")
        #expect(await reader.next() == "still open")
        chat.finish()
        #expect(await reader.next() == nil)
    }

    // events(buffering:)
    @Test @MainActor func events() async throws {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an element
        // while the test sends, so what it misses is known.
        let client = Task {  // (test only)
            for await event in feed.events(buffering: .bufferingNewest(16)) {
                if case .missed(let count) = event { print("this client missed \(count)") }
            }
        }  // (test only)
        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...40 { feed.send(n) }
        feed.finish()
        await client.value

        // 1 is handed to the waiting client; of 2...40 it keeps the newest 16, 25...40.
        #expect(printed.lines == ["this client missed 23"])
    }

    // subscriberCounts
    @Test func subscriberCounts() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>()  // (test only)
        let observer = Task {  // (test only)
            for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
        }  // (test only)

        await printed.wait(for: "nobody listens")
        observer.cancel()
        await observer.value
        #expect(printed.lines == ["nobody listens"])
    }

    // waitForSubscribers(atLeast:)
    @Test func waitForSubscribers() async throws {
        let used = PrintedLines()  // (test only)
        @Sendable func use(_ x: Int) { used.record([x]) }  // (test only)
        let subject = AsyncPassthroughSubject<Int, Never>()  // (test only)

        let tasks = (0..<3).map { _ in Task { for await x in subject { use(x) } } }
        try await subject.waitForSubscribers(atLeast: 3)
        subject.send(1)  // all three receive it

        subject.finish()
        for task in tasks { await task.value }
        #expect(used.lines == ["1", "1", "1"])
    }
}
