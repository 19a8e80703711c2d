// Checks the doc-comment example of Sources/AsyncMulticast/Multicast/MulticastConnection.swift:
// the test contains it verbatim, with its own lines marked `// (test only)`, and checks what
// it states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: MulticastConnection", .timeLimit(.minutes(3)))
struct MulticastConnectionDocTests {
    // MulticastConnection
    @Test func theType() async throws {
        let (feed, exchange) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let upstream = TerminationRecorder()  // (test only)
        upstream.attach(to: exchange)  // (test only)
        let multicast = feed.multicast()  // (test only)
        var reader = multicast.makeAsyncIterator()  // (test only)

        let connection = multicast.connect()
        exchange.yield(1)  // (test only)
        #expect(await reader.next() == 1)  // (test only)
        connection.cancel()  // stops the upstream; subscribers get what is buffered, then nil

        #expect(try await upstream.waitForTermination() == [.cancelled])
        #expect(await reader.next() == nil)
    }
}
