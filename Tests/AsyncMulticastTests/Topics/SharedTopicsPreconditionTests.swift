// AsyncSharedTopics (`share(by:)`): bad input stops the process with a message naming the
// parameter and the value. Exit tests run their body in a child process; the body cannot
// capture anything.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics preconditions")
struct SharedTopicsPreconditionTests {
    @Test("a negative replay names replay and its value")
    func negativeReplay() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncStream<Int> { _ in }.share(by: { $0 }, replay: -3)
        }
        expectMessage(result, contains: "share(by:replay:): replay must be at least 0, got -3")
    }

    @Test("a negative keep-alive names keepAlive and its value")
    func negativeKeepAlive() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncStream<Int> { _ in }.share(by: { $0 }, keepAlive: .seconds(-2))
        }
        expectMessage(result, contains: "share(by:keepAlive:): keepAlive must not be negative, got -2.0 seconds")
    }

    @Test("an invalid policy names buffering and the policy")
    func invalidPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncStream<Int> { _ in }.share(by: { $0 }, buffering: .bounded(0))
        }
        expectMessage(result, contains: "buffering: .bounded(0) needs a limit of at least 1")
    }

    @Test("an invalid policy of a subscriber names subscribe(to:buffering:) and the policy")
    func invalidSubscriberPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncStream<Int> { _ in }.share(by: { $0 }).subscribe(to: 1, buffering: .evicting(0))
        }
        expectMessage(result, contains: "subscribe(to:buffering:): .evicting(0) needs a limit of at least 1")
    }
}
