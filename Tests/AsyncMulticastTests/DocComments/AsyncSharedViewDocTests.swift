// Checks the doc-comment examples of Sources/AsyncMulticast/AsyncSharedView.swift: each test
// contains one verbatim, with its own lines marked `// (test only)`, and checks the output the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSharedView", .timeLimit(.minutes(3)))
struct AsyncSharedViewDocTests {
    // AsyncSharedView
    @Test func theType() async throws {
        typealias Event = String  // (test only)
        let ui = StubSink()  // (test only)
        let logger = StubSink()  // (test only)

        let events = AsyncPassthroughSubject<Event, Never>()  // .unbounded by default
        Task { for await e in events { ui.apply(e) } }  // the UI may not drop
        Task { for await e in events.buffering(.bufferingNewest(100)) { logger.log(e) } }

        try await events.waitForSubscribers(atLeast: 2)
        for e in ["tap", "scroll", "tap"] { events.send(e) }
        events.finish()
        #expect(await ui.received.lines(waitingFor: 3) == ["tap", "scroll", "tap"])
        #expect(await logger.received.lines(waitingFor: 3) == ["tap", "scroll", "tap"])
    }

    // policy
    @Test func policy() {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let events = AsyncPassthroughSubject<String, Never>()  // (test only)

        let logs = events.buffering(.bufferingNewest(100))
        print(logs.policy)  // bufferingNewest(100)

        #expect(printed.lines == ["bufferingNewest(100)"])
    }
}
