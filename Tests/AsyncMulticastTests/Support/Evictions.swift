import Testing

@testable import AsyncMulticast

extension SubscriberEviction {
    /// The eviction at a hard limit of `n`: a subscriber never holds more than its hard
    /// limit, so it held `n`, the most it ever held.
    static func hardLimit(_ n: Int) -> SubscriberEviction {
        SubscriberEviction(reason: .hardLimit, backlog: n, highWaterMark: n)
    }
}

extension SharedEvent {
    /// The eviction this event carries, if it is one.
    var eviction: SubscriberEviction? {
        if case .evicted(let eviction) = self { return eviction }
        return nil
    }
}

/// Starts `count` tasks waiting for `subscription`'s eviction; returns once the storage holds
/// all of them.
func startWatchers<Element: Sendable, Failure: Error>(
    _ count: Int, of subscription: SharedSubscription<Element, Failure>,
    storage: MulticastStorage<Element, Failure>, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Task<Bool, Never>] {
    let before = storage.evictionWatcherCount
    let watchers = (0..<count).map { _ in Task { await subscription.waitForEviction() != nil } }
    try await waitUntil("\(count) eviction watchers stored", sourceLocation: sourceLocation) {
        storage.evictionWatcherCount == before + count
    }
    return watchers
}

/// An `.evicting(limit)` subject with two subscriptions, `first` and `second` (subscribed in
/// that order), each with `watchers` tasks waiting for its eviction, all stored by the storage.
func evictingSubjectWithTwoWatchedSubscriptions(
    limit: Int, watchers: (first: Int, second: Int) = (1, 1), sourceLocation: SourceLocation = #_sourceLocation
) async throws -> (
    AsyncPassthroughSubject<Int, Never>,
    first: (SharedSubscription<Int, Never>, watchers: [Task<Bool, Never>]),
    second: (SharedSubscription<Int, Never>, watchers: [Task<Bool, Never>])
) {
    let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(limit))
    let first = subject.subscribe()
    let second = subject.subscribe()
    let firstWatchers = try await startWatchers(
        watchers.first, of: first, storage: subject.storage, sourceLocation: sourceLocation)
    let secondWatchers = try await startWatchers(
        watchers.second, of: second, storage: subject.storage, sourceLocation: sourceLocation)
    return (subject, (first, firstWatchers), (second, secondWatchers))
}

/// Moves `clock` past a soft limit's duration once its timer sleeps; checks that `client` is
/// told `expected` and that its `events` end with it.
func expectEvictedAtTheSoftDeadline(
    _ client: SharedSubscription<Int, Never>, events: inout SharedEventIterator<Int, Never>, clock: ManualClock,
    after duration: Duration, _ expected: SubscriberEviction, sourceLocation: SourceLocation = #_sourceLocation
) async {
    await clock.waitForSleepers(count: 1)
    clock.advance(by: duration)
    #expect(await client.waitForEviction() == expected, sourceLocation: sourceLocation)
    #expect(await events.next() == .evicted(expected), sourceLocation: sourceLocation)
    #expect(await events.next() == nil, sourceLocation: sourceLocation)
}
