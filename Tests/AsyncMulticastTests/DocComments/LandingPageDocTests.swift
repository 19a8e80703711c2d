// Checks the example of the documentation catalog's landing page,
// Sources/AsyncMulticast/AsyncMulticast.docc/AsyncMulticast.md: the test contains it verbatim,
// with its own lines marked `// (test only)`, and checks what the page says of it
// (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncMulticast.docc", .timeLimit(.minutes(3)))
struct LandingPageDocTests {
    // AsyncMulticast.md: Overview
    @Test func overview() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let (readings, continuation) = AsyncStream.makeStream(of: Double.self)
        let shared = readings.share()
        let display = Task { for await r in shared { print("display:", r) } }
        let logger = Task { for await r in shared { print("logger:", r) } }

        try await shared.waitForSubscribers(atLeast: 2)
        continuation.yield(20.5)
        continuation.yield(21.0)
        display.cancel()  // leaves on its own: the logger goes on
        await display.value
        continuation.yield(21.5)
        continuation.finish()
        await logger.value
        #expect(printed.lines(startingWith: "logger:") == ["logger: 20.5", "logger: 21.0", "logger: 21.5"])
        let shown = printed.lines(startingWith: "display:")
        #expect(["display: 20.5", "display: 21.0"].starts(with: shown), "what it took before it left")
    }
}
