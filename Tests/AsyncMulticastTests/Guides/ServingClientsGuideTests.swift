// Checks Guides/ServingClients.md: every compiled example verbatim, with a test-local `print`
// that records its lines (the per-example way of PrintedLines.swift), and the output the
// guide shows.

import AsyncMulticast
import Testing

// Guides/ServingClients.md: Lossy clients that know what they missed
@Test("Guides/ServingClients.md: Lossy clients that know what they missed", .timeLimit(.minutes(3)))
func servingClientsGuideLagReports() async {
    let (printed, print) = PrintedLines.recorder()

    let prices = AsyncPassthroughSubject<Int, Never>()
    var slowClient = prices.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
    for price in 1...5 { prices.send(price) }
    prices.finish()
    while let event = await slowClient.next() { print(event) }

    #expect(printed.lines == ["missed(3)", "element(4)", "element(5)"])
}

// Guides/ServingClients.md: Lossy clients that know what they missed (the .bufferingOldest sentence)
@Test("Guides/ServingClients.md: .bufferingOldest(2) reports the gap after what it kept", .timeLimit(.minutes(3)))
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
@Test("Guides/ServingClients.md: Evicting the client that cannot keep up", .timeLimit(.minutes(3)))
func servingClientsGuideEviction() async {
    let (printed, print) = PrintedLines.recorder()

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
            "stalled: evicted(at its hard limit, holding 3 elements (high-water mark 3))", "stalled: nil",
            "subscribers: 1",
        ])
}

// Guides/ServingClients.md: Evicting the client that cannot keep up (SubscriberEvictedError)
@Test(
    "Guides/ServingClients.md: Evicting the client that cannot keep up (SubscriberEvictedError)",
    .timeLimit(.minutes(3)))
func servingClientsGuideEvictionThrows() async throws {
    let (printed, print) = PrintedLines.recorder()

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

// Guides/ServingClients.md: Sizing the two limits (the burst)
@Test("Guides/ServingClients.md: Sizing the two limits (the burst)", .timeLimit(.minutes(3)))
func servingClientsGuideBurst() async {
    let (printed, print) = PrintedLines.recorder()

    for policy in [SharedBufferingPolicy.evicting(256), .evicting(4096)] {
        let room = AsyncReplaySubject<String, Never>(replay: 50, buffering: policy)
        let clients = (1...200).map { _ in room.subscribe() }  // connected, reading later
        for poster in 1...50 {
            for n in 1...20 { room.send("\(poster): message \(n)") }  // the burst comes first
        }
        let backlogs = clients.compactMap(\.backlog)  // nil: evicted
        print(policy, "kept", backlogs.count, "clients; the most one held:", backlogs.map(\.highWaterMark).max() ?? 0)
    }

    #expect(
        printed.lines == [
            "evicting(256) kept 0 clients; the most one held: 0",
            "evicting(4096) kept 200 clients; the most one held: 1000",
        ])
}

// Guides/ServingClients.md: Sizing the two limits (the soft limit)
// The guide's `clock` is a manual one: no time passes until the healthy client has caught
// up, so only the stalled one is past 256 when the test moves the clock by the second.
@Test("Guides/ServingClients.md: Sizing the two limits (the soft limit)", .timeLimit(.minutes(3)))
func servingClientsGuideSoftLimit() async throws {
    let (printed, print) = PrintedLines.recorder()
    let clock = ManualClock()

    let example = Task {  // (test only)
        let soft = SharedBufferingPolicy.SoftLimit.above(256, for: .seconds(1))  // 10 s or more, in a server
        let room = AsyncReplaySubject<String, Never>(
            replay: 50, buffering: .evicting(4096, softLimit: soft), clock: clock)
        let healthy = room.subscribe()
        let stalled = room.subscribe()  // never reads
        for poster in 1...50 {
            for n in 1...20 { room.send("\(poster): message \(n)") }
        }
        var reader = healthy.makeAsyncIterator()
        for _ in 1...1000 { _ = await reader.next() }  // catches up within the second
        print("healthy:", healthy.backlog!)
        print("stalled evicted", await stalled.waitForEviction()!)  // a second after it went past 256
    }  // (test only)
    await printed.wait(until: { $0.count == 1 })  // "healthy: …", at the clock's start
    #expect(await clock.waitForSleepers(count: 1), "the soft limit's timer, asleep until the second is over")
    clock.advance(by: .seconds(1))
    await example.value

    #expect(
        printed.lines == [
            "healthy: SubscriberBacklog(count: 0, highWaterMark: 1000)",
            "stalled evicted at its soft limit, holding 1000 elements (high-water mark 1000)",
        ])
}

// Guides/ServingClients.md: Joining when the request arrives
@Test("Guides/ServingClients.md: Joining when the request arrives", .timeLimit(.minutes(3)))
func servingClientsGuideSubscribe() async {
    let (printed, print) = PrintedLines.recorder()

    let room = AsyncPassthroughSubject<String, Never>(
        buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))))
    let client = room.subscribe()  // in the request handler: joined from here on
    room.send("welcome")  // sent before the body runs: still received
    room.finish()
    let body: @Sendable () async -> Void = {  // the response body, run later
        for await event in client.events { print(event) }
    }
    await body()

    #expect(printed.lines == [#"element("welcome")"#])
}

// Guides/ServingClients.md: Shutting down
@Test("Guides/ServingClients.md: Shutting down", .timeLimit(.minutes(3)))
func servingClientsGuideShuttingDown() async {
    let (printed, print) = PrintedLines.recorder()

    let room = AsyncPassthroughSubject<String, Never>(buffering: .evicting(4096))
    let alice = room.subscribe()
    let bob = room.subscribe()
    room.send("the server restarts in a minute")
    let handlers = [alice, bob].map { client in
        Task { for await line in client { print("sent:", line) } }  // each writes to its connection
    }
    let drained = await room.finish(drainingWithin: .seconds(10))
    print("drained:", drained)

    #expect(
        printed.lines == [
            "sent: the server restarts in a minute", "sent: the server restarts in a minute", "drained: true",
        ])
    for handler in handlers { await handler.value }
}

// Guides/ServingClients.md: Fan-out by key
@Test("Guides/ServingClients.md: Fan-out by key", .timeLimit(.minutes(3)))
func servingClientsGuideFanOutByKey() async {
    let (printed, print) = PrintedLines.recorder()

    let rooms = AsyncSubjectTopics<String, String, Never>(
        replay: 2, buffering: .evicting(4096), keepAlive: .seconds(30))
    let alice = rooms.subscribe(to: "swift")  // in alice's request handler
    let bob = rooms.subscribe(to: "rust")  // in bob's
    rooms.send("hi from swift", to: "swift")
    rooms.send("hi from rust", to: "rust")
    print("rooms:", rooms.keyCount, "in swift:", rooms.subscriberCount(of: "swift"))
    rooms.finish()
    for await message in alice { print("alice:", message) }
    for await message in bob { print("bob:", message) }

    #expect(printed.lines == ["rooms: 2 in swift: 1", "alice: hi from swift", "bob: hi from rust"])
}

// Guides/ServingClients.md: Fan-out by key (a room freed when its last client goes)
@Test("Guides/ServingClients.md: Fan-out by key (freed)", .timeLimit(.minutes(3)))
func servingClientsGuideFanOutByKeyFreed() async throws {
    let (printed, print) = PrintedLines.recorder()

    let lobby = AsyncSubjectTopics<String, String, Never>(buffering: .evicting(4096))
    let client = lobby.subscribe(to: "lobby")
    let connection = Task { for await message in client { print(message) } }
    print(lobby.isLive("lobby"))  // true
    connection.cancel()  // the client went away: its subscriber leaves
    try await lobby.waitUntilFreed("lobby")
    print(lobby.isLive("lobby"))  // false

    #expect(printed.lines == ["true", "false"])
}

/// The element of the example's upstream: a database notification.
private struct Notification: Sendable {
    let channel: String
    let payload: String
}

// Guides/ServingClients.md: Fan-out by key (topics of one upstream)
@Test("Guides/ServingClients.md: Fan-out by key (one upstream)", .timeLimit(.minutes(3)))
func servingClientsGuideFanOutOfOneUpstream() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let (listen, database) = AsyncStream.makeStream(of: Notification.self)
    let channels = listen.share(by: \.channel, buffering: .evicting(4096))
    let orders = channels.subscribe(to: "orders")  // in one client's handler
    let stock = channels.subscribe(to: "stock")  // in another's
    database.yield(Notification(channel: "orders", payload: "order 17 paid"))
    database.yield(Notification(channel: "audit", payload: "nobody listens: dropped"))
    database.yield(Notification(channel: "stock", payload: "sku 9 low"))
    database.finish()  // the upstream ends: every channel ends
    for await n in orders { print("orders:", n.payload) }
    for await n in stock { print("stock:", n.payload) }

    #expect(printed.lines == ["orders: order 17 paid", "stock: sku 9 low"])
}

// Guides/ServingClients.md: Reconnecting clients
@Test("Guides/ServingClients.md: Reconnecting clients", .timeLimit(.minutes(3)))
func servingClientsGuideReconnectingClients() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    let feed = AsyncReplaySubject<String, Never>(replay: 3)  // the history: the latest 3
    let store = ["a", "b", "c", "d", "e", "f"]  // your own log, by position
    for line in store { feed.send(line) }  // positions 0...5; 3...5 kept
    let client = feed.subscribe(after: 1)  // Last-Event-ID: 1
    feed.send("g")
    feed.finish()
    for await event in client {
        switch event {
        case .gap(let after, let before):  // first, if there is one
            for position in (after + 1)..<before { print(position, store[position], "(from the store)") }
        case .element(let line, let position):
            print(position, line)
        case .evicted:
            print("evicted: reconnect")
        }
    }

    #expect(printed.lines == ["2 c (from the store)", "3 d", "4 e", "5 f", "6 g"])
}

// Guides/ServingClients.md: Reconnecting clients, by the elements' own ids
@Test("Guides/ServingClients.md: Resuming by the elements' own ids", .timeLimit(.minutes(3)))
func servingClientsGuideResumingByIDs() async {
    let printed = PrintedLines()
    @Sendable func print(_ items: Any...) { printed.record(items) }

    struct Row: Sendable {
        let id: Int
        let text: String
    }
    let rows = AsyncReplaySubject<Row, Never>(replay: 2)  // 20 and 35 kept
    for (id, text) in [(10, "a"), (20, "b"), (35, "c")] { rows.send(Row(id: id, text: text)) }
    let client = rows.subscribe(after: 10, id: \.id)  // Last-Event-ID: 10
    rows.finish()
    for await event in client {
        switch event {
        case .gap(let after, let before): print("ask the table for ids \(after + 1)..<\(before)")
        case .element(let row, let id): print(id, row.text)
        case .evicted: print("evicted: reconnect")
        }
    }

    #expect(printed.lines == ["ask the table for ids 11..<20", "20 b", "35 c"])
}
