// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncCurrentValueSubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncCurrentValueSubject", .timeLimit(.minutes(1)))
struct AsyncCurrentValueSubjectDocTests {
    // AsyncCurrentValueSubject
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)

        let count = AsyncCurrentValueSubject<Int, Never>(0)
        var screen = count.makeAsyncIterator()  // subscribed: it holds the current value, 0
        count.update { $0 + 1 }  // atomic read-modify-send
        count.finish()
        while let n = await screen.next() { print("count:", n) }  // count: 1 (it replaced the unread 0)

        #expect(printed.lines == ["count: 1"])
    }

    // update(_:)
    @Test func update() async {
        let followers = AsyncCurrentValueSubject<Int, Never>(3)  // (test only)
        var reader = followers.buffering(.unbounded).makeAsyncIterator()  // (test only)

        followers.update { $0 + 1 }

        #expect(followers.value == 4)
        followers.finish()
        var seen: [Int] = []
        while let n = await reader.next() { seen.append(n) }
        #expect(seen == [3, 4], "the new value is sent, not only stored")
    }

    // send(contentsOf:)
    @Test func sendContentsOf() async throws {
        let chat = AsyncCurrentValueSubject<String, Never>("welcome")  // (test only)
        let (databaseNotifications, database) = AsyncThrowingStream.makeStream(of: String.self)  // (test only)
        let (webSocketMessages, webSocket) = AsyncThrowingStream.makeStream(of: String.self)  // (test only)
        var reader = chat.buffering(.unbounded).makeAsyncIterator()  // (test only)

        Task { try await chat.send(contentsOf: databaseNotifications) }
        Task { try await chat.send(contentsOf: webSocketMessages) }

        database.yield("db: 1")
        webSocket.yield("ws: 1")
        database.finish()
        webSocket.finish()
        #expect(await reader.next() == "welcome")
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
        let feed = AsyncCurrentValueSubject<Int, Never>(0)  // (test only)
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

        // It took 0 (the current value) and waits; 1 is handed to it, 25...40 are kept.
        #expect(printed.lines == ["this client missed 23"])
    }

    // subscriberCounts
    @Test func subscriberCounts() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncCurrentValueSubject<Int, Never>(0)  // (test only)
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
        let subject = AsyncCurrentValueSubject<Int, Never>(0)  // (test only)

        let tasks = (0..<3).map { _ in Task { for await x in subject { use(x) } } }
        try await subject.waitForSubscribers(atLeast: 3)
        subject.send(1)  // all three receive it

        subject.finish()
        for task in tasks { await task.value }
        #expect(used.lines.filter { $0 == "1" }.count == 3)
    }
}
