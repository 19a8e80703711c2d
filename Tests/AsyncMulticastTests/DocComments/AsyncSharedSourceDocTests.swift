// Checks the doc-comment examples of Sources/AsyncMulticast/Share/AsyncSharedSource.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSharedSource", .timeLimit(.minutes(3)))
struct AsyncSharedSourceDocTests {
    // AsyncSharedSource
    @Test func theType() async throws {
        typealias NetworkPath = String  // (test only)
        let monitors = Signal<StubMonitor<NetworkPath>>()  // (test only)
        // swift-format-ignore: AlwaysUseLowerCamelCase
        // (test only) Stands in for the app's monitor type, called as its initializer would be.
        @Sendable func PathMonitor() -> StubMonitor<NetworkPath> {  // (test only)
            StubMonitor(announcingStartTo: monitors)  // (test only)
        }  // (test only)
        let statusBar = StubSink()  // (test only)
        let sync = StubSink()  // (test only)
        let started = StartedTasks()  // (test only)
        // swift-format-ignore: AlwaysUseLowerCamelCase
        // (test only) Shadows `Task` so that the test can cancel the example's endless tasks.
        func Task(_ operation: @escaping @Sendable () async -> Void) { started.start(operation) }  // (test only)

        let paths = AsyncSharedSource<NetworkPath, Never> { emitter in
            let monitor = PathMonitor()
            monitor.onUpdate = { path in emitter.send(path) }
            monitor.start()
            return { monitor.stop() }  // called when the last subscriber leaves
        }
        Task { for await path in paths { statusBar.show(path) } }
        Task { for await path in paths { sync.adapt(to: path) } }

        try await paths.waitForSubscribers(atLeast: 2)
        let monitor = try #require(await monitors.next("the monitor starting"))
        monitor.report("wifi")
        #expect(await statusBar.received.lines(waitingFor: 1) == ["wifi"])
        #expect(await sync.received.lines(waitingFor: 1) == ["wifi"])
        #expect(monitor.calls.lines == ["onUpdate", "start"], "one monitor for both subscribers")
        await started.cancelAll()
        await monitor.calls.wait(for: "stop")
        #expect(monitor.calls.lines == ["onUpdate", "start", "stop"])
    }

    // AsyncSharedSource: an async stop
    @Test func asyncStop() async throws {
        let connections = Signal<StubConnection>()  // (test only)
        let made = PrintedLines()  // (test only)
        // swift-format-ignore: AlwaysUseLowerCamelCase
        // (test only) Stands in for the app's connection type, called as its initializer would be.
        @Sendable func Connection() -> StubConnection {  // (test only)
            made.record(["connection"])  // (test only)
            return StubConnection(announcingTo: connections)  // (test only)
        }  // (test only)

        let notifications = AsyncSharedSource<String, any Error> { emitter in
            let connection = Connection()
            connection.onNotification = { emitter.send($0) }
            return { await connection.close() }  // the next session starts after this returns
        }

        // The first session: a subscriber reads one notification and leaves.
        let firstRead = Task { () async throws -> String? in
            var first = notifications.makeAsyncIterator()
            return try await first.next()
        }
        let one = try #require(await connections.next("the first connection"))
        one.notify("hello")
        #expect(try await firstRead.value == "hello")
        // Its stop waits in close(); a new subscriber's session waits for it.
        _ = await one.closing.next("close() begins")
        let secondRead = Task { () async throws -> String? in
            var second = notifications.makeAsyncIterator()
            return try await second.next()
        }
        try await notifications.waitForSubscribers(atLeast: 1)
        await letOthersRun()
        #expect(made.lines.count == 1, "no second connection while the first closes")
        one.finishClosing()
        let two = try #require(await connections.next("the second connection"))
        #expect(one.isClosed, "closed before the next session started")
        two.notify("again")
        #expect(try await secondRead.value == "again")
    }

    // init(buffering:replay:keepAlive:replayExpiration:start:)
    @Test func stopNeedNotBeSendable() async throws {
        typealias Price = Int  // (test only)
        let pricePublisher = StubPublisher<Price>()  // (test only)

        let prices = AsyncSharedSource<Price, Never> { emitter in
            let subscription = pricePublisher.sink { emitter.send($0) }  // AnyCancellable
            return { subscription.cancel() }
        }

        let chart = await SubscriberTask.join { prices.makeAsyncIterator() }
        chart.request()
        _ = await pricePublisher.subscribed.next("the sink")
        pricePublisher.send(100)
        #expect(await chart.answer() == 100)
        await chart.leave()
        _ = try #require(await pricePublisher.cancelled.next("the subscription's cancellation"))
    }

    // init(buffering:replay:keepAlive:replayExpiration:clock:start:)
    @Test func clock() async throws {
        typealias Path = String  // (test only)
        let testClock = ManualClock()  // (test only)
        let monitor = StubMonitor<Path>()  // (test only)

        let paths = AsyncSharedSource<Path, Never>(keepAlive: .seconds(2), clock: testClock) { emitter in
            monitor.onUpdate = { emitter.send($0) }
            return { monitor.stop() }
        }

        let screen = await SubscriberTask.join { paths.makeAsyncIterator() }
        screen.request()
        await monitor.calls.wait(for: "onUpdate")
        monitor.report("wifi")
        #expect(await screen.answer() == "wifi")
        await screen.leave()
        #expect(await testClock.waitForSleepers(count: 1), "the keep-alive window is timed on the clock")
        #expect(!monitor.calls.lines.contains("stop"), "no time has passed")
        testClock.advance(by: .seconds(2))
        await monitor.calls.wait(for: "stop")
        #expect(monitor.calls.lines == ["onUpdate", "stop"])
    }
}
