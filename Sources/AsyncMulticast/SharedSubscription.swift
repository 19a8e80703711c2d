/// A subscriber that has joined and is iterated later, once, from any task: what
/// ``AsyncSubscribableSequence/subscribe(buffering:)`` returns, like the receiver tokio's
/// `broadcast::Sender::subscribe()` gives.
///
/// An iterator joins when it is created, and iterators are not `Sendable`, so "join, then
/// hand the reading to another task" needs a value that has joined and can travel. This is
/// it: it receives everything produced after `subscribe(buffering:)` returned, however late
/// the reading starts, and it can cross into a `@Sendable` closure (a response body, a
/// WebSocket handler, a task group's child).
///
/// ```swift
/// let updates = AsyncPassthroughSubject<String, Never>()
/// let subscription = updates.subscribe()   // joined: nothing sent from here on is missed
/// updates.send("hello")
/// updates.finish()
/// let reader = Task { for await line in subscription { print(line) } }   // hello
/// await reader.value
/// ```
///
/// - **Iterated once.** The first iterator, of the elements or of ``events``, takes the
///   subscriber; a later iteration of the same subscription (or of a copy) ends at once,
///   without an element. To read from two places, subscribe twice.
/// - **Leaves like an iterator:** when the task iterating it is cancelled, when the iteration
///   returned `nil` or threw, or when it is released. A subscription released before anyone
///   iterated it leaves when its last copy goes; until then it is a subscriber, and under a
///   `.bounded` policy it paces the upstream like a reader that does not read.
public struct SharedSubscription<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    @usableFromInline
    let subscriber: Subscriber

    @inlinable
    init(_ core: _SharedCore<Element, Failure>, policy: SharedBufferingPolicy?) {
        let evictionRecord = Lock<SubscriberEviction?>(nil)
        self.subscriber = Subscriber(
            SharedIterator.Subscription(
                storage: core.storage, policy: policy ?? core.policy, connectRule: core.connectRule,
                evictionRecord: evictionRecord),
            evictionRecord: evictionRecord)
    }

    /// Takes the subscriber: the first call returns its iterator; a later call returns an
    /// iterator that ends at once.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(subscription: self.subscriber.take())
    }

    /// The same subscriber read as lag-reporting events (see ``SharedEvent``), instead of its
    /// elements. Iterating it takes the subscriber, as iterating the subscription does.
    ///
    /// ```swift
    /// let client = feed.subscribe(buffering: .evicting(256))  // small, to show an eviction
    /// Task {
    ///     for await event in client.events {
    ///         if case .evicted(let eviction) = event { print("disconnected, evicted \(eviction)") }
    ///     }
    /// }
    /// ```
    @inlinable
    public var events: Events {
        Events(subscriber: self.subscriber)
    }

    /// How far behind this subscriber runs: what it holds now and the most it has held since
    /// it joined (see ``SubscriberBacklog``). `nil` once it has left or was evicted: an
    /// evicted subscriber holds nothing, and its ``SubscriberEviction`` (from
    /// ``waitForEviction()->SubscriberEviction?``, the `.evicted` event or the error) keeps what it held then and
    /// its high-water mark. Any
    /// task may read it, while another one iterates the subscription: a server samples
    /// its clients' high-water marks under a real burst to size their limits.
    ///
    /// ```swift
    /// let chat = AsyncReplaySubject<String, Never>(replay: 16, buffering: .evicting(4096))
    /// let client = chat.subscribe()
    /// for n in 1...50 { chat.send("message \(n)") }
    /// print(client.backlog!.highWaterMark)   // 50
    /// ```
    @inlinable
    public var backlog: SubscriberBacklog? {
        self.subscriber.storage.backlog(of: self.subscriber.id).map {
            SubscriberBacklog(count: $0.count, highWaterMark: $0.highWaterMark)
        }
    }

    /// Returns this subscriber's eviction (``SharedBufferingPolicy/evicting(_:softLimit:)``)
    /// once it is evicted, at once if it already was, even if its iteration has since ended
    /// by learning of it; `nil` once it leaves otherwise (its iteration ended, was cancelled
    /// or was released), or at once if it has left that way; `nil` at once if the waiting
    /// task is cancelled. The ``SubscriberEviction`` says which limit and how far behind the
    /// subscriber was, in one line for a log.
    ///
    /// An iterator released, or whose cancelled task asked again, before it learned of its
    /// eviction still answers with it here, until a new subscriber of the same sequence
    /// takes its place in the engine; a call after that returns `nil` (a task already
    /// waiting here has the eviction). Ask while the subscription is in use.
    ///
    /// An iteration learns of its eviction when it next asks for an element. A server's
    /// handler stuck in a write to a client that stopped reading never asks, so it never
    /// learns: another task waits here instead, and closes the connection, which ends the
    /// write. Any number of tasks may wait. A waiting task holds its copy of the
    /// subscription: one that nobody iterates stays a subscriber while a task waits.
    ///
    /// ```swift
    /// let client = feed.subscribe(buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))))
    /// Task {
    ///     if let eviction = await client.waitForEviction() {
    ///         print("closing, evicted", eviction)  // closing, evicted at its soft limit, holding 300 elements …
    ///         try await connection.close()
    ///     }
    /// }
    /// for await event in client { try await connection.write(event) }
    /// ```
    @inlinable
    public func waitForEviction() async -> SubscriberEviction? {
        // Read after the wait too: the iteration may learn of the eviction and leave while
        // this task is on its way to wait, and then the storage knows the subscriber no more.
        if let eviction = self.subscriber.recordedEviction { return eviction }
        return await self.subscriber.storage.waitForEviction(self.subscriber.id) ?? self.subscriber.recordedEviction
    }

    /// Whether this subscriber was evicted: the form of ``waitForEviction()->SubscriberEviction?`` before it
    /// returned the eviction.
    @available(
        *, deprecated,
        message: "waitForEviction() returns the eviction, or nil: write `if await client.waitForEviction() != nil`"
    )
    @_disfavoredOverload
    @inlinable
    public func waitForEviction() async -> Bool {
        let eviction: SubscriberEviction? = await self.waitForEviction()
        return eviction != nil
    }

    /// The events of a ``SharedSubscription``: see ``SharedSubscription/events``.
    public struct Events: AsyncSequence, Sendable {
        public typealias AsyncIterator = SharedEventIterator<Element, Failure>

        @usableFromInline
        let subscriber: Subscriber

        @inlinable
        init(subscriber: Subscriber) {
            self.subscriber = subscriber
        }

        /// Takes the subscriber: the first call returns its iterator; a later call returns
        /// an iterator that ends at once.
        @inlinable
        public func makeAsyncIterator() -> SharedEventIterator<Element, Failure> {
            SharedEventIterator(subscription: self.subscriber.take())
        }
    }

    /// The joined subscriber, until an iterator takes it. Its lock guards one optional
    /// reference, so a copy of the subscription taken in any task takes it at most once.
    /// `storage` and `id` name the subscriber after that too (`backlog`, `waitForEviction`).
    @usableFromInline
    final class Subscriber: Sendable {
        @usableFromInline
        let waiting: Lock<SharedIterator<Element, Failure>.Subscription?>
        @usableFromInline
        let storage: MulticastStorage<Element, Failure>
        @usableFromInline
        let id: SubscriberID

        /// Set by the iteration when it ends by learning of the eviction (see
        /// `SharedIterator.Subscription.recordEviction(_:)`): `waitForEviction()` and
        /// `backlog` still answer with it after the subscriber has left.
        @usableFromInline
        let evictionRecord: Lock<SubscriberEviction?>

        @inlinable
        init(
            _ subscription: SharedIterator<Element, Failure>.Subscription, evictionRecord: Lock<SubscriberEviction?>
        ) {
            self.waiting = Lock(subscription)
            self.storage = subscription.storage
            self.id = subscription.id
            self.evictionRecord = evictionRecord
        }

        /// The eviction the iteration ended with, if it did.
        @inlinable
        var recordedEviction: SubscriberEviction? { self.evictionRecord.withLock { $0 } }

        /// The joined subscriber the first time; afterwards a subscriber of a completed
        /// stream of its own (so its iterator returns `nil` at once).
        @inlinable
        func take() -> SharedIterator<Element, Failure>.Subscription {
            if let subscription = self.waiting.withLock({ waiting in
                defer { waiting = nil }
                return waiting
            }) {
                return subscription
            }
            let ended = MulticastStorage<Element, Failure>(
                policy: .unbounded, replay: 0, mode: .push, upstream: nil)
            ended.complete(failure: nil)
            return SharedIterator.Subscription(storage: ended, policy: nil, connectRule: .never)
        }
    }
}

extension AsyncSubscribableSequence {
    /// Joins now and returns the subscriber as a `Sendable` value, to be iterated later,
    /// once, from any task (tokio's `broadcast::Sender::subscribe()`): nothing produced
    /// after this call returns is missed, however late the iteration starts. `nil` takes
    /// this sequence's policy. See ``SharedSubscription``.
    ///
    /// ```swift
    /// let client = prices.subscribe(buffering: .bufferingNewest(16))   // joined here
    /// let body: @Sendable () async -> Void = {                          // runs later, anywhere
    ///     for await price in client { print(price) }
    /// }
    /// ```
    @inlinable
    public func subscribe(buffering policy: SharedBufferingPolicy? = nil) -> SharedSubscription<Element, Failure> {
        policy?.validate(parameter: "subscribe(buffering:)")
        return SharedSubscription(self._core, policy: policy)
    }
}
