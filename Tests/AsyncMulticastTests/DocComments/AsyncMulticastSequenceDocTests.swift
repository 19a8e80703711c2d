// Checks the doc-comment examples of Sources/AsyncMulticast/Multicast/AsyncMulticastSequence.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncMulticastSequence", .timeLimit(.minutes(3)))
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

    // multicast(replay:buffering:clock:)
    @Test func multicastTimedOnAClock() async {
        let (messages, sender) = AsyncStream.makeStream(of: String.self)  // (test only)
        let room = messages.multicast(
            buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))),
            clock: ContinuousClock())
        let client = room.subscribe()  // (test only)
        room.connect()
        sender.yield("hello")  // (test only)
        sender.finish()  // (test only)
        var received: [String] = []  // (test only)
        for await message in client { received.append(message) }  // (test only)
        #expect(received == ["hello"])  // (test only)
        #expect(room.subscriberCount == 0)  // (test only) the one client read to the end
    }

    // AsyncMulticastSequence: the replay window across connections
    @Test func replayWindowAcrossConnections() async {
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
