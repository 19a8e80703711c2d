/// What a lag-reporting subscriber receives: the elements, and where and how many it missed.
///
/// Iterate `events(buffering:)` instead of the sequence itself to learn what a lossy policy
/// (``SharedBufferingPolicy/bufferingNewest(_:)``, ``SharedBufferingPolicy/bufferingOldest(_:)``)
/// dropped for this subscriber, and whether an ``SharedBufferingPolicy/evicting(_:softLimit:)`` policy
/// evicted it. Like tokio's `Lagged(n)`: the count arrives exactly where the gap is, between
/// the last element before it and the first one after it. Returning `.missed` takes nothing
/// from the subscriber's buffer, so the element after the gap may still be dropped (and the
/// next event is another `.missed`): the subscriber never holds more than its limit.
///
/// ```swift
/// for await event in prices.events(buffering: .bufferingNewest(8)) {
///     switch event {
///     case .element(let price): show(price)
///     case .missed(let count): print("skipped \(count) stale prices")
///     case .evicted(let eviction): print("evicted", eviction)   // only with .evicting; the last event
///     }
/// }
/// ```
public enum SharedEvent<Element: Sendable>: Sendable {
    /// The next element this subscriber receives.
    case element(Element)
    /// This subscriber's policy dropped this many elements here: after the previous event's
    /// element and before the next one (or before the end).
    case missed(Int)
    /// This subscriber held more elements than a limit of its
    /// ``SharedBufferingPolicy/evicting(_:softLimit:)`` policy allows, and was evicted: which
    /// limit, and how far behind it was. Its last event: the iteration ends after it.
    case evicted(SubscriberEviction)
}

extension SharedEvent: Equatable where Element: Equatable {}
extension SharedEvent: Hashable where Element: Hashable {}

/// The error that ends the iteration of a subscriber evicted by an
/// ``SharedBufferingPolicy/evicting(_:softLimit:)`` policy, when the sequence's `Failure` can hold it
/// (`any Error`). Where it cannot (`Never`, or a concrete error type) the iteration returns
/// `nil`; `events(buffering:)` reports ``SharedEvent/evicted(_:)`` whatever the `Failure`.
/// It carries the ``SubscriberEviction``: which limit, and how far behind the subscriber was.
///
/// ```swift
/// do {
///     for try await line in feed.buffering(.evicting(100)) { try await client.send(line) }
/// } catch let error as SubscriberEvictedError {
///     await client.close(reason: "too slow, evicted \(error.eviction)")
/// }
/// ```
public struct SubscriberEvictedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the subscriber was evicted, and what it held.
    public let eviction: SubscriberEviction

    /// The error of `eviction`. The library creates it; a test of code that handles it may too.
    ///
    /// ```swift
    /// let error = SubscriberEvictedError(SubscriberEviction(reason: .softLimit, backlog: 300, highWaterMark: 310))
    /// ```
    @inlinable
    public init(_ eviction: SubscriberEviction) {
        self.eviction = eviction
    }

    /// One line for a log: `SubscriberEvictedError: evicted at its hard limit, holding 100
    /// elements (high-water mark 100)`.
    public var description: String {
        "SubscriberEvictedError: evicted \(self.eviction)"
    }
}

/// A shared sequence or subject seen through a lag-reporting subscriber: each iterator is
/// a subscriber with the view's policy, and yields ``SharedEvent``s.
///
/// Create it with `events(buffering:)` on any shared sequence or subject, or `events()` on
/// an ``AsyncSharedView``.
///
/// ```swift
/// let ticks = AsyncPassthroughSubject<Int, Never>()
/// var slow = ticks.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
/// ticks.send(1)
/// ticks.send(2)
/// ticks.send(3)
/// print(await slow.next()!)   // missed(2)
/// print(await slow.next()!)   // element(3)
/// ```
public struct AsyncSharedEvents<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = SharedEventIterator<Element, Failure>

    @usableFromInline
    let storage: MulticastStorage<Element, Failure>
    /// The buffering policy of this view's subscribers; `nil`: the sequence's own.
    public let policy: SharedBufferingPolicy?
    @usableFromInline
    let connectRule: ConnectRule

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy?, connectRule: ConnectRule = .never)
    {
        self.storage = storage
        self.policy = policy
        self.connectRule = connectRule
    }

    /// Registers a new lag-reporting subscriber.
    @inlinable
    public func makeAsyncIterator() -> SharedEventIterator<Element, Failure> {
        SharedEventIterator(storage: self.storage, policy: self.policy, connectRule: self.connectRule)
    }
}

/// An iterator over ``AsyncSharedEvents``. **Each iterator is one subscriber**, with the
/// lifetime rules of ``SharedIterator``: it leaves when its task is cancelled, when it has
/// returned `nil` or thrown, or when it is released.
///
/// ```swift
/// var events = subject.events(buffering: .evicting(64)).makeAsyncIterator()
/// while let event = await events.next() { handle(event) }
/// ```
public struct SharedEventIterator<Element: Sendable, Failure: Error>: AsyncIteratorProtocol {
    @usableFromInline
    let subscription: SharedIterator<Element, Failure>.Subscription
    /// Ready elements taken at once (see `ElementBatch`; under `.bufferingNewest`, each is
    /// checked before it is returned, and what its policy dropped meanwhile is reported).
    @usableFromInline
    var batch = ElementBatch<Element>()

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy?, connectRule: ConnectRule) {
        self.subscription = .init(storage: storage, policy: policy, connectRule: connectRule)
    }

    /// The iterator of a subscriber that has already joined (``SharedSubscription/events``).
    @inlinable
    init(subscription: SharedIterator<Element, Failure>.Subscription) {
        self.subscription = subscription
    }

    /// The next event: an element, what was missed before the next element or the end, or
    /// the eviction; `nil` once the sequence finished or the subscriber was evicted; or the
    /// upstream's error. Cancellation follows ``SharedIterator/next(isolation:)``: a waiting
    /// `next()` returns `nil` at once, and a cancelled task that asks again first gets the
    /// elements its iterator had already taken (none under `.bufferingOldest`; under
    /// `.bufferingNewest`, those its policy has not dropped since), then `nil`.
    ///
    /// A `.missed(n)` takes nothing from the subscriber's buffer: the element after the gap
    /// stays there, where its policy may still drop it (then the next event is another
    /// `.missed`), so a subscriber never holds more than its policy's limit.
    @inlinable
    public mutating func next(
        isolation actor: isolated (any Actor)? = #isolation
    ) async throws(Failure) -> SharedEvent<Element>? {
        if let element = self.batch.popFirst() {
            return .element(element)
        }
        // The batch is used up: refilled synchronously when something is ready, else wait,
        // out of line (as `SharedIterator.next` does), so that `next` stays small enough to be
        // inlined into the caller's loop: no async call per element.
        var report = ReadReport()
        report.reportsGaps = true
        switch self.batch.refill(
            from: self.subscription.storage, subscriber: self.subscription.id, held: self.subscription.held,
            report: &report, mayWaitForOffers: actor == nil)
        {
        case .element(let ready):
            return .element(ready)
        case .gap:
            return .missed(report.missed)
        case .ended(let result):
            return self.event(ending: try result.get(), report)
        case .nothingReady:
            return try await self.waitForEvent(isolation: actor)
        }
    }

    /// `next()` once the refill found nothing ready: waits for an element, a gap or the end.
    @inlinable
    mutating func waitForEvent(isolation actor: isolated (any Actor)?) async throws(Failure) -> SharedEvent<Element>? {
        var report = ReadReport()
        report.reportsGaps = true
        let element = try await self.subscription.storage.wait(
            self.subscription.id, report: &report,
            isolation: actor)
        // A gap found when it was about to suspend: reported alone, the subscriber stays.
        if report.missed > 0 { return .missed(report.missed) }
        return self.event(ending: element, report)
    }

    /// The event of a read that returned `element`: `nil` is the end, or the eviction.
    @inlinable
    mutating func event(ending element: Element?, _ report: ReadReport) -> SharedEvent<Element>? {
        guard let element else {
            guard let eviction = report.eviction else { return nil }
            self.subscription.recordEviction(eviction)
            return .evicted(eviction)
        }
        return .element(element)
    }

    /// The next event; see ``next(isolation:)``.
    @inlinable
    public mutating func next() async throws(Failure) -> SharedEvent<Element>? {
        try await self.next(isolation: nil)
    }
}
