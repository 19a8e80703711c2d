// Checks the doc-comment examples of Sources/AsyncMulticast/Multicast/AsyncMulticastSequence.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncMulticastSequence", .timeLimit(.minutes(1)))
struct AsyncMulticastSequenceDocTests {
    // AsyncMulticastSequence
    @Test func theType() async {
        let (feed, exchange) = AsyncStream.makeStream(of: Int.self)  // (test only)
        exchange.yield(100)  // (test only)
        exchange.yield(101)  // (test only)

        let prices = feed.multicast()
        var chart = prices.makeAsyncIterator()  // subscribed; nothing flows yet
        var table = prices.makeAsyncIterator()
        let connection = prices.connect()  // both see the very first price
        // …
        #expect(await chart.next() == 100)  // (test only)
        #expect(await table.next() == 100)  // (test only)
        connection.cancel()  // subscribers drain their buffers, then end

        var chartRest: [Int] = []
        while let price = await chart.next() { chartRest.append(price) }
        var tableRest: [Int] = []
        while let price = await table.next() { tableRest.append(price) }
        // Whether 101 was produced before the cancellation is up to the scheduler; a
        // subscriber gets it if it was, and both end.
        #expect([101].starts(with: chartRest) && [101].starts(with: tableRest))
    }

    // replayCache
    @Test func replayCache() async {
        let (feed, exchange) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let prices = feed.multicast(replay: 1)  // (test only)
        var chart = prices.makeAsyncIterator()  // (test only)
        prices.connect()  // (test only)
        exchange.yield(100)  // (test only)
        #expect(await chart.next() == 100)  // (test only)

        let latest = prices.replayCache.last

        #expect(latest == 100)
        exchange.finish()
    }

    // resetReplayCache()
    @Test func resetReplayCache() async {
        let source = FedSource()  // (test only)
        let prices = source.multicast(replay: 1)  // (test only)
        let chart = await SubscriberTask.join { prices.makeAsyncIterator() }  // (test only)
        let connection = prices.connect()  // (test only)
        await source.control.waitForStart(of: 0)  // (test only)
        source.control.yield(100)  // (test only)
        #expect(await chart.next() == 100)  // (test only)

        connection.cancel()
        prices.resetReplayCache()
        prices.connect()

        #expect(prices.replayCache.isEmpty)
        await source.control.waitForStart(of: 1)
        let late = await SubscriberTask.join { prices.makeAsyncIterator() }
        source.control.yield(101)
        #expect(await late.next() == 101, "not the 100 of the previous connection")
        await late.leave()
        await chart.leave()
    }

    // autoconnect()
    @Test func autoconnect() async {
        let (ticks, ticker) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let shown = PrintedLines()  // (test only)
        @Sendable func show(_ tick: Int) { shown.record([tick]) }  // (test only)
        for tick in 1...3 { ticker.yield(tick) }  // (test only)
        ticker.finish()  // (test only)

        let shared = ticks.multicast(replay: 1).autoconnect()
        for await tick in shared { show(tick) }  // the first wait connects

        #expect(shown.lines == ["1", "2", "3"])
    }

    // autoconnect(minimumSubscribers:)
    @Test func autoconnectMinimumSubscribers() async {
        let source = (1...50).async  // (test only)
        let counted = LockedLog<Int>()  // (test only)

        let feed = source.multicast().autoconnect(minimumSubscribers: 3)
        await withTaskGroup(of: Int.self) { group in
            for _ in 0..<3 { group.addTask { await feed.reduce(0) { n, _ in n + 1 } } }
            for await count in group { counted.append(count) }  // (test only)
        }  // each of the three counted every element

        #expect(counted.values == [50, 50, 50])
    }

    // events(buffering:)
    @Test func events() async throws {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let feed = source.multicast()  // (test only)
        let client = Task {  // (test only)
            for await event in feed.events(buffering: .bufferingNewest(16)) {
                if case .missed(let count) = event { print("this client missed \(count)") }
            }
        }  // (test only)

        try await feed.waitForSubscribers(atLeast: 1)
        feed.connect()
        for n in 1...1_000 { continuation.yield(n) }
        continuation.finish()
        await client.value
        // How much it misses depends on how fast it reads (the upstream is a task of its
        // own); it keeps at least the newest 16.
        #expect(missedTotal(printed.lines) <= 1_000 - 16)
    }

    // subscriberCounts
    @Test func subscriberCounts() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let feed = source.multicast()  // (test only)
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
        @Sendable func use(_ price: Int) { used.record([price]) }  // (test only)
        let (feed, exchange) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let prices = feed.multicast()  // (test only)
        exchange.yield(100)  // (test only)
        exchange.finish()  // (test only)

        let tasks = (0..<3).map { _ in Task { for await price in prices { use(price) } } }
        try await prices.waitForSubscribers(atLeast: 3)
        prices.connect()  // all three see the first price

        for task in tasks { await task.value }
        #expect(used.lines == ["100", "100", "100"])
    }

    // AsyncSequence.multicast(replay:buffering:)
    @Test func multicast() async {
        let numbers = (1...3).async  // (test only)

        let multicast = numbers.multicast()
        var a = multicast.makeAsyncIterator()  // joined, nothing flows yet
        var b = multicast.makeAsyncIterator()
        multicast.connect()  // a and b both see the first element

        var seenByA: [Int] = []
        while let n = await a.next() { seenByA.append(n) }
        var seenByB: [Int] = []
        while let n = await b.next() { seenByB.append(n) }
        #expect(seenByA == [1, 2, 3])
        #expect(seenByB == [1, 2, 3])
    }
}
