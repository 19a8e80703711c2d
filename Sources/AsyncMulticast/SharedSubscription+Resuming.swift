/// What a subscriber that knows its positions receives: each element with its position, the
/// positions it will never receive (a gap, with its bounds), and its eviction.
///
/// Every element a shared sequence or subject produces has a position, numbered by the
/// library: 0 for its first element, then 1, 2, … in the order subscribers receive them.
/// The numbering belongs to the sequence, not to an iteration of its upstream: an upstream
/// that stops and restarts (`share()`, `replay(_:)`) goes on from the next number, and a
/// cleared or expired replay cache only moves where its history starts. A client that
/// reconnects hands back the last position it saw to ``AsyncSubscribableSequence/subscribe(after:buffering:)``
/// (an SSE server maps `Last-Event-ID` to it, and a gap to an event of its own).
///
/// ```swift
/// for await event in feed.subscribe(after: lastSeen) {
///     switch event {
///     case .element(let line, let position): print("\(position): \(line)")
///     case .gap(let after, let before): print("lost \(after + 1)..<\(before)")
///     case .evicted: print("too slow")
///     }
/// }
/// ```
public enum PositionedEvent<Element: Sendable, Position: Comparable & Sendable>: Sendable {
    /// The next element, and its position.
    case element(Element, position: Position)
    /// The elements after position `after` and before position `before` (both excluded)
    /// will never reach this subscriber: the history no longer held them when it resumed
    /// (then it is its first event), or its policy dropped them (as
    /// ``SharedEvent/missed(_:)`` says; a `.bufferingNewest` or `.bufferingOldest` one). The
    /// next element, if any, is at `before`. Fill it from a store of your own, if you keep one.
    case gap(after: Position, before: Position)
    /// The subscriber was evicted by its ``SharedBufferingPolicy/evicting(_:softLimit:)``
    /// policy: its last event (see ``SharedEvent/evicted(_:)``).
    case evicted(SubscriberEviction)
}

extension PositionedEvent: Equatable where Element: Equatable {}
extension PositionedEvent: Hashable where Element: Hashable, Position: Hashable {}

/// A subscriber that resumed after a position, or joined knowing its positions: what
/// ``AsyncSubscribableSequence/subscribe(after:buffering:)`` returns. It is a
/// ``SharedSubscription`` whose events carry positions (``PositionedEvent``): joined when it
/// was created, iterated later, once, from any task.
///
/// ```swift
/// // ticks replays its latest 4: 0...9 were sent, 6...9 are kept
/// var resumed = ticks.subscribe(after: 7).makeAsyncIterator()
/// print(await resumed.next()!)   // element(8, position: 8)
/// print(await resumed.next()!)   // element(9, position: 9)
/// ```
public struct PositionedSubscription<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = PositionedEventIterator<Element, Failure>

    /// The subscriber, which receives the elements from `first` on (with `gap` reported first).
    @usableFromInline
    let subscription: SharedSubscription<Element, Failure>
    @usableFromInline
    let first: Int
    @usableFromInline
    let gap: Range<Int>

    @inlinable
    init(_ core: _SharedCore<Element, Failure>, after position: Int?, policy: SharedBufferingPolicy?) {
        let effective = policy ?? core.policy
        let (id, first, gap) = core.storage.subscribe(after: position, policy: effective, connectRule: core.connectRule)
        self.subscription = SharedSubscription(core.storage, joined: id, policy: effective)
        self.first = first
        self.gap = gap
    }

    /// Takes the subscriber: the first call returns its iterator; a later call returns an
    /// iterator that ends at once.
    @inlinable
    public func makeAsyncIterator() -> PositionedEventIterator<Element, Failure> {
        PositionedEventIterator(
            events: self.subscription.events.makeAsyncIterator(), first: self.first, gap: self.gap)
    }

    /// What this subscriber holds and the most it held: ``SharedSubscription/backlog``.
    ///
    /// ```swift
    /// let client = ticks.subscribe(after: 5)
    /// print(client.backlog!.count)   // 4
    /// ```
    @inlinable
    public var backlog: SubscriberBacklog? { self.subscription.backlog }

    /// This subscriber's eviction once it is evicted, `nil` once it leaves otherwise:
    /// ``SharedSubscription/waitForEviction()->SubscriberEviction?``.
    ///
    /// ```swift
    /// Task { if await client.waitForEviction() != nil { try await connection.close() } }
    /// ```
    @inlinable
    public func waitForEviction() async -> SubscriberEviction? {
        await self.subscription.waitForEviction()
    }
}

/// An iterator over a ``PositionedSubscription``: the subscriber, with the lifetime rules of
/// ``SharedIterator`` (it leaves when its task is cancelled, when it has returned `nil` or
/// thrown, or when it is released).
///
/// ```swift
/// var events = feed.subscribe(after: lastSeen).makeAsyncIterator()
/// while let event = await events.next() { try await send(event) }
/// ```
public struct PositionedEventIterator<Element: Sendable, Failure: Error>: AsyncIteratorProtocol {
    @usableFromInline
    var events: SharedEventIterator<Element, Failure>
    /// The position of the next element.
    @usableFromInline
    var position: Int
    /// The gap of the resumption, until it is reported (first).
    @usableFromInline
    var pendingGap: Range<Int>?

    @inlinable
    init(events: SharedEventIterator<Element, Failure>, first: Int, gap: Range<Int>) {
        self.events = events
        self.position = first
        self.pendingGap = gap.isEmpty ? nil : gap
    }

    /// The next event: the resumption's gap first, if there is one; then each element with
    /// its position, a gap where the policy dropped elements, the eviction; `nil` once the
    /// sequence finished or the subscriber was evicted; or the upstream's error.
    /// Cancellation follows ``SharedIterator/next(isolation:)``.
    @inlinable @inline(__always)
    public mutating func next(
        isolation actor: isolated (any Actor)? = #isolation
    ) async throws(Failure) -> PositionedEvent<Element, Int>? {
        if let gap = self.pendingGap {
            self.pendingGap = nil
            return .gap(after: gap.lowerBound - 1, before: gap.upperBound)
        }
        switch try await self.events.next(isolation: actor) {
        case .element(let element):
            defer { self.position += 1 }
            return .element(element, position: self.position)
        case .missed(let count):
            defer { self.position += count }
            return .gap(after: self.position - 1, before: self.position + count)
        case .evicted(let eviction):
            return .evicted(eviction)
        case nil:
            return nil
        }
    }

    /// The next event; see ``next(isolation:)``.
    @inlinable
    public mutating func next() async throws(Failure) -> PositionedEvent<Element, Int>? {
        try await self.next(isolation: nil)
    }
}

extension SharedSubscription {
    /// A subscription of the subscriber `id`, which has already joined `storage` with `policy`
    /// (`nil`: the storage's default).
    @inlinable
    init(_ storage: MulticastStorage<Element, Failure>, joined id: SubscriberID, policy: SharedBufferingPolicy?) {
        let evictionRecord = Lock<SubscriberEviction?>(nil)
        self.subscriber = Subscriber(
            SharedIterator.Subscription(storage: storage, joined: id, policy: policy, evictionRecord: evictionRecord),
            evictionRecord: evictionRecord)
    }
}

extension AsyncSubscribableSequence {
    /// Joins and resumes after `position`, the last position the subscriber saw (`nil`: it
    /// saw none; it joins as ``subscribe(buffering:)`` does, replay included, and learns the
    /// positions). Its events carry each element's position (``PositionedEvent``).
    ///
    /// - If the history still holds the elements after `position`, they come first, in
    ///   order, then the live ones: none twice, none skipped, since joining and reading the
    ///   history are one step of the engine, whatever is produced meanwhile.
    /// - If it no longer reaches back that far, the first event is
    ///   ``PositionedEvent/gap(after:before:)`` with the positions lost, then the history and
    ///   the live elements: fill the gap from a store of your own, if you keep one.
    /// - A `position` at or past the newest element (one numbered by another process) joins
    ///   at the tail, without a gap.
    ///
    /// The history is the replay cache (`replay(_:)`, ``AsyncReplaySubject``): its latest
    /// elements, at most as many as it replays, and as many as the policy holds
    /// (`.bufferingNewest(n)`, `.bufferingOldest(n)`: the newest `n`; the others count in
    /// the gap). So its memory is the replay cache's, and `share()` (no cache) resumes with
    /// a gap. Whatever clears the cache (``AsyncReplayingSequence/resetReplayCache()``,
    /// `replayExpiration` after the upstream stopped) clears the history, not the
    /// numbering: a later resumption reports the cleared elements as a gap.
    ///
    /// ```swift
    /// // ticks replays its latest 4: 0...9 were sent, 6...9 are kept
    /// var late = ticks.subscribe(after: 2).makeAsyncIterator()
    /// print(await late.next()!)   // gap(after: 2, before: 6)
    /// print(await late.next()!)   // element(6, position: 6)
    /// ```
    ///
    /// - Parameters:
    ///   - position: the last position seen, at least -1 (-1: none, yet everything since
    ///     the first element is wanted, so a cleared history is a gap); `nil`: none.
    ///   - policy: the subscriber's buffering policy; `nil` takes this sequence's.
    @inlinable
    public func subscribe(
        after position: Int?, buffering policy: SharedBufferingPolicy? = nil
    ) -> PositionedSubscription<Element, Failure> {
        if let position {
            precondition(position >= -1, "subscribe(after:buffering:): position must be at least -1, got \(position)")
        }
        policy?.validate(parameter: "subscribe(after:buffering:)")
        return PositionedSubscription(self._core, after: position, policy: policy)
    }
}
