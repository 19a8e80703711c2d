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
public struct AsyncSharedView<Element: Sendable, Failure: Error>: AsyncSubscribableSequence {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// `core` carries the view's policy.
    @inlinable
    init(_ core: _SharedCore<Element, Failure>) {
        precondition(core.policy != nil, "a view has a policy of its own")
        self._core = core
    }

    /// The buffering policy of this view's subscribers.
    ///
    /// ```swift
    /// let logs = events.buffering(.bufferingNewest(100))
    /// print(logs.policy)   // bufferingNewest(100)
    /// ```
    @inlinable
    public var policy: SharedBufferingPolicy {
        self._core.policy ?? .unbounded
    }
}
