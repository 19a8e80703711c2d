// Checks Guides/Multicast.md: every compiled example, and the output the guide shows for it.
//
// Each test carries a `// Guides/Multicast.md: <section>` comment, which is also its display
// name, and contains the example verbatim; the lines marked `[test gate]` or `[test only]` are
// the test's own. The test then asserts exactly the output the guide shows: all lines in order,
// or, where the guide shows the lines of concurrent subscribers separately, each subscriber's
// lines on their own. `print` is a local function of each test (or a `static func print` of the
// namespace that holds an example's declarations) that records the line in that example's own
// `PrintedLines` (the per-example way of PrintedLines.swift), so the tests may run in parallel.
// Names the guide declares live in a `private` namespace per example.
//
// The guide's examples are written so that their output is deterministic; where it says
// "later" (a user action), the test waits for the previous step explicitly, with a gate on
// the printed lines or on `subscriberCount`, never with a sleep.

import AsyncMulticast
import Testing

// Guides/Multicast.md: The race share() users hit
@Test("Guides/Multicast.md: The race share() users hit", .timeLimit(.minutes(3)))
func multicastGuideTheRaceShareUsersHit() async {
    let (printed, print) = PrintedLines.recorder()

    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    let shared = prices.share()

    feed.yield(100)
    var chart = shared.makeAsyncIterator()
    print("chart:", await chart.next()!)  // this first wait starts the upstream
    var table = shared.makeAsyncIterator()  // joins after 100 was produced
    feed.yield(101)
    feed.finish()
    while let p = await chart.next() { print("chart:", p) }
    while let p = await table.next() { print("table:", p) }

    #expect(
        printed.lines == [
            "chart: 100",
            "chart: 101",
            "table: 101",
        ])
}

// The "Join first, then connect" examples: the later two use `prices` as the first does, and
// all three print the same lines.

/// `prices` as the first example makes it: 100 and 101, then the end, buffered before anyone
/// subscribes.
private func pricesOf100And101() -> AsyncStream<Int> {
    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    feed.yield(100)
    feed.yield(101)
    feed.finish()
    return prices
}

/// The output the guide shows for each example: each subscriber's two lines, which the two
/// tasks interleave differently from run to run, and nothing else.
private func expectEachSawBothPrices(_ printed: PrintedLines, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(printed.lines(startingWith: "chart:") == ["chart: 100", "chart: 101"], sourceLocation: sourceLocation)
    #expect(printed.lines(startingWith: "table:") == ["table: 100", "table: 101"], sourceLocation: sourceLocation)
    #expect(printed.lines.count == 4, sourceLocation: sourceLocation)
}

// Guides/Multicast.md: Join first, then connect
@Test("Guides/Multicast.md: Join first, then connect", .timeLimit(.minutes(3)))
func multicastGuideJoinFirstThenConnect() async {
    let (printed, print) = PrintedLines.recorder()

    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    feed.yield(100)
    feed.yield(101)
    feed.finish()

    let multicast = prices.multicast()
    let chart = multicast.makeAsyncIterator()  // both are subscribers from here on
    let table = multicast.makeAsyncIterator()
    let chartTask = Task {
        var chart = chart
        while let p = await chart.next() { print("chart:", p) }
    }
    let tableTask = Task {
        var table = table
        while let p = await table.next() { print("table:", p) }
    }
    multicast.connect()
    await chartTask.value
    await tableTask.value

    expectEachSawBothPrices(printed)
}

// Guides/Multicast.md: Join first, then connect (tasks that subscribe themselves)
@Test("Guides/Multicast.md: Join first, then connect (tasks that subscribe themselves)", .timeLimit(.minutes(3)))
func multicastGuideJoinFirstThenConnectFromTasks() async throws {
    let (printed, print) = PrintedLines.recorder()

    let prices = pricesOf100And101()  // `prices` as in the previous example

    let multicast = prices.multicast()
    let chartTask = Task { for await p in multicast { print("chart:", p) } }
    let tableTask = Task { for await p in multicast { print("table:", p) } }
    try await multicast.waitForSubscribers(atLeast: 2)  // both loops have subscribed
    multicast.connect()
    await chartTask.value
    await tableTask.value

    expectEachSawBothPrices(printed)
}

// Guides/Multicast.md: Join first, then connect (autoconnect(minimumSubscribers:))
@Test("Guides/Multicast.md: Join first, then connect (autoconnect(minimumSubscribers:))", .timeLimit(.minutes(3)))
func multicastGuideAutoconnectMinimumSubscribers() async {
    let (printed, print) = PrintedLines.recorder()

    let prices = pricesOf100And101()  // `prices` as in the previous example

    let multicast = prices.multicast().autoconnect(minimumSubscribers: 2)
    let chartTask = Task { for await p in multicast { print("chart:", p) } }
    let tableTask = Task { for await p in multicast { print("table:", p) } }
    await chartTask.value
    await tableTask.value

    expectEachSawBothPrices(printed)
}

/// Where one example of the guide's cold source records what it prints: each has a log of its
/// own, so that the two tests may run in parallel.
private protocol ServerExampleLog: Sendable {
    static var printed: PrintedLines { get }
}

private enum ConnectionLog: ServerExampleLog { static let printed = PrintedLines() }
private enum AutoconnectLog: ServerExampleLog { static let printed = PrintedLines() }

/// The guide's `ServerConnection`, declared once, and the two examples that use it, each
/// printing into `Log`.
private enum ServerExamples<Log: ServerExampleLog> {
    static func print(_ items: Any...) { Log.printed.record(items) }

    /// A cold source: every iteration opens a new connection, which sends two messages and
    /// then stays open until the iteration is cancelled.
    struct ServerConnection: AsyncSequence, Sendable {
        func makeAsyncIterator() -> AsyncStream<String>.Iterator {
            print("server: connect")
            let (messages, server) = AsyncStream.makeStream(of: String.self)
            server.onTermination = { _ in print("server: disconnect") }
            server.yield("hello")
            server.yield("status: ok")
            return messages.makeAsyncIterator()
        }
    }

    static func connectCancelReconnect() async {  // (test only)
        let server = ServerConnection().multicast()
        var a = server.makeAsyncIterator()
        var b = server.makeAsyncIterator()

        let connection = server.connect()
        print("same connection:", server.connect() == connection)
        print("a:", await a.next()!)
        print("a:", await a.next()!)

        connection.cancel()  // a has read everything; b has read nothing yet
        while let m = await b.next() { print("b:", m) }
        print("a ended:", await a.next() == nil)

        var c = server.makeAsyncIterator()  // joins while disconnected
        let second = server.connect()  // a fresh iteration of the base
        print("new connection:", second != connection)
        print("c:", await c.next()!)
        second.cancel()
    }

    static func autoconnect() async {  // (test only)
        let server = ServerConnection().multicast(replay: 1).autoconnect()
        do {
            var first = server.makeAsyncIterator()
            print("first:", await first.next()!)  // this wait connects
            print("first:", await first.next()!)
        }  // first leaves; the connection stays open
        var second = server.makeAsyncIterator()
        print("second:", await second.next()!)  // replayed; no new connection

        server.connect().cancel()  // the running connection, cancelled
        print("second ended:", await second.next() == nil)
    }
}

// Guides/Multicast.md: The connection: connect, cancel, reconnect
@Test("Guides/Multicast.md: The connection: connect, cancel, reconnect", .timeLimit(.minutes(3)))
func multicastGuideConnectCancelReconnect() async {
    let printed = ConnectionLog.printed
    await ServerExamples<ConnectionLog>.connectCancelReconnect()
    await printed.wait { $0.filter { $0 == "server: disconnect" }.count == 2 }
    #expect(
        printed.lines.filter { !$0.hasPrefix("server:") } == [
            "same connection: true",
            "a: hello",
            "a: status: ok",
            "b: hello",
            "b: status: ok",
            "a ended: true",
            "new connection: true",
            "c: hello",
        ])
    #expect(
        printed.lines(startingWith: "server:") == [
            "server: connect",
            "server: disconnect",
            "server: connect",
            "server: disconnect",
        ])
}

// Guides/Multicast.md: autoconnect()
@Test("Guides/Multicast.md: autoconnect()", .timeLimit(.minutes(3)))
func multicastGuideAutoconnect() async {
    let printed = AutoconnectLog.printed
    await ServerExamples<AutoconnectLog>.autoconnect()
    await printed.wait(for: "server: disconnect")
    #expect(
        printed.lines.filter { !$0.hasPrefix("server:") } == [
            "first: hello",
            "first: status: ok",
            "second: status: ok",
            "second ended: true",
        ])
    #expect(
        printed.lines(startingWith: "server:") == [
            "server: connect",
            "server: disconnect",
        ])
}
