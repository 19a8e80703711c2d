// Checks Guides/ServingClients.md: every compiled example verbatim, with a test-local `print`
// that records its lines (the per-example way of PrintedLines.swift), and the output the
// guide shows.

import AsyncMulticast
import Testing

// Guides/ServingClients.md: Lossy clients that know what they missed
@Test("Guides/ServingClients.md: Lossy clients that know what they missed", .timeLimit(.minutes(1)))
func servingClientsGuideLagReports() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let prices = AsyncPassthroughSubject<Int, Never>()
    var slowClient = prices.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
    for price in 1...5 { prices.send(price) }
    prices.finish()
    while let event = await slowClient.next() { print(event) }

    #expect(printed.lines == ["missed(3)", "element(4)", "element(5)"])
}

// Guides/ServingClients.md: Lossy clients that know what they missed (the .bufferingOldest sentence)
@Test("Guides/ServingClients.md: .bufferingOldest(2) reports the gap after what it kept", .timeLimit(.minutes(1)))
func servingClientsGuideLagReportsOldest() async {
    let prices = AsyncPassthroughSubject<Int, Never>()
    var slowClient = prices.events(buffering: .bufferingOldest(2)).makeAsyncIterator()
    for price in 1...5 { prices.send(price) }
    prices.finish()
    var events: [SharedEvent<Int>] = []
    while let event = await slowClient.next() { events.append(event) }
    #expect(events == [.element(1), .element(2), .missed(3)])
}

// Guides/ServingClients.md: Evicting the client that cannot keep up
@Test("Guides/ServingClients.md: Evicting the client that cannot keep up", .timeLimit(.minutes(1)))
func servingClientsGuideEviction() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let feed = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(3))
    var stalled = feed.events().makeAsyncIterator()  // subscribed, but does not read in time
    var reader = feed.makeAsyncIterator()
    for n in 1...5 {
        feed.send(n)
        print("reader:", await reader.next()!)
    }
    print("stalled:", await stalled.next()!)
    print("stalled:", await stalled.next() as Any)
    print("subscribers:", feed.subscriberCount)

    #expect(
        printed.lines == [
            "reader: 1", "reader: 2", "reader: 3", "reader: 4", "reader: 5",
            "stalled: evicted", "stalled: nil", "subscribers: 1",
        ])
}

// Guides/ServingClients.md: Evicting the client that cannot keep up (SubscriberEvictedError)
@Test(
    "Guides/ServingClients.md: Evicting the client that cannot keep up (SubscriberEvictedError)",
    .timeLimit(.minutes(1)))
func servingClientsGuideEvictionThrows() async throws {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let (updates, input) = AsyncThrowingStream.makeStream(of: Int.self)
    let shared = updates.share(buffering: .evicting(2))
    var stalled = shared.makeAsyncIterator()
    var reader = shared.makeAsyncIterator()
    for n in 1...4 {
        input.yield(n)
        print("reader:", try await reader.next()!)
    }
    do {
        while let n = try await stalled.next() { print("stalled:", n) }
    } catch is SubscriberEvictedError {
        print("stalled: evicted")
    }

    #expect(printed.lines == ["reader: 1", "reader: 2", "reader: 3", "reader: 4", "stalled: evicted"])
}

// Guides/ServingClients.md: Joining when the request arrives
@Test("Guides/ServingClients.md: Joining when the request arrives", .timeLimit(.minutes(1)))
func servingClientsGuideSubscribe() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let room = AsyncPassthroughSubject<String, Never>(buffering: .evicting(256))
    let client = room.subscribe()  // in the request handler: joined from here on
    room.send("welcome")  // sent before the body runs: still received
    room.finish()
    let body: @Sendable () async -> Void = {  // the response body, run later
        for await event in client.events { print(event) }
    }
    await body()

    #expect(printed.lines == [#"element("welcome")"#])
}
