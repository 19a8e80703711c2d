// Topics of one upstream for the tests of what a subscriber receives while the router is held:
// a stream the test feeds, shared by parity, recording what the upstream produced, with a gate
// that waits until the router and the upstream task both wait for room.

import Testing

@testable import AsyncMulticast

/// Topics of a fed stream by parity (`share(by: { $0 % 2 })`), recording what the upstream
/// produced (`pulled`).
struct FedTopics {
    let feed: AsyncStream<Int>.Continuation
    let pulled = LockedLog<Int>()
    let topics: AsyncSharedTopics<Int, Int, Never>

    init(replay: Int = 0, keepAlive: Duration = .zero) {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        self.feed = feed
        self.topics = HookedStream(stream, pulled: { [pulled = self.pulled] in pulled.append($0) })
            .share(by: { $0 % 2 }, replay: replay, keepAlive: keepAlive)
    }

    var hub: MulticastStorage<Int, Never> { self.topics.topics.session!.hub }

    /// Waits until the upstream produced exactly `elements`, the router waits for room in
    /// `key` and the upstream task waits for room in the hub.
    func waitUntilHeld(after elements: [Int], routerIn key: Int) async throws {
        try await waitUntil("the upstream to produce \(elements)") { self.pulled.values == elements }
        try await waitUntil("the router waiting for room in key \(key)") {
            self.topics.topics.subject(of: key)?.producersWaitingForRoom == 1
        }
        try await waitUntil("the upstream task waiting for room in the hub") {
            self.hub.producersWaitingForRoom == 1
        }
        #expect(self.pulled.values == elements, "nothing more produced while everything waits for room")
    }
}
