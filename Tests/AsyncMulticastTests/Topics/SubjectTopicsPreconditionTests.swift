// AsyncSubjectTopics: bad input stops the process with a message naming the parameter and
// the value. Exit tests run their body in a child process; the body cannot capture anything.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSubjectTopics preconditions")
struct SubjectTopicsPreconditionTests {
    @Test("a negative replay names replay and its value")
    func negativeReplay() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncSubjectTopics<String, Int, Never>(replay: -3)
        }
        expectMessage(result, contains: "AsyncSubjectTopics(replay:): replay must be at least 0, got -3")
    }

    @Test("a negative keep-alive names keepAlive and its value")
    func negativeKeepAlive() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncSubjectTopics<String, Int, Never>(keepAlive: .seconds(-2))
        }
        expectMessage(
            result, contains: "AsyncSubjectTopics(keepAlive:): keepAlive must not be negative, got -2.0 seconds")
    }

    @Test("an invalid policy of the topics names buffering and the policy")
    func invalidTopicsPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncSubjectTopics<String, Int, Never>(replay: 1, buffering: .bounded(0))
        }
        expectMessage(result, contains: "buffering: .bounded(0) needs a limit of at least 1")
    }

    @Test("an invalid policy of a subscriber names subscribe(to:buffering:) and the policy")
    func invalidSubscriberPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncSubjectTopics<String, Int, Never>().subscribe(to: "a", buffering: .evicting(0))
        }
        expectMessage(result, contains: "subscribe(to:buffering:): .evicting(0) needs a limit of at least 1")
    }
}
