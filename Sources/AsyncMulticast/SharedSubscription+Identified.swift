/// A subscriber that resumed after an element id of its own, the same on every instance (a
/// database's row id, a broker's offset): what
/// ``AsyncSubscribableSequence/subscribe(after:id:buffering:)`` returns. Its events carry
/// each element's id (``PositionedEvent`` with `ID` positions). Joined when it was created,
/// iterated later, once, from any task.
///
/// ```swift
/// // rows replays its latest 3: rows 10, 20, …, 60 were sent, 40, 50 and 60 are kept
/// var resumed = rows.subscribe(after: 40, id: \.id).makeAsyncIterator()
/// if case .element(let row, _) = await resumed.next() { print(row.id) }   // 50
/// ```
public struct IdentifiedSubscription<Element: Sendable, ID: Comparable & Sendable, Failure: Error>: AsyncSequence,
    Sendable
{
    public typealias AsyncIterator = IdentifiedEventIterator<Element, ID, Failure>

    /// The subscriber, with its positions.
    @usableFromInline
    let subscription: PositionedSubscription<Element, Failure>
    /// The id of an element.
    @usableFromInline
    let id: @Sendable (Element) -> ID
    /// The last id the subscriber saw, or `nil`.
    @usableFromInline
    let lastID: ID?

    @inlinable
    init(
        _ subscription: PositionedSubscription<Element, Failure>, id: @escaping @Sendable (Element) -> ID,
        after lastID: ID?
    ) {
        self.subscription = subscription
        self.id = id
        self.lastID = lastID
    }

    /// Takes the subscriber: the first call returns its iterator; a later call returns an
    /// iterator that ends at once.
    @inlinable
    public func makeAsyncIterator() -> IdentifiedEventIterator<Element, ID, Failure> {
        IdentifiedEventIterator(events: self.subscription.makeAsyncIterator(), id: self.id, after: self.lastID)
    }

    /// What this subscriber holds and the most it held: ``SharedSubscription/backlog``. It
    /// counts the elements of the history at or before the id it resumed after, until it
    /// has read past them.
    ///
    /// ```swift
    /// let client = rows.subscribe(after: 40, id: \.id)
    /// print(client.backlog!.count)   // 3
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

/// An iterator over an ``IdentifiedSubscription``: the subscriber, with the lifetime rules of
/// ``SharedIterator``. It reads the element ids itself, outside the sequence's lock.
///
/// ```swift
/// var events = feed.subscribe(after: lastEventID, id: \.id).makeAsyncIterator()
/// while let event = await events.next() { try await send(event) }
/// ```
public struct IdentifiedEventIterator<Element: Sendable, ID: Comparable & Sendable, Failure: Error>:
    AsyncIteratorProtocol
{
    @usableFromInline
    var events: PositionedEventIterator<Element, Failure>
    @usableFromInline
    let id: @Sendable (Element) -> ID
    /// The id of the last element delivered, or the one it resumed after.
    @usableFromInline
    var last: ID?
    /// Elements may have been lost after `last`: the history did not reach back to it (until
    /// an element at or before it shows that it did), or the policy dropped some since.
    @usableFromInline
    var mayHaveLost = false
    /// An element held back behind the gap it revealed.
    @usableFromInline
    var held: (element: Element, id: ID)?

    @inlinable
    init(events: PositionedEventIterator<Element, Failure>, id: @escaping @Sendable (Element) -> ID, after lastID: ID?)
    {
        self.events = events
        self.id = id
        self.last = lastID
    }

    /// The next event: a gap first when the history did not reach back to the id it
    /// resumed after; then each element after that id with its id, a gap where the policy
    /// dropped elements, the eviction; `nil` once the sequence finished or the subscriber
    /// was evicted; or the upstream's error. Cancellation follows
    /// ``SharedIterator/next(isolation:)``.
    @inlinable
    public mutating func next(
        isolation actor: isolated (any Actor)? = #isolation
    ) async throws(Failure) -> PositionedEvent<Element, ID>? {
        if let held = self.held {
            self.held = nil
            self.last = held.id
            return .element(held.element, position: held.id)
        }
        while true {
            switch try await self.events.next(isolation: actor) {
            case .gap:
                // Positions lost: which ids they had shows at the next element.
                self.mayHaveLost = true
            case .element(let element, _):
                let elementID = self.id(element)
                if let last = self.last, elementID <= last {
                    // Seen already: the history reaches back to the id it resumed after.
                    self.mayHaveLost = false
                    continue
                }
                if self.mayHaveLost, let last = self.last {
                    self.mayHaveLost = false
                    self.held = (element, elementID)
                    return .gap(after: last, before: elementID)
                }
                self.mayHaveLost = false
                self.last = elementID
                return .element(element, position: elementID)
            case .evicted(let eviction):
                return .evicted(eviction)
            case nil:
                return nil
            }
        }
    }

    /// The next event; see ``next(isolation:)``.
    @inlinable
    public mutating func next() async throws(Failure) -> PositionedEvent<Element, ID>? {
        try await self.next(isolation: nil)
    }
}

extension AsyncSubscribableSequence {
    /// Joins and resumes after `lastID`, the id of the last element the subscriber saw, an
    /// id that the elements carry (`id`): a database's row id or a broker's offset, the same
    /// on every instance of a server, where positions (``subscribe(after:buffering:)``)
    /// belong to one sequence in one process. Its events carry each element's id.
    ///
    /// - The history's elements after `lastID` come first, in order, then the live ones:
    ///   none twice, none skipped (as with positions: the join and the reading of the
    ///   history are one step).
    /// - If the history no longer reaches back to `lastID` (it holds no element at or before
    ///   it, and elements were lost from it), the first event is
    ///   ``PositionedEvent/gap(after:before:)`` with `lastID` and the id of the first element
    ///   that follows: ask your store for the ids strictly between. Ids need not be
    ///   contiguous, so a gap may turn out empty.
    /// - A gap where the policy dropped elements (`.bufferingNewest`, `.bufferingOldest`)
    ///   is reported the same way, before the next element; one before the first element of
    ///   a subscriber that joined with `nil` has no id to start from and is not reported.
    ///
    /// The ids must increase in the order the sequence produces its elements (an element
    /// whose id is at or before the last one is taken for one seen already). They are read
    /// by the subscriber's iterator, outside the sequence's lock. The history is the replay
    /// cache, as for ``subscribe(after:buffering:)``.
    ///
    /// ```swift
    /// // rows replays its latest 3: rows 10, 20, …, 60 were sent, 40, 50 and 60 are kept
    /// var late = rows.subscribe(after: 20, id: \.id).makeAsyncIterator()
    /// print(await late.next()!)   // gap(after: 20, before: 40)
    /// if case .element(let row, _) = await late.next() { print(row.id) }   // 40
    /// ```
    ///
    /// - Parameters:
    ///   - lastID: the id of the last element seen; `nil`: none (it joins as
    ///     ``subscribe(buffering:)`` does, replay included, and learns the ids).
    ///   - id: the id of an element (a key path, or a closure).
    ///   - policy: the subscriber's buffering policy; `nil` takes this sequence's.
    @inlinable
    public func subscribe<ID: Comparable & Sendable>(
        after lastID: ID?, id: @escaping @Sendable (Element) -> ID, buffering policy: SharedBufferingPolicy? = nil
    ) -> IdentifiedSubscription<Element, ID, Failure> {
        policy?.validate(parameter: "subscribe(after:id:buffering:)")
        // With an id, the whole history: which of it is after `lastID` shows by the ids.
        let positioned = PositionedSubscription(self._core, after: lastID == nil ? nil : -1, policy: policy)
        return IdentifiedSubscription(positioned, id: id, after: lastID)
    }
}
