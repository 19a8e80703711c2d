// Checks the doc-comment examples of Sources/AsyncMulticast/SharedSubscription+Resuming.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks what
// the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

/// A subject that replays its latest 4, after 0...9 were sent: the `ticks` of the examples.
private func sentTicks() -> AsyncReplaySubject<Int, Never> {
    let ticks = AsyncReplaySubject<Int, Never>(replay: 4)
    for n in 0...9 { ticks.send(n) }
    return ticks
}

@Suite("Doc comments: PositionedSubscription", .timeLimit(.minutes(3)))
struct SharedSubscriptionResumingDocTests {
    // PositionedEvent
    @Test func positionedEvent() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncReplaySubject<String, Never>(replay: 2)  // (test only)
        for line in ["a", "b", "c", "d"] { feed.send(line) }  // (test only) c, d kept
        let lastSeen = 0  // (test only)
        feed.finish()  // (test only)

        for await event in feed.subscribe(after: lastSeen) {
            switch event {
            case .element(let line, let position): print("\(position): \(line)")
            case .gap(let after, let before): print("lost \(after + 1)..<\(before)")
            case .evicted: print("too slow")
            }
        }

        #expect(printed.lines == ["lost 1..<2", "2: c", "3: d"])
    }

    // PositionedSubscription
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let ticks = sentTicks()  // (test only)

        // ticks replays its latest 4: 0...9 were sent, 6...9 are kept
        var resumed = ticks.subscribe(after: 7).makeAsyncIterator()
        print(await resumed.next()!)  // element(8, position: 8)
        print(await resumed.next()!)  // element(9, position: 9)

        #expect(printed.lines == ["element(8, position: 8)", "element(9, position: 9)"])
    }

    // backlog
    @Test func backlog() {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let ticks = sentTicks()  // (test only)

        let client = ticks.subscribe(after: 5)
        print(client.backlog!.count)  // 4

        #expect(printed.lines == ["4"])
    }

    // waitForEviction()
    @Test func waitForEviction() async throws {
        let feed = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))  // (test only)
        let client = feed.subscribe(after: nil)  // (test only)
        let connection = StalledConnection()  // (test only)

        let closer =  // (test only)
            Task { if await client.waitForEviction() != nil { try await connection.close() } }

        for n in 0...2 { feed.send(n) }  // (test only) the third evicts it
        try await closer.value  // (test only)
        #expect(connection.isClosed)
    }

    // PositionedEventIterator
    @Test func iterator() async throws {
        let feed = AsyncReplaySubject<Int, Never>(replay: 8)  // (test only)
        for n in 0...3 { feed.send(n * 10) }  // (test only)
        feed.finish()  // (test only)
        let lastSeen = 1  // (test only)
        let sent = StubClient()  // (test only)
        @Sendable func send(_ event: PositionedEvent<Int, Int>) async throws {  // (test only)
            sent.written.record([event])  // (test only)
        }  // (test only)

        var events = feed.subscribe(after: lastSeen).makeAsyncIterator()
        while let event = await events.next() { try await send(event) }

        #expect(sent.written.lines == ["element(20, position: 2)", "element(30, position: 3)"])
    }

    // subscribe(after:buffering:)
    @Test func subscribeAfter() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let ticks = sentTicks()  // (test only)

        // ticks replays its latest 4: 0...9 were sent, 6...9 are kept
        var late = ticks.subscribe(after: 2).makeAsyncIterator()
        print(await late.next()!)  // gap(after: 2, before: 6)
        print(await late.next()!)  // element(6, position: 6)

        #expect(printed.lines == ["gap(after: 2, before: 6)", "element(6, position: 6)"])
    }
}
