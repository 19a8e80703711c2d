// Checks the doc-comment examples of Sources/AsyncMulticast/SharedSubscription.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedSubscription", .timeLimit(.minutes(1)))
struct SharedSubscriptionDocTests {
    // SharedSubscription
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)

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
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncPassthroughSubject<Int, Never>()  // (test only)

        let client = feed.subscribe(buffering: .evicting(256))
        Task {
            for await event in client.events {
                if case .evicted = event { print("too slow: disconnected") }
            }
        }

        for n in 0...256 { feed.send(n) }  // (test only) the 257th evicts it
        #expect(await printed.lines(waitingFor: 1) == ["too slow: disconnected"])
    }

    // subscribe(buffering:)
    @Test func subscribe() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
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
}
