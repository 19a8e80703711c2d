// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncReplaySubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncReplaySubject", .timeLimit(.minutes(3)))
struct AsyncReplaySubjectDocTests {
    // AsyncReplaySubject, then replayCache, which continues it
    @Test func theTypeAndReplayCache() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let messages = AsyncReplaySubject<String, Never>(replay: 2)
        messages.send("a")
        messages.send("b")
        messages.send("c")
        messages.finish()
        for await m in messages { print(m) }  // b, c: the cache, then the end

        #expect(printed.lines == ["b", "c"])

        let recent = messages.replayCache  // ["b", "c"]

        #expect(recent == ["b", "c"])
    }
}
