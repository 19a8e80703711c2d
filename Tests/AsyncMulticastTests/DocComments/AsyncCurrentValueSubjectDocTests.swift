// Checks the doc-comment examples of Sources/AsyncMulticast/Subjects/AsyncCurrentValueSubject.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks
// the output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncCurrentValueSubject", .timeLimit(.minutes(3)))
struct AsyncCurrentValueSubjectDocTests {
    // AsyncCurrentValueSubject
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let count = AsyncCurrentValueSubject<Int, Never>(0)
        var screen = count.makeAsyncIterator()  // subscribed: it holds the current value, 0
        count.update { $0 + 1 }  // atomic read-modify-send
        count.finish()
        while let n = await screen.next() { print("count:", n) }  // count: 1 (it replaced the unread 0)

        #expect(printed.lines == ["count: 1"])
    }

    // update(_:)
    @Test func update() async {
        let followers = AsyncCurrentValueSubject<Int, Never>(3)  // (test only)
        var reader = followers.buffering(.unbounded).makeAsyncIterator()  // (test only)

        followers.update { $0 + 1 }

        #expect(followers.value == 4)
        followers.finish()
        var seen: [Int] = []
        while let n = await reader.next() { seen.append(n) }
        #expect(seen == [3, 4], "the new value is sent, not only stored")
    }
}
