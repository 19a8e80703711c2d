// Checks the doc-comment examples of Sources/AsyncMulticast/Share/AsyncSharedSource.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// what the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSharedSource", .timeLimit(.minutes(1)))
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

    // replayCache
    @Test func replayCache() async throws {
        let emitters = Signal<AsyncSharedSource<String, Never>.Emitter>()  // (test only)
        let paths = AsyncSharedSource<String, Never>(replay: 1) { emitter in  // (test only)
            emitters.send(emitter)  // (test only)
            return {}  // (test only)
        }  // (test only)
        let screen = await SubscriberTask.join { paths.makeAsyncIterator() }  // (test only)
        screen.request()  // (test only)
        try #require(await emitters.next("the session starting")).send("wifi")  // (test only)
        #expect(await screen.answer() == "wifi")  // (test only)

        let lastPath = paths.replayCache.last

        #expect(lastPath == "wifi")
        await screen.leave()
    }

    // resetReplayCache()
    @Test func resetReplayCache() async throws {
        let emitters = Signal<AsyncSharedSource<String, Never>.Emitter>()  // (test only)
        let paths = AsyncSharedSource<String, Never>(replay: 1) { emitter in  // (test only)
            emitters.send(emitter)  // (test only)
            return {}  // (test only)
        }  // (test only)
        let screen = await SubscriberTask.join { paths.makeAsyncIterator() }  // (test only)
        screen.request()  // (test only)
        let emitter = try #require(await emitters.next("the session starting"))  // (test only)
        emitter.send("wifi")  // (test only)
        #expect(await screen.answer() == "wifi")  // (test only)

        paths.resetReplayCache()

        #expect(paths.replayCache.isEmpty)
        let late = await SubscriberTask.join { paths.makeAsyncIterator() }
        emitter.send("cellular")
        #expect(await late.next() == "cellular", "not the wifi sent before the reset")
        await late.leave()
        await screen.leave()
    }

    // events(buffering:)
    @Test @MainActor func events() async throws {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let emitters = Signal<AsyncSharedSource<Int, Never>.Emitter>()  // (test only)
        let feed = AsyncSharedSource<Int, Never> { emitter in  // (test only)
            emitters.send(emitter)  // (test only)
            return {}  // (test only)
        }  // (test only)
        // The loop runs on the main actor, as this test does: it cannot take an element
        // while the test sends, so what it misses is known.
        let client = Task {  // (test only)
            for await event in feed.events(buffering: .bufferingNewest(16)) {
                if case .missed(let count) = event { print("this client missed \(count)") }
            }
        }  // (test only)

        // Its first wait started the session: the client waits in `next()`.
        let emitter = try #require(await emitters.next("the session starting"))
        for n in 1...40 { emitter.send(n) }
        emitter.finish()
        await client.value

        // 1 is handed to the waiting client; of 2...40 it keeps the newest 16, 25...40.
        #expect(printed.lines == ["this client missed 23"])
    }

    // subscriberCounts
    @Test func subscriberCounts() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let feed = AsyncSharedSource<Int, Never> { _ in {} }  // (test only)
        let observer = Task {  // (test only)
            for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
        }  // (test only)

        await printed.wait(for: "nobody listens")
        observer.cancel()
        await observer.value
        #expect(printed.lines == ["nobody listens"])
    }

    // waitForSubscribers(atLeast:)
    @Test func waitForSubscribers() async throws {
        let used = PrintedLines()  // (test only)
        @Sendable func use(_ path: String) { used.record([path]) }  // (test only)
        let emitters = Signal<AsyncSharedSource<String, Never>.Emitter>()  // (test only)
        let paths = AsyncSharedSource<String, Never> { emitter in  // (test only)
            emitters.send(emitter)  // (test only)
            return {}  // (test only)
        }  // (test only)

        let tasks = (0..<3).map { _ in Task { for await path in paths { use(path) } } }
        try await paths.waitForSubscribers(atLeast: 3)  // each receives every path sent from now on

        let emitter = try #require(await emitters.next("the session starting"))
        emitter.send("wifi")
        emitter.finish()
        for task in tasks { await task.value }
        #expect(used.lines == ["wifi", "wifi", "wifi"])
    }
}
