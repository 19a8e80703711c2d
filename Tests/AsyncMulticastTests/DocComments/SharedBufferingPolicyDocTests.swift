// Checks the doc-comment examples of Sources/AsyncMulticast/SharedBufferingPolicy.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedBufferingPolicy", .timeLimit(.minutes(3)))
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

    // evicting(_:softLimit:)
    @Test @MainActor func evicting() async throws {
        let clock = ManualClock()  // (test only)
        let feed = AsyncPassthroughSubject<Int, any Error>(clock: clock)  // (test only)
        let client = StubClient()  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an event while
        // the test sends, so it falls behind.
        let connection = Task {  // (test only)
            // A hard limit alone: each client may fall 256 events behind; past that it is dropped.
            for try await event in feed.buffering(.evicting(256)) { try await client.write(event) }  // no bursts here
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        for n in 1...300 { feed.send(n) }  // does not wait for the client
        await #expect(throws: SubscriberEvictedError.self) { try await connection.value }

        #expect(client.written.lines == ["1"], "handed to it while it waited; then it fell behind")
        #expect(feed.subscriberCount == 0)

        // A burst of up to 4096 passes; a client more than 256 behind for 10 s goes.
        let subscription = feed.subscribe(buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))))

        for n in 1...1000 { feed.send(n) }  // (test only) a burst: 1000 behind, under 4096
        clock.advance(by: .seconds(9))  // (test only)
        feed.send(1001)  // (test only)
        #expect(subscription.backlog == SubscriberBacklog(count: 1001, highWaterMark: 1001))
        var reader = subscription.makeAsyncIterator()  // (test only) it catches up
        for n in 1...1001 { #expect(try await reader.next() == n) }  // (test only)
        clock.advance(by: .seconds(60))  // (test only) quiet for a minute, then a burst again
        for n in 1...300 { feed.send(n) }  // (test only)
        clock.advance(by: .seconds(9))  // (test only) 300 behind for 9 s: it stays
        feed.send(301)  // (test only)
        #expect(subscription.backlog?.count == 301)
        clock.advance(by: .seconds(1))  // (test only) and for 10 s: it goes
        feed.send(302)  // (test only)
        #expect(subscription.backlog == nil, "evicted")
        #expect(await subscription.waitForEviction() != nil)
        do {
            _ = try await reader.next()
            Issue.record("an evicted subscriber's next element")
        } catch {
            #expect(error is SubscriberEvictedError)
        }
    }

    // SoftLimit
    @Test func softLimit() {
        let soft = SharedBufferingPolicy.SoftLimit.above(256, for: .seconds(10))
        let policy = SharedBufferingPolicy.evicting(4096, softLimit: soft)

        #expect(soft.count == 256 && soft.duration == .seconds(10))
        #expect(policy == .evicting(4096, softLimit: .above(256, for: .seconds(10))))
        #expect("\(policy)" == "evicting(4096, softLimit: .above(256, for: 10.0 seconds))")
    }
}
