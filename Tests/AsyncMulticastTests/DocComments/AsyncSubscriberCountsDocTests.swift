// Checks the doc-comment example of Sources/AsyncMulticast/AsyncSubscriberCounts.swift: the
// test contains it verbatim, with its own lines marked `// (test only)`, and checks what it
// prints (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSubscriberCounts", .timeLimit(.minutes(3)))
struct AsyncSubscriberCountsDocTests {
    // AsyncSubscriberCounts
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let (locationUpdates, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let started = StartedTasks()  // (test only)
        // swift-format-ignore: AlwaysUseLowerCamelCase
        // (test only) Shadows `Task` so that the test can cancel the example's endless tasks.
        func Task(_ operation: @escaping @Sendable () async -> Void) { started.start(operation) }  // (test only)

        let location = locationUpdates.share()
        Task {
            for await count in location.subscriberCounts {
                print("screens showing the location: \(count)")
            }
        }

        // Each change waits until the observer has shown the previous count.
        await printed.wait(for: "screens showing the location: 0")
        let screen = await SubscriberTask.join { location.makeAsyncIterator() }
        await printed.wait(for: "screens showing the location: 1")
        await screen.leave()
        await printed.wait { $0.count == 3 }
        #expect(
            printed.lines == [
                "screens showing the location: 0",
                "screens showing the location: 1",
                "screens showing the location: 0",
            ])
        await started.cancelAll()
        continuation.finish()
    }
}
