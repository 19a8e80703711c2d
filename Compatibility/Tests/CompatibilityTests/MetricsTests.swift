// MulticastMetrics with swift-metrics' own test factory (MetricsTestKit's TestMetrics), passed
// to each `SharedSequenceMetrics` rather than bootstrapped, so that the tests share no global
// state: evictions counted by reason with their high-water marks, missed elements from lag
// reports, sampled backlogs, and the subscriber gauge following the count (an eviction is a
// leave at once).

import AsyncMulticast
import CoreMetrics
import MetricsTestKit
import MulticastMetrics
import Testing

@Suite("MulticastMetrics: swift-metrics gauges, counters and recorders", .timeLimit(.minutes(2)))
struct MetricsTests {
    @Test("evictions are counted by reason, with each one's high-water mark recorded")
    func evictionsByReason() async throws {
        let factory = TestMetrics()
        let metrics = SharedSequenceMetrics(label: "chat", dimensions: [("room", "lobby")], factory: factory)
        let room = AsyncPassthroughSubject<String, Never>(
            buffering: .evicting(4, softLimit: .above(2, for: .zero)))
        // The soft limit of zero duration evicts at the third element held; a hard limit of
        // 2 on a view evicts at the third too, for the other reason.
        let soft = room.subscribe()
        let hard = room.subscribe(buffering: .evicting(2))
        for n in 1...3 { room.send("message \(n)") }
        let watchers = [soft, hard].map { client in
            Task {
                if let eviction = await client.waitForEviction() {
                    metrics.recordEviction(eviction)  // chat_evictions_total{room="lobby",reason="hardLimit"} + 1
                }
            }
        }
        for watcher in watchers { await watcher.value }

        let lobby = [("room", "lobby")]
        #expect(try factory.expectCounter("chat_evictions_total", lobby + [("reason", "softLimit")]).totalValue == 1)
        #expect(try factory.expectCounter("chat_evictions_total", lobby + [("reason", "hardLimit")]).totalValue == 1)
        let marks = try factory.expectRecorder("chat_backlog_high_water_mark", lobby).values.sorted()
        #expect(marks == [2, 3], "the hard-limited one held 2, the soft-limited one 3")
    }

    @Test("lag reports count what was missed; record(_:) sorts events, elements count nothing")
    func missedElements() async throws {
        let factory = TestMetrics()
        let metrics = SharedSequenceMetrics(label: "prices", dimensions: [("symbol", "AAPL")], factory: factory)
        let prices = AsyncPassthroughSubject<Int, Never>()
        var slow = prices.events(buffering: .bufferingNewest(2)).makeAsyncIterator()
        var evicting = prices.events(buffering: .evicting(3)).makeAsyncIterator()
        for price in 1...6 { prices.send(price) }
        prices.finish()
        var events: [SharedEvent<Int>] = []
        while let event = await slow.next() {
            metrics.record(event)
            events.append(event)
        }
        #expect(events == [.missed(4), .element(5), .element(6)])
        while let event = await evicting.next() { metrics.record(event) }

        let symbol = [("symbol", "AAPL")]
        #expect(try factory.expectCounter("prices_missed_elements_total", symbol).totalValue == 4)
        #expect(try factory.expectCounter("prices_evictions_total", symbol + [("reason", "hardLimit")]).totalValue == 1)
        #expect(try factory.expectRecorder("prices_backlog_high_water_mark", symbol).values == [3])
    }

    @Test("a sampled backlog records its high-water mark")
    func sampledBacklog() async throws {
        let factory = TestMetrics()
        let metrics = SharedSequenceMetrics(label: "feed", factory: factory)
        let feed = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(100))
        let client = feed.subscribe()
        for n in 1...30 { feed.send(n) }
        if let backlog = client.backlog { metrics.recordBacklog(backlog) }
        #expect(try factory.expectRecorder("feed_backlog_high_water_mark").values == [30])
    }

    @Test("the subscriber gauge follows the count, and an eviction lowers it at once")
    func subscriberGauge() async throws {
        let factory = TestMetrics()
        let metrics = SharedSequenceMetrics(label: "room", factory: factory)
        let room = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let tracking = Task { await metrics.trackSubscribers(of: room) }  // until the task is cancelled
        defer { tracking.cancel() }
        let gauge = { @Sendable () -> Double? in (try? factory.expectMeter("room_subscribers"))?.lastValue }
        await waitUntil("the gauge shows no subscriber") { gauge() == 0 }
        let stalled = room.subscribe()
        var reader = room.makeAsyncIterator()
        await waitUntil("the gauge shows two subscribers") { gauge() == 2 }
        room.send(1)
        #expect(await reader.next() == 1)
        room.send(2)  // the stalled one would hold 2 > 1: evicted
        await waitUntil("the gauge shows the eviction") { gauge() == 1 }
        #expect(await stalled.waitForEviction() == SubscriberEviction(reason: .hardLimit, backlog: 1, highWaterMark: 1))
        tracking.cancel()
        await tracking.value
    }

    @Test("the label must not be empty")
    func labelMustNotBeEmpty() async {
        await #expect(processExitsWith: .failure) {
            _ = SharedSequenceMetrics(label: "", factory: TestMetrics())
        }
    }

    @Test("a dimension named reason is refused: the evictions counter has its own")
    func reasonIsTaken() async {
        await #expect(processExitsWith: .failure) {
            _ = SharedSequenceMetrics(label: "feed", dimensions: [("reason", "mine")], factory: TestMetrics())
        }
    }
}

/// Guides/ServingClients.md, "Metrics": the guide's example as written, with the metrics
/// system bootstrapped to swift-metrics' test factory, the one bootstrap of this process.
@Suite("Guides/ServingClients.md: Metrics", .timeLimit(.minutes(2)))
struct MetricsGuideTests {
    @Test func metricsSection() async throws {
        let factory = TestMetrics()
        MetricsSystem.bootstrap(factory)

        let metrics = SharedSequenceMetrics(label: "chat", dimensions: [("room", "lobby")])
        let room = AsyncPassthroughSubject<String, Never>(buffering: .evicting(3))  // small, to show an eviction
        let tracking = Task { await metrics.trackSubscribers(of: room) }  // chat_subscribers{room="lobby"}
        let client = room.subscribe()
        for n in 1...4 { room.send("message \(n)") }
        if let eviction = await client.waitForEviction() {
            metrics.recordEviction(eviction)  // chat_evictions_total{room="lobby",reason="hardLimit"} 1
        }
        tracking.cancel()

        await tracking.value
        let lobby = [("room", "lobby")]
        #expect(try factory.expectCounter("chat_evictions_total", lobby + [("reason", "hardLimit")]).totalValue == 1)
        #expect(try factory.expectRecorder("chat_backlog_high_water_mark", lobby).values == [3])
    }
}
