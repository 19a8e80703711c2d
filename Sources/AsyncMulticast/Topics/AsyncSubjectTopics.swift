/// Subjects by key: each key (a chat room, a user, a ticker symbol) has a subject of its own,
/// created when its first subscriber joins and freed after its last one leaves, so a server
/// fans out by key without a registry of its own.
///
/// ``subscribe(to:buffering:)`` joins a key and returns the usual ``SharedSubscription``;
/// ``send(_:to:)`` delivers an element to that key's subscribers only: a subscriber of
/// another key never sees it, and is never woken for it.
///
/// ```swift
/// let rooms = AsyncSubjectTopics<String, String, Never>()
/// let alice = rooms.subscribe(to: "swift")
/// let bob = rooms.subscribe(to: "rust")
/// rooms.send("actors are great", to: "swift")
/// rooms.send("so is ownership", to: "rust")
/// rooms.finish()
/// for await message in alice { print("alice:", message) }   // alice: actors are great
/// for await message in bob { print("bob:", message) }       // bob: so is ownership
/// ```
///
/// - **One subject per live key**, as ``AsyncPassthroughSubject`` (or ``AsyncReplaySubject``
///   with `init(replay:buffering:keepAlive:clock:)`) behaves: each subscriber gets what is
///   sent to its key after it joined, buffered as its policy says, evicted as
///   ``SharedBufferingPolicy/evicting(_:softLimit:)`` says.
/// - **Lifetime:** a key's subject is created by its first subscriber (or by a send, for a
///   key that keeps a replay) and freed once it has had no subscriber for `keepAlive`; an
///   eviction is a leave. A key freed and joined again starts afresh: nothing of the old
///   subject is seen. Joining and leaving are race-free: a subscriber joining while the
///   last one leaves either keeps the key or gets a fresh subject, never one that
///   ``send(_:to:)`` no longer reaches.
/// - **Observable:** ``subscriberCount(of:)``, ``keyCount``, ``isLive(_:)``, and
///   ``waitUntilFreed(_:)``.
/// - **Completion:** ``finish()`` and ``fail(_:)`` end every key at once: subscribers get
///   what is buffered for them, then the end; later subscribers get the end at once; later
///   sends and completions are ignored.
///
/// Keys are spread over shards with a lock each, so subscribers of different keys rarely
/// wait for each other: joining takes the key's shard lock, then its subject's; sending
/// looks the subject up under the shard lock and delivers under the subject's lock only.
public final class AsyncSubjectTopics<Key: Hashable & Sendable, Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias Shard = TopicShard<Key, Element, Failure>
    @usableFromInline
    typealias Subject = MulticastStorage<Element, Failure>

    /// The shards; a key lives in `shards[key.hashValue & (shards.count - 1)]`.
    @usableFromInline
    let shards: [Lock<Shard>]
    @usableFromInline
    let policy: SharedBufferingPolicy
    /// How many elements each key replays to a new subscriber.
    @usableFromInline
    let replay: Int
    @usableFromInline
    let window: TopicWindow
    @usableFromInline
    let clock: TimerClock
    /// The upstream that feeds the keys, for topics of one upstream (`share(by:)`); `nil`
    /// for topics fed by ``send(_:to:)``. Told of every key created and removed, in the
    /// shard's critical section.
    @usableFromInline
    let session: TopicsSession<Key, Element, Failure>?

    /// The number of shards: enough for 2 to 16 cores sending and joining at once to meet
    /// on one lock rarely, few enough to cost nothing (a lock and an empty table each).
    @usableFromInline
    static var defaultShardCount: Int { 16 }

    /// Creates topics whose keys are passthrough subjects (``AsyncPassthroughSubject``):
    /// a subscriber gets what is sent to its key after it joined.
    ///
    /// ```swift
    /// let notifications = AsyncSubjectTopics<Int, String, Never>(buffering: .evicting(256))
    /// let inbox = notifications.subscribe(to: 42)   // user 42
    /// notifications.send("you have mail", to: 42)
    /// ```
    ///
    /// - Parameters:
    ///   - buffering: how each subscriber keeps elements it has not consumed yet, unless
    ///     ``subscribe(to:buffering:)`` says otherwise. Under `.bounded(n)` ``send(_:to:)``
    ///     buffers past `n` (it cannot wait).
    ///   - keepAlive: how long, on `clock`, a key's subject outlives its last subscriber;
    ///     not negative. With the default, `.zero`, it is freed at once. One of 2^40
    ///     seconds or longer, such as `.seconds(Int64.max)`, keeps every key for good.
    ///   - clock: the clock that times `keepAlive` and a soft limit's duration
    ///     (``SharedBufferingPolicy/evicting(_:softLimit:)``); `ContinuousClock` by default.
    @inlinable
    public convenience init(
        buffering: SharedBufferingPolicy = .unbounded, keepAlive: Duration = .zero,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        precondition(
            keepAlive >= .zero, "AsyncSubjectTopics(keepAlive:): keepAlive must not be negative, got \(keepAlive)")
        buffering.validate(parameter: "buffering")
        self.init(
            replay: 0, policy: buffering, keepAlive: keepAlive, clock: TimerClock(clock),
            shardCount: Self.defaultShardCount)
    }

    /// Creates topics whose keys are replay subjects (``AsyncReplaySubject``): a new
    /// subscriber first gets the latest `replay` elements sent to its key.
    ///
    /// A key's replay lives as long as its subject: `keepAlive` after its last subscriber
    /// left, or after the send that created it. With `keepAlive` above zero, a send to a key
    /// that has no subject creates one, so that the element waits for the key's next
    /// subscriber; the window is not restarted by later sends. With `.zero`, a key is freed
    /// with its last subscriber and a send to a key without subscribers reaches nobody.
    ///
    /// ```swift
    /// let prices = AsyncSubjectTopics<String, Double, Never>(replay: 1, keepAlive: .seconds(60))
    /// prices.send(231.5, to: "AAPL")
    /// let screen = prices.subscribe(to: "AAPL")   // first gets 231.5
    /// ```
    ///
    /// - Parameters:
    ///   - replay: how many of the latest elements a key's new subscriber receives first;
    ///     at least 0 (0 makes the keys passthrough subjects).
    ///   - buffering: how each subscriber keeps elements it has not consumed yet, unless
    ///     ``subscribe(to:buffering:)`` says otherwise (see ``AsyncReplaySubject``).
    ///   - keepAlive: how long, on `clock`, a key's subject and its replay outlive its last
    ///     subscriber (or the send that created it); not negative. One of 2^40 seconds or
    ///     longer keeps every key for good.
    ///   - clock: the clock that times `keepAlive` and a soft limit's duration.
    @inlinable
    public convenience init(
        replay: Int, buffering: SharedBufferingPolicy = .unbounded, keepAlive: Duration = .zero,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        precondition(replay >= 0, "AsyncSubjectTopics(replay:): replay must be at least 0, got \(replay)")
        precondition(
            keepAlive >= .zero, "AsyncSubjectTopics(keepAlive:): keepAlive must not be negative, got \(keepAlive)")
        buffering.validate(parameter: "buffering")
        self.init(
            replay: replay, policy: buffering, keepAlive: keepAlive, clock: TimerClock(clock),
            shardCount: Self.defaultShardCount)
    }

    @inlinable
    init(
        replay: Int, policy: SharedBufferingPolicy, keepAlive: Duration, clock: TimerClock, shardCount: Int,
        session: TopicsSession<Key, Element, Failure>? = nil
    ) {
        precondition(
            shardCount > 0 && shardCount & (shardCount - 1) == 0,
            "shardCount must be a power of 2, got \(shardCount)")
        self.shards = (0..<shardCount).map { _ in Lock(Shard()) }
        self.policy = policy
        self.replay = replay
        self.clock = clock
        self.session = session
        switch keepAlive {
        case .zero: self.window = .none
        case Subject.Machine.longestWindow...: self.window = .forever
        default: self.window = .timed(keepAlive)
        }
    }

    deinit {
        // Timers hold the registry weakly: cancel them so that none sleeps on for nothing.
        for shard in self.shards {
            let timers = shard.withLock { shard in shard.entries.values.compactMap(\.timer) }
            for timer in timers { timer.cancel() }
        }
    }

    @inlinable
    func shard(for key: Key) -> Lock<Shard> {
        self.shards[key.hashValue & (self.shards.count - 1)]
    }

    /// A new key's subject.
    @inlinable
    func makeSubject() -> Subject {
        Subject(policy: self.policy, replay: self.replay, mode: .push, clock: self.clock, upstream: nil)
    }

    /// Whether a send to a key without a subject creates one, to keep the element.
    @inlinable
    var keepsReplay: Bool { self.replay > 0 && self.window != .none }

    // MARK: Subscribing and sending

    /// What a join's critical section hands out: the subscription, the subject it created
    /// (and its number), the timer of the idle window it closed, or the completion it found.
    @usableFromInline
    typealias Joined = (
        subscription: SharedSubscription<Element, Failure>?, created: (Subject, UInt64)?,
        cancelling: Task<Void, Never>?, completion: TopicsCompletion<Failure>?
    )

    /// Joins `key` now and returns the subscriber, to be iterated later, once, from any task
    /// (see ``SharedSubscription``): it receives what is sent to `key` from now on (after
    /// the key's replay, if it keeps one). The key's subject is created if it has none.
    /// `nil` takes the policy the topics were created with. After ``finish()`` the
    /// subscription ends at once; after ``fail(_:)`` it throws the error at once.
    ///
    /// ```swift
    /// let client = rooms.subscribe(to: "swift", buffering: .evicting(4096))
    /// Task { for await message in client { print(message) } }
    /// ```
    ///
    /// The key keeps its subject until this subscriber and every other one have left (the
    /// iteration ended, its task was cancelled, the subscription was released, or it was
    /// evicted), and `keepAlive` has passed.
    @inlinable
    public func subscribe(
        to key: Key, buffering policy: SharedBufferingPolicy? = nil
    ) -> SharedSubscription<Element, Failure> {
        policy?.validate(parameter: "subscribe(to:buffering:)")
        return self.join(key, policy: policy).subscription
    }

    /// Joins `key` (the policy checked by the caller): the subscription, and whether it
    /// joined a live key (`false`: the topics had completed, the subscription has ended).
    @inlinable
    func join(
        _ key: Key, policy: SharedBufferingPolicy?
    ) -> (subscription: SharedSubscription<Element, Failure>, live: Bool) {
        let (subscription, created, cancelling, completion) = self.shard(for: key).withLock { shard -> Joined in
            switch shard.subscriberJoining(key, makeSubject: self.makeSubject) {
            case .join(let subject, let created, let cancelling):
                if created != nil { self.session?.keyCreated() }
                // The one call into a subject under the shard lock, so that the key cannot
                // be freed between finding its subject and joining it. A push-fed storage's
                // join resumes nothing: it only offers the new count, which the listener
                // ignores (it acts on 0 only).
                let subscription = SharedSubscription(_SharedCore(subject), policy: policy)
                return (subscription, created.map { (subject, $0) }, cancelling, nil)
            case .completed(let completion):
                return (nil, nil, nil, completion)
            }
        }
        cancelling?.cancel()
        if let (subject, number) = created { self.listen(to: subject, of: key, number: number) }
        if let subscription { return (subscription, true) }
        return (self.endedSubscription(completion ?? .finished, policy: policy), false)
    }

    /// Delivers `element` to the current subscribers of `key`, and to no other subscriber.
    /// Never suspends: under `.bounded(n)` it buffers past `n`. A key without subscribers
    /// receives it only if it keeps a replay (`init(replay:buffering:keepAlive:clock:)`
    /// with a `keepAlive`), for its next subscribers; otherwise the element reaches nobody.
    /// Ignored after ``finish()`` or ``fail(_:)``.
    ///
    /// ```swift
    /// rooms.send("hello", to: "swift")   // only the subscribers of "swift" get it
    /// ```
    @inlinable
    public func send(_ element: Element, to key: Key) {
        let delivery = self.shard(for: key).withLock { shard in
            let delivery = shard.sending(to: key, keepsReplay: self.keepsReplay, makeSubject: self.makeSubject)
            if case .deliver(_, created: _?) = delivery { self.session?.keyCreated() }
            return delivery
        }
        guard case .deliver(let subject, let created) = delivery else { return }
        subject.send(element)
        if let created {
            self.listen(to: subject, of: key, number: created.number)
            self.startTimer(of: key, number: created.number, window: created.window)
        }
    }

    /// Ends every key: their subscribers receive what is buffered for them, then `nil`;
    /// every key is freed at once, and a later subscriber gets the end at once. Ignored if
    /// the topics have already completed, as are later sends.
    ///
    /// ```swift
    /// rooms.finish()   // the server shuts down: every client's stream ends
    /// ```
    @inlinable
    public func finish() {
        self.complete(.finished)
    }

    /// Ends every key with `error`: their subscribers receive what is buffered for them,
    /// then `error`, and so does a later subscriber, at once. Ignored if the topics have
    /// already completed, as are later sends.
    ///
    /// ```swift
    /// feeds.fail(FeedError.upstreamLost)
    /// ```
    @inlinable
    public func fail(_ error: Failure) {
        self.complete(.failed(error))
    }

    @inlinable
    func complete(_ completion: TopicsCompletion<Failure>) {
        for shard in self.shards {
            let (entries, noneLive) = shard.withLock { shard in
                let entries = shard.completed(completion)
                return (entries, self.session?.keysRemoved(entries.count) ?? false)
            }
            for entry in entries { self.free(entry, completing: completion) }
            if noneLive { self.session?.lastKeyFreed() }
        }
    }

    /// The subject of `key`, if it has one: where the pump of topics of one upstream sends
    /// an element of that key.
    @inlinable
    func subject(of key: Key) -> Subject? {
        self.shard(for: key).withLock { $0.entries[key]?.subject }
    }

    /// A subscription that has ended, as `completion` says, for a subscriber arriving after it.
    @inlinable
    func endedSubscription(
        _ completion: TopicsCompletion<Failure>, policy: SharedBufferingPolicy?
    ) -> SharedSubscription<Element, Failure> {
        let ended = Subject(policy: self.policy, replay: 0, mode: .push, upstream: nil)
        ended.complete(failure: completion.failure)
        return SharedSubscription(_SharedCore(ended), policy: policy)
    }
}
