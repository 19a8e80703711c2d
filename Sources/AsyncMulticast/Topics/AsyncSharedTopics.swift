/// One upstream fanned out by key: what ``_Concurrency/AsyncSequence/share(by:replay:buffering:keepAlive:clock:)``
/// returns. Each element goes to the subscribers of its key only, so a server that serves
/// chat rooms, users or ticker symbols from one feed pays, per element, for that key's
/// subscribers and wakes nobody else.
///
/// ```swift
/// let (feed, chat) = AsyncStream.makeStream(of: Message.self)
/// let messages = feed.share(by: \.room)
/// let alice = messages.subscribe(to: "swift")
/// let bob = messages.subscribe(to: "rust")
/// chat.yield(Message(room: "swift", text: "actors are great"))
/// chat.yield(Message(room: "rust", text: "so is ownership"))
/// chat.finish()
/// for await message in alice { print("alice:", message.text) }   // alice: actors are great
/// for await message in bob { print("bob:", message.text) }       // bob: so is ownership
/// ```
///
/// - **One upstream iteration for all keys.** The first ``subscribe(to:buffering:)`` of any
///   key starts it, as the first subscriber of ``_Concurrency/AsyncSequence/share()`` does;
///   it stops once the last subscriber of every key has left and `keepAlive` has passed on
///   the clock; a later subscriber starts a fresh one. Two iterations never overlap.
/// - **Each key is a shared sequence of its own.** A subscriber gets its key's elements
///   that the router sends after it joined (after the key's replay, if any), buffered as its
///   policy says. Between the upstream and a key, at most two elements are on their way:
///   one in the router's buffer and one in its hand (waiting for room in its key). A
///   subscriber may get those two if they are its key's, as a subscriber of `share()` may
///   get the one in its upstream's hand; never one the router sent before, nor an older one;
///   eviction (``SharedSubscription/waitForEviction()->SubscriberEviction?``,
///   ``SharedEvent/evicted(_:)``) and lag reports (``SharedEvent/missed(_:)``) work as on
///   `share()`. A key lives while it has subscribers: an element of a key without
///   subscribers reaches nobody, and a key's replay goes with its last subscriber.
/// - **The upstream's end reaches every key:** its subscribers get what is buffered for
///   them, then `nil` or the error; a later subscriber of any key gets it at once.
/// - **Back-pressure is shared.** A lossless subscriber (`.bounded(n)`, the default) that
///   holds `n` unread elements makes the router wait at the next element of its key, and
///   with it every key; the upstream produces one more element (into the router's buffer),
///   then waits, as a slow reader of `share()` holds all the others. A server whose clients may stall gives them
///   `.evicting(n)` (see <doc:ServingClients>), and a client that may skip,
///   `.bufferingNewest(n)`: then no client holds another key.
///
/// Keys are spread over shards with a lock each, as in ``AsyncSubjectTopics``; routing an
/// element takes its key's shard lock, then its subject's.
public struct AsyncSharedTopics<Key: Hashable & Sendable, Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let topics: AsyncSubjectTopics<Key, Element, Failure>

    @inlinable
    init(topics: AsyncSubjectTopics<Key, Element, Failure>) {
        self.topics = topics
    }

    /// Joins `key` now and returns the subscriber, to be iterated later, once, from any task
    /// (see ``SharedSubscription``): it receives the elements of `key` that the router sends
    /// from now on (after the key's replay, if any), which may include the two on their way
    /// from the upstream when it joined (see ``AsyncSharedTopics``). Starts the upstream if no key
    /// had a subscriber. `nil` takes the policy given to `share(by:)`. After the upstream
    /// ended, the subscription ends at once, or throws its error at once.
    ///
    /// ```swift
    /// let client = messages.subscribe(to: "swift", buffering: .evicting(4096))
    /// Task { for await message in client { print(message.text) } }
    /// ```
    @inlinable
    public func subscribe(
        to key: Key, buffering policy: SharedBufferingPolicy? = nil
    ) -> SharedSubscription<Element, Failure> {
        policy?.validate(parameter: "subscribe(to:buffering:)")
        let (subscription, live) = self.topics.join(key, policy: policy)
        if live, let session = self.topics.session { session.pumpNeeded(topics: self.topics) }
        return subscription
    }

    /// The number of subscribers of `key` now: 0 if it has none. An evicted subscriber no
    /// longer counts.
    ///
    /// ```swift
    /// print(messages.subscriberCount(of: "swift"))   // presence in the room
    /// ```
    @inlinable
    public func subscriberCount(of key: Key) -> Int {
        self.topics.subscriberCount(of: key)
    }

    /// Whether `key` has subscribers now (its subject is live).
    ///
    /// ```swift
    /// if !messages.isLive("swift") { print("nobody in the room") }
    /// ```
    @inlinable
    public func isLive(_ key: Key) -> Bool {
        self.topics.isLive(key)
    }

    /// The number of keys that have subscribers now. Each shard is read in turn, so while
    /// keys come and go the sum is approximate; it is exact when nothing changes.
    ///
    /// ```swift
    /// print("open rooms:", messages.keyCount)
    /// ```
    @inlinable
    public var keyCount: Int {
        self.topics.keyCount
    }

    /// Returns once `key` has no subscriber: at once if it has none now, else when its last
    /// one leaves (or the upstream ends). Throws `CancellationError` if the task is cancelled
    /// first. Subscribers joining afterwards are not waited for.
    ///
    /// ```swift
    /// try await messages.waitUntilFreed("swift")
    /// print(messages.isLive("swift"))   // false, unless someone joined since
    /// ```
    @inlinable
    public func waitUntilFreed(_ key: Key) async throws(CancellationError) {
        try await self.topics.waitUntilFreed(key)
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Shares one iteration of this sequence among subscribers of keys: each element goes
    /// only to the subscribers of `key(element)`. See ``AsyncSharedTopics``.
    ///
    /// ```swift
    /// let messages = chatFeed.share(by: \.room)
    /// let ticks = prices.share(by: { $0.symbol }, replay: 1, buffering: .bufferingNewest(16))
    /// ```
    ///
    /// - Parameters:
    ///   - key: the key of an element (a key path, or a closure). Called once per element,
    ///     by the task that routes them, never while a lock is held.
    ///   - replay: how many of a key's latest elements a new subscriber of that key receives
    ///     first; at least 0. A key's replay lives while the key has subscribers.
    ///   - buffering: how each subscriber keeps elements it has not consumed yet, unless
    ///     ``AsyncSharedTopics/subscribe(to:buffering:)`` says otherwise: lossless
    ///     `.bounded(64)` by default, which makes the router, and so every key, wait for a
    ///     subscriber 64 behind, and the upstream one element later (a server's clients take
    ///     `.evicting(n)` instead).
    ///   - keepAlive: how long, on `clock`, the upstream outlives the last subscriber of every
    ///     key; not negative. One of 2^40 seconds or longer, such as `.seconds(Int64.max)`,
    ///     keeps it running for good.
    ///   - clock: the clock that times `keepAlive` and a soft limit's duration
    ///     (``SharedBufferingPolicy/evicting(_:softLimit:)``); `ContinuousClock` by default.
    @inlinable
    public func share<Key: Hashable & Sendable>(
        by key: @escaping @Sendable (Element) -> Key, replay: Int = 0,
        buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration = .zero,
        clock: some Clock<Duration> = ContinuousClock()
    ) -> AsyncSharedTopics<Key, Element, Failure> {
        precondition(replay >= 0, "share(by:replay:): replay must be at least 0, got \(replay)")
        precondition(keepAlive >= .zero, "share(by:keepAlive:): keepAlive must not be negative, got \(keepAlive)")
        buffering.validate(parameter: "buffering")
        let timerClock = TimerClock(clock)
        let hub = MulticastStorage<Element, Failure>(
            policy: TopicsSession<Key, Element, Failure>.hubPolicy, replay: 0, mode: .automatic,
            keepAlive: keepAlive, replayExpiration: .zero, clock: timerClock, upstream: MulticastStorage.pulling(self))
        let topics = AsyncSubjectTopics<Key, Element, Failure>(
            replay: replay, policy: buffering, keepAlive: .zero, clock: timerClock,
            shardCount: AsyncSubjectTopics<Key, Element, Failure>.defaultShardCount,
            session: TopicsSession(hub: hub, key: key))
        return AsyncSharedTopics(topics: topics)
    }
}
