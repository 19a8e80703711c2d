// Checks the doc-comment examples of Sources/AsyncMulticast/AsyncSubscribableSequence+Draining.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks what
// the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSubscribableSequence+Draining", .timeLimit(.minutes(3)))
struct AsyncSubscribableSequenceDrainingDocTests {
    // waitUntilDrained(within:)
    @Test func waitUntilDrained() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let (tickSource, ticker) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let ticks = tickSource.sharedService(replay: 3, buffering: .unbounded, started: .eagerly)  // (test only)
        let client = ticks.subscribe()  // (test only)
        let reading = Task { () -> [Int] in  // (test only) a client that reads every tick
            var received: [Int] = []  // (test only)
            for await tick in client { received.append(tick) }  // (test only)
            return received  // (test only)
        }  // (test only)
        let hosting = Task { await ticks.run() }  // (test only)
        for tick in 1...3 { ticker.yield(tick) }  // (test only)
        try await waitUntil("1, 2, 3 produced") { ticks.replayCache == [1, 2, 3] }  // (test only)

        hosting.cancel()  // the shared service's run() ends the upstream
        await hosting.value
        let drained = await ticks.waitUntilDrained(within: .seconds(5))
        print(drained ? "every client got every tick" : "\(ticks.subscriberCount) did not")

        #expect(printed.lines == ["every client got every tick"])
        #expect(await reading.value == [1, 2, 3])
    }

    // AsyncSubject.finish(drainingWithin:)
    @Test func subjectFinishDrainingWithin() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let room = AsyncPassthroughSubject<String, Never>()
        let client = room.subscribe()  // a connected client
        room.send("last words")
        let reading = Task { for await line in client { print(line) } }
        let drained = await room.finish(drainingWithin: .seconds(5))
        print("drained:", drained)  // last words, then drained: true

        #expect(printed.lines == ["last words", "drained: true"])
        await reading.value  // (test only)
    }

    // AsyncSharedSource.finish(drainingWithin:)
    @Test func sourceFinishDrainingWithin() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let started = Signal<AsyncSharedSource<String, Never>.Emitter>()  // (test only)
        let stopped = Signal<Void>()  // (test only)
        let paths = AsyncSharedSource<String, Never> { emitter in  // (test only)
            started.send(emitter)  // (test only)
            return { stopped.send(()) }  // (test only)
        }  // (test only)

        let reading = Task { for await path in paths { print(path) } }
        let emitter = await started.next("the session started")  // [test gate] the reader's demand started it
        emitter?.send("wifi")  // (test only)
        await printed.wait(for: "wifi")  // [test gate]
        emitter?.send("cellular")  // (test only) sent, not read yet
        // ... at shutdown: the session stops; the reader gets what was sent, then the end
        let drained = await paths.finish(drainingWithin: .seconds(5))
        print("drained:", drained)  // drained: true

        #expect(printed.lines == ["wifi", "cellular", "drained: true"])
        #expect(await stopped.next("stop called") != nil)
        await reading.value  // (test only)
    }
}
