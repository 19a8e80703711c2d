// Checks README.md: its one compiled example, Quick start.
//
// The test carries a `// README.md: <section>` comment and contains the example verbatim,
// followed by test-only lines (marked) that feed the source and end it. The README shows no
// output block; the test checks what the text promises: each loop receives every element
// produced after it joined. `print` is a local function of the test that records the line in
// the test's own `PrintedLines` (the per-example way of PrintedLines.swift); each loop's lines
// are compared on their own, since the two loops run concurrently.

import AsyncMulticast
import Testing

@Suite("README.md", .timeLimit(.minutes(3)))
struct ReadmeTests {
    // README.md: Quick start
    @Test func quickStart() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        // One source, for example readings pushed by a sensor callback.
        let (readings, continuation) = AsyncStream.makeStream(of: Double.self)

        // Share it: create the shared sequence once and keep it.
        let shared = readings.share()

        // Each `for await` loop is one subscriber. It receives every element produced
        // after it joined, whatever the other subscribers do.
        let display = Task { for await r in shared { print("display:", r) } }
        let logger = Task { for await r in shared { print("logger:", r) } }

        // (Test only.) Once both loops have joined, both get everything.
        while shared.subscriberCount < 2 { await Task.yield() }
        continuation.yield(21.5)
        continuation.yield(21.7)
        continuation.finish()
        await display.value
        await logger.value
        let lines = await printed.lines(waitingFor: 4)
        #expect(lines.filter { $0.hasPrefix("display:") } == ["display: 21.5", "display: 21.7"])
        #expect(lines.filter { $0.hasPrefix("logger:") } == ["logger: 21.5", "logger: 21.7"])
    }
}
