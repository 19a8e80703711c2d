// Checks Guides/Replay.md: every compiled example, and the output the guide shows for it.
//
// Each test carries a `// Guides/Replay.md: <section>` comment, which is also its display name,
// and contains the example verbatim; the lines marked `[test gate]` or `[test only]` are the
// test's own. The test then asserts exactly the output the guide shows: all lines in order, or,
// where the guide shows the lines of concurrent subscribers separately, each subscriber's lines
// on their own. `print` is a local function of each test (or a `static func print` of the
// namespace that holds an example's declarations) that records the line in that example's own
// `PrintedLines` (the per-example way of PrintedLines.swift), so the tests may run in parallel.
// Names the guide declares live in a `private` namespace per example.
//
// The guide's examples are written so that their output is deterministic; where it says
// "later" (a user action), the test waits for the previous step explicitly, with a gate on
// the printed lines or on `subscriberCount`, never with a sleep.

import AsyncMulticast
import Testing

// Guides/Replay.md: What replay(n) does
@Test("Guides/Replay.md: What replay(n) does", .timeLimit(.minutes(3)))
func replayGuideWhatReplayDoes() async {
    let (printed, print) = PrintedLines.recorder()

    let (updates, source) = AsyncStream.makeStream(of: String.self)
    let status = updates.replay(2)

    var first = status.makeAsyncIterator()
    source.yield("connecting")
    source.yield("connected")
    source.yield("syncing")
    for _ in 1...3 { print("first:", await first.next()!) }

    var second = status.makeAsyncIterator()  // joins after three elements were produced
    source.yield("idle")
    source.finish()
    while let s = await second.next() { print("second:", s) }
    while let s = await first.next() { print("first:", s) }

    var third = status.makeAsyncIterator()  // joins after the upstream ended
    while let s = await third.next() { print("third:", s) }

    #expect(
        printed.lines == [
            "first: connecting",
            "first: connected",
            "first: syncing",
            "second: connected",
            "second: syncing",
            "second: idle",
            "first: idle",
            "third: syncing",
            "third: idle",
        ])
}

// Guides/Replay.md: The cache when the upstream stops
@Test("Guides/Replay.md: The cache when the upstream stops", .timeLimit(.minutes(3)))
func replayGuideCacheOutlivesTheUpstream() async {
    let (printed, print) = PrintedLines.recorder()

    let (readings, sensor) = AsyncStream.makeStream(of: Int.self)
    let temperature = readings.replay(1, replayExpiration: .seconds(Int64.max))

    sensor.yield(21)
    sensor.yield(22)
    for await t in temperature {
        print("screen A:", t)
        if t == 22 { break }  // the only subscriber leaves: the upstream is cancelled
    }
    for await t in temperature {
        print("screen B:", t)
    }
    print("screen B: loop ended")

    #expect(
        printed.lines == [
            "screen A: 21",
            "screen A: 22",
            "screen B: 22",
            "screen B: loop ended",
        ])
}

// Guides/Replay.md: replay(1) as a state holder
@Test("Guides/Replay.md: replay(1) as a state holder", .timeLimit(.minutes(3)))
func replayGuideStateHolder() async {
    let (printed, print) = PrintedLines.recorder()

    enum Connection: Sendable { case offline, connecting, online }

    let (changes, network) = AsyncStream.makeStream(of: Connection.self)
    let connection = changes.replay(1)

    let statusBar = Task {
        for await state in connection { print("status bar:", state) }
    }
    network.yield(.connecting)
    network.yield(.online)

    // Later, the user opens the settings screen:
    await printed.wait(for: "status bar: online")  // [test gate]
    var settings = connection.makeAsyncIterator()
    print("settings:", await settings.next()!)  // the current state, at once

    network.finish()
    await statusBar.value

    #expect(
        printed.lines == [
            "status bar: connecting",
            "status bar: online",
            "settings: online",
        ])
}

private enum ReplayKeepAliveExample {
    static let printed = PrintedLines()
    static func print(_ items: Any...) { printed.record(items) }

    static func example(clock: ManualClock) async {  // (test only)
        let (fixes, gps) = AsyncStream.makeStream(of: String.self)
        gps.onTermination = { _ in print("gps: stopped") }
        let location = fixes.replay(1, keepAlive: .seconds(2), clock: clock)

        gps.yield("52.5200,13.4050")
        do {  // the map screen appears…
            var map = location.makeAsyncIterator()
            print("map:", await map.next()!)
        }  // …and goes away: its subscriber leaves
        do {  // back within 2 seconds
            var map = location.makeAsyncIterator()
            print("map again:", await map.next()!)  // replayed at once
            gps.yield("52.5201,13.4049")
            print("map again:", await map.next()!)  // live, from the same iteration
        }
        // Nobody comes back: 2 seconds later the upstream is cancelled.
    }
}

// Guides/Replay.md: Keeping the upstream alive: navigate away and back
@Test("Guides/Replay.md: Keeping the upstream alive: navigate away and back", .timeLimit(.minutes(3)))
func replayGuideKeepAlive() async {
    let printed = ReplayKeepAliveExample.printed
    let clock = ManualClock()
    await ReplayKeepAliveExample.example(clock: clock)
    await clock.waitForSleepers(count: 1)  // the window's timer sleeps
    clock.advance(by: .seconds(2) - .nanoseconds(1))
    await letOthersRun()
    #expect(!printed.lines.contains("gps: stopped"))  // the window is still open
    clock.advance(by: .nanoseconds(1))
    await printed.wait(for: "gps: stopped")  // closes 2 seconds after the last visit
    #expect(
        printed.lines == [
            "map: 52.5200,13.4050",
            "map again: 52.5200,13.4050",
            "map again: 52.5201,13.4049",
            "gps: stopped",
        ])
}

// Guides/Replay.md: Dropping subscribers get fewer replayed elements
@Test("Guides/Replay.md: Dropping subscribers get fewer replayed elements", .timeLimit(.minutes(3)))
func replayGuideDroppingSubscribers() async {
    let (printed, print) = PrintedLines.recorder()

    let (numbers, source) = AsyncStream.makeStream(of: Int.self)
    let recent = numbers.replay(3)
    for n in 1...5 { source.yield(n) }
    source.finish()
    for await _ in recent {}  // one subscriber runs the upstream to its end

    let policies: [SharedBufferingPolicy] = [
        .bounded(64), .unbounded, .evicting(2), .bufferingNewest(2), .bufferingOldest(2), .bufferingNewest(0),
    ]
    for policy in policies {
        var replayed: [Int] = []
        for await n in recent.buffering(policy) { replayed.append(n) }
        print(policy, replayed)
    }

    #expect(
        printed.lines == [
            "bounded(64) [3, 4, 5]",
            "unbounded [3, 4, 5]",
            "evicting(2) [3, 4, 5]",
            "bufferingNewest(2) [4, 5]",
            "bufferingOldest(2) [4, 5]",
            "bufferingNewest(0) []",
        ])
}
