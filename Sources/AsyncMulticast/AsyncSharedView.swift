/// A shared sequence or subject seen with a buffering policy of its own.
///
/// Each iterator is a subscriber of the same underlying shared iteration (or subject) whose
/// unconsumed elements are kept according to the view's policy instead of the default one.
/// Create it with `buffering(_:)` on ``AsyncShareSequence``, ``AsyncMulticastSequence``,
/// ``AsyncSharedSource``, ``AsyncPassthroughSubject``, ``AsyncCurrentValueSubject`` or
/// ``AsyncReplaySubject``.
///
/// ```swift
/// let events = AsyncPassthroughSubject<Event, Never>()          // .unbounded by default
/// Task { for await e in events { ui.apply(e) } }                  // the UI may not drop
/// Task { for await e in events.buffering(.bufferingNewest(100)) { logger.log(e) } }
/// ```
public struct AsyncSharedView<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    @usableFromInline
    let storage: MulticastStorage<Element, Failure>
    /// The buffering policy of this view's subscribers.
    public let policy: SharedBufferingPolicy
    @usableFromInline
    let connectRule: ConnectRule

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy, connectRule: ConnectRule = .never)
    {
        self.storage = storage
        self.policy = policy
        self.connectRule = connectRule
    }

    /// Registers a new subscriber with this view's policy.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage, policy: self.policy, connectRule: self.connectRule)
    }

    /// The number of subscribers currently registered with the underlying sequence or
    /// subject, whatever their policy: the same number its own `subscriberCount` gives.
    ///
    /// ```swift
    /// let logs = events.buffering(.bufferingNewest(100))
    /// var logger = logs.makeAsyncIterator()
    /// print(logs.subscriberCount == events.subscriberCount)   // true
    /// ```
    @inlinable
    public var subscriberCount: Int {
        self.storage.subscriberCount
    }

    /// Iterates this view as a lag-reporting subscriber with the view's policy; see
    /// ``AsyncSharedEvents``.
    ///
    /// ```swift
    /// for await event in feed.buffering(.bufferingOldest(8)).events() { print(event) }
    /// ```
    @inlinable
    public func events() -> AsyncSharedEvents<Element, Failure> {
        AsyncSharedEvents(storage: self.storage, policy: self.policy, connectRule: self.connectRule)
    }

    /// The number of subscribers of the underlying sequence or subject, as it changes; see
    /// ``AsyncSubscriberCounts``.
    @inlinable
    public var subscriberCounts: AsyncSubscriberCounts {
        AsyncSubscriberCounts(storage: self.storage)
    }

    /// Returns once the underlying sequence or subject has at least `count` subscribers;
    /// throws `CancellationError` if the task is cancelled first.
    @inlinable
    public func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        try await self.storage.waitForSubscribers(atLeast: count)
    }
}
