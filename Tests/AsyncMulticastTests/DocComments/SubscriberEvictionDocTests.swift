// Checks the doc-comment examples of Sources/AsyncMulticast/SubscriberEviction.swift: each
// test contains one verbatim, with its own lines marked `// (test only)`, and checks what the
// example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: SubscriberEviction", .timeLimit(.minutes(2)))
struct SubscriberEvictionDocTests {
    // SubscriberEviction
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let room = AsyncPassthroughSubject<String, Never>()
        let client = room.subscribe(buffering: .evicting(3))
        for n in 1...4 { room.send("message \(n)") }
        if let eviction = await client.waitForEviction() {
            print("evicted", eviction)  // evicted at its hard limit, holding 3 elements (high-water mark 3)
        }

        #expect(printed.lines == ["evicted at its hard limit, holding 3 elements (high-water mark 3)"])
    }

    // SubscriberEviction.Reason
    @Test func reason() {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let reason: SubscriberEviction.Reason = .softLimit
        print(reason)  // softLimit

        #expect(printed.lines == ["softLimit"])
    }

    // init(reason:backlog:highWaterMark:)
    @Test func initializer() {
        let eviction = SubscriberEviction(reason: .hardLimit, backlog: 4096, highWaterMark: 4096)

        #expect(eviction.reason == .hardLimit && eviction.backlog == 4096 && eviction.highWaterMark == 4096)
        #expect(
            "\(SubscriberEviction(reason: .softLimit, backlog: 1, highWaterMark: 2))"
                == "at its soft limit, holding 1 element (high-water mark 2)")
    }

    // SubscriberEvictedError.init(_:)
    @Test func errorInitializer() {
        let error = SubscriberEvictedError(SubscriberEviction(reason: .softLimit, backlog: 300, highWaterMark: 310))

        #expect(error.eviction.backlog == 300)
        #expect(
            error.description
                == "SubscriberEvictedError: evicted at its soft limit, holding 300 elements (high-water mark 310)")
    }
}
