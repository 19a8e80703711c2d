// share(by:): what a subscriber that joins a key receives, and how far a lossless subscriber
// lets the upstream run ahead. Between the upstream and a key's subscribers, an element is on
// its way in two places: the router's buffer (one element, the hub's `.bounded(1)`) and the
// router's hand (waiting for room in its key). A joiner may get those two, as a joiner of
// `share()` may get the one in its upstream's hand; never one the router sent before, nor an
// older one. The order comes from gates: the elements the upstream produced (its iterator
// returned them), the router parked in a key, the upstream task parked in the hub.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics: what a joining subscriber receives", .timeLimit(.minutes(2)))
struct SharedTopicsJoinTests {
    @Test(
        "a joiner of the key the router is held in gets the two elements on their way (the router's and its buffer's), not the one routed before"
    )
    func joinerGetsTheTwoElementsOnTheirWay() async throws {
        let fed = FedTopics()
        let slow = fed.topics.subscribe(to: 1, buffering: .bounded(1))  // not read yet
        // 1 fills `slow`; 3 is in the router's hand, waiting for room; 5 in the router's buffer;
        // 7 and 9 wait in the stream.
        try await fed.fillThePipeline([1, 3, 5], then: [7, 9], routerHeldBy: 1)
        let received = try await fed.join(1, thenYield: 11, releasing: slow)
        #expect(received == [3, 5, 7, 9, 11], "1 was routed before the join; 3 and 5 were on their way")
    }

    @Test("a joiner of another key than the one holding the router gets at most the element in the router's buffer")
    func joinerOfAnotherKeyGetsTheBufferedElement() async throws {
        let fed = FedTopics()
        let slow = fed.topics.subscribe(to: 0, buffering: .bounded(1))
        // 0 fills `slow`; 2 is in the router's hand; 1 (key 1, no subscriber yet) in its buffer.
        try await fed.fillThePipeline([0, 2, 1], then: [], routerHeldBy: 0)
        let received = try await fed.join(1, thenYield: 3, releasing: slow)
        #expect(received == [1, 3], "1 was on its way when key 1 was joined")
    }

    @Test(
        "a .bounded(n) subscriber that stops reading holds the upstream at n + 2 elements: its own, the router's, the router's buffer's",
        arguments: [1, 4])
    func boundedSubscriberHoldsTheUpstream(limit: Int) async throws {
        let fed = FedTopics()
        let stalled = fed.topics.subscribe(to: 0, buffering: .bounded(limit))
        let held = Array(stride(from: 0, to: 2 * (limit + 2), by: 2))
        let more = Array(stride(from: 2 * (limit + 2), to: 100, by: 2))
        try await fed.fillThePipeline(held, then: more, routerHeldBy: 0)
        fed.feed.finish()
        var received: [Int] = []
        for await n in stalled { received.append(n) }
        #expect(received == Array(stride(from: 0, to: 100, by: 2)), "then every element, in order")
    }
}

extension FedTopics {
    /// Yields `elements` then `more`, and waits until the upstream produced `elements` and
    /// both the router (in `key`'s subject) and the upstream task (in the hub) wait for
    /// room: `more` stays in the stream, not produced.
    fileprivate func fillThePipeline(_ elements: [Int], then more: [Int], routerHeldBy key: Int) async throws {
        for n in elements + more { self.feed.yield(n) }
        try await self.waitUntilHeld(after: elements, routerIn: key)
    }

    /// Joins `key` while the pipeline is held, yields `next`, lets `slow` read, and returns
    /// what the joiner received up to `next`; then ends the upstream.
    fileprivate func join(
        _ key: Int, thenYield next: Int, releasing slow: SharedSubscription<Int, Never>
    ) async throws -> [Int] {
        let joiner = self.topics.subscribe(to: key)
        let received = LockedLog<Int>()
        let reader = Task { for await n in joiner { received.append(n) } }
        self.feed.yield(next)  // produced after the join
        let slowReader = Task { for await _ in slow {} }
        try await waitUntil("\(next)") { received.values.contains(next) }
        let values = received.values
        self.feed.finish()
        await reader.value
        await slowReader.value
        return values
    }
}
