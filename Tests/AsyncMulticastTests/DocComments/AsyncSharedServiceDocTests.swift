// Checks the doc-comment examples of Sources/AsyncMulticast/Share/AsyncSharedService.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSharedService", .timeLimit(.minutes(3)))
struct AsyncSharedServiceDocTests {
    // AsyncSharedService
    @Test func theType() async throws {
        let (rendered, render) = PrintedLines.recorder()  // (test only)
        let (tickSource, ticker) = AsyncStream.makeStream(of: Int.self)  // (test only)
        for tick in 1...3 { ticker.yield(tick) }  // (test only)
        ticker.finish()  // (test only) the upstream ends: run() returns, the reader ends

        let ticks = tickSource.sharedService(replay: 1, started: .eagerly)
        await withDiscardingTaskGroup { group in
            group.addTask { await ticks.run() }  // hosts the upstream until cancelled
            group.addTask { for await tick in ticks { render(tick) } }
        }

        // Started eagerly, before the reader joined: it gets the replayed latest tick at
        // least, and everything after it, in order.
        #expect(rendered.lines.last == "3")
        #expect(rendered.lines == rendered.lines.sorted())
    }

    // run()
    @Test func run() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let ticks = stream.sharedService(replay: 3, buffering: .unbounded)  // (test only)
        let reading = Task {  // (test only) a subscriber that reads until the end
            var received: [Int] = []  // (test only)
            for await tick in ticks { received.append(tick) }  // (test only)
            return received  // (test only)
        }  // (test only)
        try await waitUntil("the reader joined") { ticks.subscriberCount == 1 }  // (test only)

        let hosting = Task { await ticks.run() }
        // ... subscribers read ticks ...
        for tick in 1...3 { input.yield(tick) }  // (test only)
        try await waitUntil("1, 2, 3 produced") { ticks.replayCache == [1, 2, 3] }  // (test only)
        hosting.cancel()  // they get what was buffered, then nil

        await hosting.value  // (test only)
        #expect(await reading.value == [1, 2, 3])
        #expect(ticks.subscriberCount == 0)
    }

    // sharedService(replay:buffering:started:clock:)
    @Test func withClock() async throws {
        let clock = ManualClock()  // (test only)
        let source = FedSource()  // (test only)
        let updates = source  // (test only)

        let location = updates.sharedService(started: .whileSubscribed(keepAlive: .seconds(5)), clock: clock)

        let hosting = Task { await location.run() }  // (test only)
        await source.oneSubscriberReadsTheFirstElement(of: location)  // (test only)
        await clock.waitForSleepers(count: 1)  // (test only) the stop timeout runs on the clock
        clock.advance(by: .seconds(5))  // (test only)
        let end = await source.control.waitForEnd()  // (test only)
        #expect(end?.end == .cancelled, "stopped 5 s after the last subscriber left")
        hosting.cancel()  // (test only)
        await hosting.value  // (test only)
    }
}
