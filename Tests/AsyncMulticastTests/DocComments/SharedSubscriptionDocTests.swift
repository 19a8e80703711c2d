// Checks the doc-comment examples of Sources/AsyncMulticast/SharedSubscription.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedSubscription", .timeLimit(.minutes(3)))
struct SharedSubscriptionDocTests {
    // SharedSubscription
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let updates = AsyncPassthroughSubject<String, Never>()
        let subscription = updates.subscribe()  // joined: nothing sent from here on is missed
        updates.send("hello")
        updates.finish()
        let reader = Task { for await line in subscription { print(line) } }  // hello
        await reader.value

        #expect(printed.lines == ["hello"])
    }

    // events
    @Test func events() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>()  // (test only)

        let client = feed.subscribe(buffering: .evicting(256))  // small, to show an eviction
        // (test only) Before the reader starts, so that it cannot keep up: the 257th evicts it.
        for n in 0...256 { feed.send(n) }  // (test only)
        Task {
            for await event in client.events {
                if case .evicted(let eviction) = event { print("disconnected, evicted \(eviction)") }
            }
        }

        #expect(
            await printed.lines(waitingFor: 1) == [
                "disconnected, evicted at its hard limit, holding 256 elements (high-water mark 256)"
            ])
    }

    // subscribe(buffering:)
    @Test func subscribe() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let prices = AsyncPassthroughSubject<Double, Never>()  // (test only)

        let client = prices.subscribe(buffering: .bufferingNewest(16))  // joined here
        let body: @Sendable () async -> Void = {  // runs later, anywhere
            for await price in client { print(price) }
        }

        prices.send(101.5)  // (test only) sent before the body runs: received
        prices.finish()  // (test only)
        await body()
        #expect(printed.lines == ["101.5"])
    }

    // backlog
    @Test func backlog() {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let chat = AsyncReplaySubject<String, Never>(replay: 16, buffering: .evicting(4096))
        let client = chat.subscribe()
        for n in 1...50 { chat.send("message \(n)") }
        print(client.backlog!.highWaterMark)  // 50

        #expect(printed.lines == ["50"])
    }

    // waitForEviction()
    @Test func waitForEviction() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let clock = ManualClock()  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>(clock: clock)  // (test only)
        let connection = StalledConnection()  // (test only)

        let client = feed.subscribe(buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))))
        Task {
            if let eviction = await client.waitForEviction() {
                print("closing, evicted", eviction)  // closing, evicted at its soft limit, holding 300 elements …
                try await connection.close()
            }
        }
        let burst = Task {  // (test only) the client stops reading while the feed goes on
            feed.send(0)  // (test only)
            await connection.stalled.next("the first write hangs")  // (test only)
            for n in 1...300 { feed.send(n) }  // (test only) more than 256 behind...
            await clock.waitForSleepers(count: 1)  // (test only) the soft deadline's timer
            clock.advance(by: .seconds(11))  // (test only) ...for more than 10 s: evicted then
        }  // (test only)
        await #expect(throws: StalledConnection.Closed.self) {  // (test only)
            for await event in client { try await connection.write(event) }
        }  // (test only)

        await burst.value
        #expect(connection.isClosed)
        #expect(connection.written.lines == ["0"], "stuck in its first write until closed")
        #expect(printed.lines == ["closing, evicted at its soft limit, holding 300 elements (high-water mark 300)"])
        #expect(client.backlog == nil)
        #expect(feed.subscriberCount == 0)
    }
}
