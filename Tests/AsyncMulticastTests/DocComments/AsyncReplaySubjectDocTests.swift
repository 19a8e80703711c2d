// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncReplaySubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncReplaySubject", .timeLimit(.minutes(1)))
struct AsyncReplaySubjectDocTests {
    // AsyncReplaySubject, then replayCache, which continues it
    @Test func theTypeAndReplayCache() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)

        let messages = AsyncReplaySubject<String, Never>(bufferSize: 2)
        messages.send("a")
        messages.send("b")
        messages.send("c")
        messages.finish()
        for await m in messages { print(m) }  // b, c: the cache, then the end

        #expect(printed.lines == ["b", "c"])

        let recent = messages.replayCache  // ["b", "c"]

        #expect(recent == ["b", "c"])
    }

    // resetReplayCache()
    @Test func resetReplayCache() async {
        let messages = AsyncReplaySubject<String, Never>(bufferSize: 2)  // (test only)
        var present = messages.makeAsyncIterator()  // (test only)
        messages.send("old")  // (test only)

        messages.resetReplayCache()  // a new room: nobody sees the old messages

        #expect(messages.replayCache.isEmpty)
        var newcomer = messages.makeAsyncIterator()
        messages.send("new")
        #expect(await newcomer.next() == "new")
        #expect(await present.next() == "old", "a present subscriber keeps what it has not read")
        #expect(await present.next() == "new")
    }

    // send(waitingForRoom:)
    @Test func sendWaitingForRoom() async {
        let file = (1...40).map { "line \($0)" }  // (test only)

        let lines = AsyncReplaySubject<String, Never>(bufferSize: 1, buffering: .bounded(16))
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
        #expect(lines.replayCache == ["line 40"])
    }

    // send(contentsOf:)
    @Test func sendContentsOf() async throws {
        let chat = AsyncReplaySubject<String, Never>(bufferSize: 10)  // (test only)
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
        #expect(Set(chat.replayCache) == ["db: 1", "ws: 1"])
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
        let feed = AsyncReplaySubject<Int, Never>(bufferSize: 1)  // (test only)
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
        let feed = AsyncReplaySubject<Int, Never>(bufferSize: 1)  // (test only)
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
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1)  // (test only)

        let tasks = (0..<3).map { _ in Task { for await x in subject { use(x) } } }
        try await subject.waitForSubscribers(atLeast: 3)
        subject.send(1)  // all three receive it

        subject.finish()
        for task in tasks { await task.value }
        #expect(used.lines == ["1", "1", "1"])
    }
}
