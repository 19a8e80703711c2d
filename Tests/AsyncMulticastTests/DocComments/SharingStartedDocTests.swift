// Checks the doc-comment examples of Sources/AsyncMulticast/SharingStarted.swift: each test
// contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharingStarted", .timeLimit(.minutes(3)))
struct SharingStartedDocTests {
    // SharingStarted, and sharedService(replay:buffering:started:)
    @Test func theType() async throws {
        let source = FedSource()  // (test only)
        let feed = source  // (test only)

        let prices = feed.sharedService(replay: 1, started: .whileSubscribed(keepAlive: .seconds(5)))

        #expect(prices.started == .whileSubscribed(keepAlive: .seconds(5), replayExpiration: .zero))
        #expect(source.control.iteratorCount == 0, "nothing runs before run() and a subscriber")
    }

    // eagerly
    @Test func eagerly() async throws {
        let source = FedSource()  // (test only)
        let configUpdates = source  // (test only)

        let config = configUpdates.sharedService(replay: 1, started: .eagerly)

        let hosting = Task { await config.run() }  // (test only)
        await source.control.waitForStart(of: 0)  // (test only) started by run(), nobody subscribed
        source.control.yield(42)  // (test only)
        try await waitUntil("the replay holds 42") { config.replayCache == [42] }  // (test only)
        hosting.cancel()  // (test only)
        await hosting.value  // (test only)
    }

    // lazily
    @Test func lazily() async throws {
        let source = FedSource()  // (test only)
        let catalogLoads = source  // (test only)

        let catalog = catalogLoads.sharedService(replay: 1, started: .lazily)

        let hosting = Task { await catalog.run() }  // (test only)
        await source.oneSubscriberReadsTheFirstElement(of: catalog)  // (test only)
        try await waitUntil("nobody subscribes") { catalog.subscriberCount == 0 }  // (test only)
        await letOthersRun()  // (test only)
        #expect(source.control.end(of: 0) == nil, "still running")
        hosting.cancel()  // (test only)
        await hosting.value  // (test only)
    }

    // whileSubscribed(keepAlive:replayExpiration:)
    @Test func whileSubscribed() async throws {
        let source = FedSource()  // (test only)
        let locationUpdates = source  // (test only)

        let location = locationUpdates.sharedService(started: .whileSubscribed(keepAlive: .seconds(5)))

        #expect("\(location.started)" == "whileSubscribed(keepAlive: 5.0 seconds, replayExpiration: 0.0 seconds)")
    }
}
