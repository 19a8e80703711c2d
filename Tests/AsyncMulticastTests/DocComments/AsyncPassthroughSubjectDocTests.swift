// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncPassthroughSubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncPassthroughSubject", .timeLimit(.minutes(3)))
struct AsyncPassthroughSubjectDocTests {
    // AsyncPassthroughSubject
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let events = AsyncPassthroughSubject<String, Never>()
        var listener = events.makeAsyncIterator()  // subscribed from here on
        events.send("hello")
        events.send("world")
        events.finish()
        while let e = await listener.next() { print("got", e) }  // got hello, got world

        #expect(printed.lines == ["got hello", "got world"])
    }
}
