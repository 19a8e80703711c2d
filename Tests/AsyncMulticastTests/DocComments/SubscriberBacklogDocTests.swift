// Checks the doc-comment examples of Sources/AsyncMulticast/SubscriberBacklog.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SubscriberBacklog", .timeLimit(.minutes(3)))
struct SubscriberBacklogDocTests {
    // SubscriberBacklog
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let feed = AsyncPassthroughSubject<Int, Never>()
        let client = feed.subscribe(buffering: .evicting(100))
        for n in 1...30 { feed.send(n) }
        print(client.backlog!)  // SubscriberBacklog(count: 30, highWaterMark: 30)

        #expect(printed.lines == ["SubscriberBacklog(count: 30, highWaterMark: 30)"])
        var reader = client.makeAsyncIterator()  // (test only) what it holds falls as it reads...
        for n in 1...20 { #expect(await reader.next() == n) }  // (test only)
        let now = client.backlog!  // (test only)
        #expect(now.highWaterMark == 30, "...and the most it held stays")
        #expect(now.count <= 10, "the iterator's batch is handed over, not held")
    }
}
