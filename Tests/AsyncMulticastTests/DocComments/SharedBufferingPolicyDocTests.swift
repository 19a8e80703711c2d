// Checks the doc-comment examples of Sources/AsyncMulticast/SharedBufferingPolicy.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedBufferingPolicy", .timeLimit(.minutes(1)))
struct SharedBufferingPolicyDocTests {
    // SharedBufferingPolicy
    @Test func theType() async {
        let (clockTicks, ticker) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let (events, logged) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let (prices, exchange) = AsyncStream.makeStream(of: Int.self)  // (test only)

        let ticks = clockTicks.share(buffering: .bufferingNewest(1))  // a slow screen sees the latest
        let log = events.share(buffering: .unbounded)  // a logger that must see all
        let feed = prices.share()  // .bounded(64): lossless, paced

        var screen = ticks.makeAsyncIterator()
        var logger = log.makeAsyncIterator()
        var chart = feed.makeAsyncIterator()
        for n in 1...200 {
            ticker.yield(n)
            logged.yield(n)
            exchange.yield(n)
        }
        for continuation in [ticker, logged, exchange] { continuation.finish() }
        var seenByScreen: [Int] = []
        while let n = await screen.next() { seenByScreen.append(n) }
        var seenByLogger: [Int] = []
        while let n = await logger.next() { seenByLogger.append(n) }
        var seenByChart: [Int] = []
        while let n = await chart.next() { seenByChart.append(n) }

        #expect(seenByScreen.last == 200 && seenByScreen == seenByScreen.sorted(), "the latest, maybe not all")
        #expect(seenByLogger == Array(1...200))
        #expect(seenByChart == Array(1...200))
    }

    // evicting(_:)
    @Test @MainActor func evicting() async throws {
        let feed = AsyncPassthroughSubject<Int, any Error>()  // (test only)
        let client = StubClient()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an event while
        // the test sends, so it falls behind.
        let connection = Task {  // (test only)
            // Each client may fall 256 events behind; past that it is dropped, not waited for.
            for try await event in feed.buffering(.evicting(256)) { try await client.write(event) }
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...300 { feed.send(n) }  // does not wait for the client
        await #expect(throws: SubscriberEvictedError.self) { try await connection.value }

        #expect(client.written.lines == ["1"], "handed to it while it waited; then it fell behind")
        #expect(feed.subscriberCount == 0)
    }
}
