/// A shared sequence or subject seen with a buffering policy of its own.
///
/// Each iterator is a subscriber of the same underlying shared iteration (or subject) whose
/// unconsumed elements are kept according to the view's policy instead of the default one.
/// Create it with `buffering(_:)` on ``AsyncShareSequence``, ``AsyncMulticastSequence``,
/// ``AsyncPassthroughSubject`` or ``AsyncCurrentValueSubject``.
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
    let connectsOnDemand: Bool

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy, connectsOnDemand: Bool = false) {
        self.storage = storage
        self.policy = policy
        self.connectsOnDemand = connectsOnDemand
    }

    /// Registers a new subscriber with this view's policy.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage, policy: self.policy, connectsOnDemand: self.connectsOnDemand)
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
}
