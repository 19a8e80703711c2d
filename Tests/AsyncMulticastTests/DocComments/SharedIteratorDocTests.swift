// Checks the doc-comment example of Sources/AsyncMulticast/SharedIterator.swift: the test
// contains it verbatim, with its own lines marked `// (test only)`, and checks what it
// prints (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SharedIterator", .timeLimit(.minutes(3)))
struct SharedIteratorDocTests {
    // SharedIterator
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let numbers = (1...3).async  // (test only)

        let shared = numbers.share()
        var iterator = shared.makeAsyncIterator()  // subscribed from here on
        while let n = await iterator.next() { print(n) }

        #expect(printed.lines == ["1", "2", "3"])
    }
}
