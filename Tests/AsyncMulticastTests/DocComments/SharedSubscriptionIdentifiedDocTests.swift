// Checks the doc-comment examples of Sources/AsyncMulticast/SharedSubscription+Identified.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks what
// the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

/// A row of a table, with the id the database gave it.
private struct Row: Sendable, Equatable {
    let id: Int
}

/// A subject that replays its latest 3, after rows 10, 20, …, 60 were sent: the `rows` of
/// the examples.
private func sentRows() -> AsyncReplaySubject<Row, Never> {
    let rows = AsyncReplaySubject<Row, Never>(replay: 3)
    for id in stride(from: 10, through: 60, by: 10) { rows.send(Row(id: id)) }
    return rows
}

@Suite("Doc comments: IdentifiedSubscription", .timeLimit(.minutes(3)))
struct SharedSubscriptionIdentifiedDocTests {
    // IdentifiedSubscription
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let rows = sentRows()  // (test only)

        // rows replays its latest 3: rows 10, 20, …, 60 were sent, 40, 50 and 60 are kept
        var resumed = rows.subscribe(after: 40, id: \.id).makeAsyncIterator()
        if case .element(let row, _) = await resumed.next() { print(row.id) }  // 50

        #expect(printed.lines == ["50"])
    }

    // backlog
    @Test func backlog() {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let rows = sentRows()  // (test only)

        let client = rows.subscribe(after: 40, id: \.id)
        print(client.backlog!.count)  // 3

        #expect(printed.lines == ["3"])
    }

    // waitForEviction()
    @Test func waitForEviction() async throws {
        let feed = AsyncPassthroughSubject<Row, Never>(buffering: .evicting(2))  // (test only)
        let client = feed.subscribe(after: nil, id: \.id)  // (test only)
        let connection = StalledConnection()  // (test only)

        Task { if await client.waitForEviction() != nil { try await connection.close() } }

        for id in 0...2 { feed.send(Row(id: id)) }  // (test only) the third evicts it
        try await waitUntil("the connection closed") { connection.isClosed }  // (test only)
        #expect(connection.isClosed)
    }

    // IdentifiedEventIterator
    @Test func iterator() async throws {
        let feed = sentRows()  // (test only)
        feed.finish()  // (test only)
        let lastEventID = 50  // (test only)
        let sent = StubClient()  // (test only)
        @Sendable func send(_ event: PositionedEvent<Row, Int>) async throws {  // (test only)
            sent.written.record([event])  // (test only)
        }  // (test only)

        var events = feed.subscribe(after: lastEventID, id: \.id).makeAsyncIterator()
        while let event = await events.next() { try await send(event) }

        #expect(sent.written.lines.count == 1, "only the row after 50")
        #expect(sent.written.lines.first?.hasSuffix("Row(id: 60), position: 60)") == true)
    }

    // subscribe(after:id:buffering:)
    @Test func subscribeAfterID() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let rows = sentRows()  // (test only)

        // rows replays its latest 3: rows 10, 20, …, 60 were sent, 40, 50 and 60 are kept
        var late = rows.subscribe(after: 20, id: \.id).makeAsyncIterator()
        print(await late.next()!)  // gap(after: 20, before: 40)
        if case .element(let row, _) = await late.next() { print(row.id) }  // 40

        #expect(printed.lines == ["gap(after: 20, before: 40)", "40"])
    }
}
