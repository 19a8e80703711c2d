// Checks the doc-comment examples of Sources/AsyncMulticast/Share/AsyncShareSequence.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncShareSequence", .timeLimit(.minutes(3)))
struct AsyncShareSequenceDocTests {
    // AsyncShareSequence
    @Test func theType() async throws {
        let (temperatures, thermometer) = AsyncStream.makeStream(of: Double.self)  // (test only)
        let display = StubSink()  // (test only)
        let logger = StubSink()  // (test only)

        let shared = temperatures.share()
        Task { for await t in shared { display.show(t) } }
        Task { for await t in shared { logger.log(t) } }

        try await shared.waitForSubscribers(atLeast: 2)
        thermometer.yield(20.5)
        thermometer.yield(21.0)
        thermometer.finish()
        #expect(await display.received.lines(waitingFor: 2) == ["20.5", "21.0"])
        #expect(await logger.received.lines(waitingFor: 2) == ["20.5", "21.0"])
    }

    // share()
    @Test func share() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)

        let shared = stream.share()
        async let a: [Int] = shared.reduce(into: []) { $0.append($1) }
        async let b: [Int] = shared.reduce(into: []) { $0.append($1) }

        try await shared.waitForSubscribers(atLeast: 2)
        for n in 1...3 { continuation.yield(n) }
        continuation.finish()
        let (seenByA, seenByB) = await (a, b)
        #expect(seenByA == [1, 2, 3])
        #expect(seenByB == [1, 2, 3])
    }

    // share(buffering:)
    @Test func shareBuffering() async {
        struct Sensor { let readings: AsyncStream<Double> }  // (test only)
        let (readings, input) = AsyncStream.makeStream(of: Double.self)  // (test only)
        let sensor = Sensor(readings: readings)  // (test only)

        let latest = sensor.readings.share(buffering: .bufferingNewest(1))

        var screen = latest.makeAsyncIterator()
        for reading in [1.0, 2.0, 3.0] { input.yield(reading) }
        input.finish()
        var seen: [Double] = []
        while let reading = await screen.next() { seen.append(reading) }
        // A screen slower than the sensor skips to the latest; it always ends with it.
        #expect(seen.last == 3.0 && seen == seen.sorted())
    }

    // share(keepAlive:)
    @Test func shareKeepAlive() async {
        let locationSource = FedSource()  // (test only)

        // Leaving a screen and coming back within 5 s does not restart location updates.
        let locations = locationSource.share(keepAlive: .seconds(5))

        let screen = await locationSource.subscriberThatReadTheFirstElement { locations.makeAsyncIterator() }
        let left = ContinuousClock.now
        await screen.leave()
        #expect(locations.subscriberCount == 0)

        let back = await SubscriberTask.join { locations.makeAsyncIterator() }
        // The window is 5 s of real time. A machine stalled for that long (CI has seen 5 s)
        // may have closed it: then nothing more is checked here; `shareKeepAliveClock`
        // checks the same on a manual clock.
        guard left.duration(to: .now) < .seconds(4) else {
            await back.leave()
            return
        }
        locationSource.control.yield(2)
        #expect(await back.next() == 2, "the same iteration continues")
        #expect(locationSource.control.iteratorCount == 1, "not restarted")
        await back.leave()
    }

    // share(buffering:keepAlive:clock:)
    @Test func shareKeepAliveClock() async {
        let updates = FedSource()  // (test only)
        let clock = ManualClock()  // (test only)

        let location = updates.share(keepAlive: .seconds(5), clock: clock)

        let screen = await updates.subscriberThatReadTheFirstElement { location.makeAsyncIterator() }
        await screen.leave()
        #expect(await clock.waitForSleepers(count: 1), "the keep-alive window is timed on the clock")
        #expect(updates.control.end(of: 0) == nil, "still running: no time has passed")
        clock.advance(by: .seconds(5))
        let ended = await updates.control.waitForEnd()
        #expect(ended?.iteration == 0 && ended?.end == .cancelled, "stopped when the window ended")
    }

    // replay(_:buffering:keepAlive:replayExpiration:)
    @Test func replay() async {
        let (stateUpdates, continuation) = AsyncStream.makeStream(of: String.self)  // (test only)
        let (rendered, render) = PrintedLines.recorder()  // (test only)

        let state = stateUpdates.replay(1)
        var first = state.makeAsyncIterator()  // (test only)
        continuation.yield("connecting")  // (test only)
        continuation.yield("online")  // (test only)
        continuation.finish()  // (test only)
        while await first.next() != nil {}  // (test only)
        // A subscriber arriving late gets the current state at once.
        for await current in state { render(current) }

        #expect(rendered.lines == ["online"])
    }

    // replay(_:buffering:keepAlive:replayExpiration:clock:)
    @Test func replayClock() async throws {
        let updates = FedSource()  // (test only)
        let clock = ManualClock()  // (test only)

        let state = updates.replay(1, keepAlive: .seconds(5), replayExpiration: .seconds(60), clock: clock)

        let screen = await updates.subscriberThatReadTheFirstElement { state.makeAsyncIterator() }
        await screen.leave()
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(5))
        let ended = await updates.control.waitForEnd()
        #expect(ended?.end == .cancelled, "the upstream stops 5 s after the last subscriber left")
        #expect(state.replayCache == [1], "the replayed element outlives it")
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(60))
        try await waitUntil("the replayed element expires") { state.replayCache.isEmpty }
    }
}

extension FedSource {
    /// A subscriber (made by `subscribe`) whose demand started iteration 0, and which read
    /// the element this source then yielded, 1.
    fileprivate func subscriberThatReadTheFirstElement(
        sourceLocation: SourceLocation = #_sourceLocation,
        _ subscribe: @escaping @Sendable () -> SharedIterator<Int, Never>
    ) async -> SubscriberTask<Int, Never> {
        let subscriber = await SubscriberTask.join(subscribe, sourceLocation: sourceLocation)
        subscriber.request()
        await self.control.waitForStart(of: 0)
        self.control.yield(1)
        #expect(await subscriber.answer() == 1, sourceLocation: sourceLocation)
        return subscriber
    }
}
