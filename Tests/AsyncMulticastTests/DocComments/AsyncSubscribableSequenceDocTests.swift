// Checks the doc-comment examples of Sources/AsyncMulticast/AsyncSubscribableSequence.swift, the
// members every shared sequence and subject shares, declared once: each test contains one
// verbatim, with its own lines marked `// (test only)`, and checks what the example states
// (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSubscribableSequence", .timeLimit(.minutes(3)))
struct AsyncSubscribableSequenceDocTests {
    // AsyncSubscribableSequence
    @Test func theProtocol() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        struct Dashboard {
            let prices: any AsyncSubscribableSequence<Double, Never>
        }
        let dashboard = Dashboard(prices: AsyncCurrentValueSubject<Double, Never>(100))
        print(dashboard.prices.subscriberCount)  // 0

        #expect(printed.lines == ["0"])
        var reader = dashboard.prices.makeAsyncIterator()  // (test only)
        #expect(dashboard.prices.subscriberCount == 1, "any AsyncSubscribableSequence joins like the subject")
        #expect(await reader.next() == 100)
    }

    // replayCache
    @Test func replayCache() async {
        let (updates, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let (rendered, render) = PrintedLines.recorder()  // (test only)

        let state = updates.replay(1)
        var screen = state.makeAsyncIterator()  // (test only)
        continuation.yield(7)  // (test only)
        #expect(await screen.next() == 7)  // (test only)
        if let latest = state.replayCache.last { render(latest) }

        #expect(rendered.lines == ["7"])
        withExtendedLifetime(screen) {}  // the subscriber keeps the upstream, and its replay, alive
        continuation.finish()
    }

    // resetReplayCache()
    @Test func resetReplayCache() async {
        let (logins, continuation) = AsyncStream.makeStream(of: String.self)  // (test only)
        let session = logins.replay(1)  // (test only)
        var screen = session.makeAsyncIterator()  // (test only)
        continuation.yield("alice")  // (test only)
        #expect(await screen.next() == "alice")  // (test only)

        session.resetReplayCache()  // the next screen must not see the old user's data

        #expect(session.replayCache.isEmpty)
        var nextScreen = session.makeAsyncIterator()
        continuation.yield("bob")
        #expect(await nextScreen.next() == "bob", "not alice")
        #expect(await screen.next() == "bob")
        continuation.finish()
    }

    // buffering(_:)
    @Test func buffering() async throws {
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let ui = StubSink()  // (test only)
        let logged = PrintedLines()  // (test only)
        @Sendable func log(_ e: Int) { logged.record([e]) }  // (test only)

        let events = source.share(buffering: .bounded(64))
        Task { for await e in events { ui.render(e) } }  // lossless
        Task { for await e in events.buffering(.bufferingNewest(10)) { log(e) } }  // may drop

        try await events.waitForSubscribers(atLeast: 2)
        for n in 1...200 { continuation.yield(n) }
        continuation.finish()
        #expect(await ui.received.lines(waitingFor: 200) == (1...200).map(String.init))
        await logged.wait(for: "200")
        let kept = logged.lines.compactMap { Int($0) }
        #expect(kept == kept.sorted() && Set(kept).count == kept.count, "in order, maybe with gaps")
    }

    // events(buffering:)
    @Test func events() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let feed = source.share()  // (test only)
        let client = Task {  // (test only)
            for await event in feed.events(buffering: .bufferingNewest(16)) {
                if case .missed(let count) = event { print("this client missed \(count)") }
            }
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...1_000 { continuation.yield(n) }
        continuation.finish()
        await client.value
        // How much it misses depends on how fast it reads (the upstream is a task of its
        // own); it keeps at least the newest 16.
        #expect(missedTotal(printed.lines) <= 1_000 - 16)
    }

    // subscriberCounts
    @Test func subscriberCounts() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let feed = source.share()  // (test only)
        let observer = Task {  // (test only)
            for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
        }  // (test only)

        await printed.wait(for: "nobody listens")
        observer.cancel()
        await observer.value
        #expect(printed.lines == ["nobody listens"])
        continuation.finish()
    }

    // waitForSubscribers(atLeast:)
    @Test func waitForSubscribers() async throws {
        let used = PrintedLines()  // (test only)
        @Sendable func use(_ x: Int) { used.record([x]) }  // (test only)
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let shared = stream.share()  // (test only)

        let tasks = (0..<3).map { _ in Task { for await x in shared { use(x) } } }
        try await shared.waitForSubscribers(atLeast: 3)
        continuation.yield(1)  // all three receive it

        continuation.finish()
        for task in tasks { await task.value }
        #expect(used.lines == ["1", "1", "1"])
    }

    // subscriberCount
    @Test func subscriberCount() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let events = AsyncPassthroughSubject<String, Never>()  // (test only)

        let logs = events.buffering(.bufferingNewest(100))
        var logger = logs.makeAsyncIterator()
        print(logs.subscriberCount == events.subscriberCount)  // true

        #expect(printed.lines == ["true"])
        #expect(logs.subscriberCount == 1)
        events.send("tap")
        #expect(await logger.next() == "tap")
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

}
