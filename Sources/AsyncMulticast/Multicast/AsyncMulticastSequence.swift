/// A shared sequence whose upstream is started explicitly with ``connect()``.
///
/// Subscribers can join before anything flows; nothing is pulled until `connect()`, so
/// every subscriber that joined before it sees the first element. The connection, not the
/// subscribers, owns the upstream: subscribers leaving do not stop it; cancelling the
/// ``MulticastConnection`` does.
///
/// ```swift
/// let prices = feed.multicast()
/// var chart = prices.makeAsyncIterator()   // subscribed; nothing flows yet
/// var table = prices.makeAsyncIterator()
/// let connection = prices.connect()        // both see the very first price
/// // …
/// connection.cancel()                      // subscribers drain their buffers, then end
/// ```
///
/// Create it with ``_Concurrency/AsyncSequence/multicast(replay:buffering:)``.
public struct AsyncMulticastSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Sendable {
    public typealias Element = Base.Element
    public typealias Failure = Base.Failure
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    @usableFromInline
    let storage: MulticastStorage<Element, Failure>
    @usableFromInline
    let connectRule: ConnectRule

    @inlinable
    init(base: Base, replay: Int, buffering policy: SharedBufferingPolicy) {
        policy.validate(parameter: "buffering")
        precondition(replay >= 0, "multicast(replay:buffering:): replay must be at least 0, got \(replay)")
        self.storage = MulticastStorage(
            policy: policy, replay: replay, mode: .manual, upstream: MulticastStorage.pulling(base))
        self.connectRule = .never
    }

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, connectRule: ConnectRule) {
        self.storage = storage
        self.connectRule = connectRule
    }

    /// The elements a subscriber joining now would be replayed first, oldest first. A
    /// multicast's replay window is kept across connections (the connection, not the
    /// subscribers, decides when the upstream stops); ``resetReplayCache()`` clears it.
    ///
    /// ```swift
    /// let latest = prices.replayCache.last
    /// ```
    @inlinable
    public var replayCache: [Element] {
        self.storage.replayCache
    }

    /// Empties the replay cache for subscribers joining from now on (before a reconnection,
    /// for example). Subscribers already present keep what they have not read.
    ///
    /// ```swift
    /// connection.cancel()
    /// prices.resetReplayCache()
    /// prices.connect()
    /// ```
    @inlinable
    public func resetReplayCache() {
        self.storage.resetReplayCache()
    }

    /// Registers a new subscriber. It receives the replay window, then what the upstream
    /// produces once connected.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage, connectRule: self.connectRule)
    }

    /// Starts iterating the upstream, if it is not running, and returns the connection that
    /// owns that iteration.
    ///
    /// While connected, calling `connect()` again returns the same connection. After the
    /// connection was cancelled, `connect()` starts a fresh iteration of the base (a new
    /// `makeAsyncIterator()`). Once the upstream has finished or failed, the multicast is
    /// over: `connect()` returns a connection whose ``MulticastConnection/cancel()`` does
    /// nothing.
    @discardableResult
    public func connect() -> MulticastConnection {
        let storage = self.storage
        guard let epoch = storage.connect() else { return MulticastConnection(inertFor: storage) }
        return MulticastConnection(storage: storage, epoch: epoch) {
            storage.disconnect(epoch: epoch)
        }
    }

    /// The same multicast, seen through subscribers that connect it when they first wait
    /// for an element (and whenever they wait while it is not connected).
    ///
    /// ```swift
    /// let shared = ticks.multicast(replay: 1).autoconnect()
    /// for await tick in shared { show(tick) }   // the first wait connects
    /// ```
    ///
    /// Leaving still does not disconnect: to stop the upstream when the last subscriber
    /// leaves, use ``_Concurrency/AsyncSequence/share()`` instead.
    @inlinable
    public func autoconnect() -> AsyncMulticastSequence<Base> {
        AsyncMulticastSequence(storage: self.storage, connectRule: .onDemand)
    }

    /// The same multicast, seen through subscribers that connect it as soon as at least
    /// `minimumSubscribers` of them have joined (RxJava's `autoConnect(n)`): the way to start
    /// N subscribers together so that every one of them sees the first element.
    ///
    /// Joining is creating the iterator (`for await` does it first), so the connection
    /// happens inside the `makeAsyncIterator()` of the subscriber that makes the count,
    /// whether or not anyone waits yet. Subscribers of the multicast seen otherwise count
    /// too. Like ``autoconnect()``, leaving never disconnects; if the connection ends (it was
    /// cancelled through ``connect()``'s handle), the next subscriber to join while at least
    /// `minimumSubscribers` are present connects again.
    ///
    /// ```swift
    /// let feed = source.multicast().autoconnect(minimumSubscribers: 3)
    /// await withTaskGroup(of: Int.self) { group in
    ///     for _ in 0..<3 { group.addTask { await feed.reduce(0) { n, _ in n + 1 } } }
    /// }   // each of the three counted every element
    /// ```
    ///
    /// - Parameter minimumSubscribers: at least 1.
    @inlinable
    public func autoconnect(minimumSubscribers: Int) -> AsyncMulticastSequence<Base> {
        precondition(
            minimumSubscribers >= 1,
            "autoconnect(minimumSubscribers:): minimumSubscribers must be at least 1, got \(minimumSubscribers)")
        return AsyncMulticastSequence(storage: self.storage, connectRule: .atSubscriberCount(minimumSubscribers))
    }

    /// This multicast seen with a buffering policy of its own; see ``AsyncSharedView``.
    @inlinable
    public func buffering(_ policy: SharedBufferingPolicy) -> AsyncSharedView<Element, Failure> {
        policy.validate(parameter: "buffering(_:)")
        return AsyncSharedView(storage: self.storage, policy: policy, connectRule: self.connectRule)
    }

    /// The number of subscribers currently registered.
    @inlinable
    public var subscriberCount: Int {
        self.storage.subscriberCount
    }

    /// Iterates this multicast as a lag-reporting subscriber: besides the elements, it yields
    /// how many elements its policy dropped and where (``SharedEvent/missed(_:)``), and
    /// whether it was evicted (``SharedEvent/evicted``). `nil` takes the multicast's own policy.
    ///
    /// ```swift
    /// for await event in feed.events(buffering: .bufferingNewest(16)) {
    ///     if case .missed(let count) = event { print("this client missed \(count)") }
    /// }
    /// ```
    @inlinable
    public func events(buffering policy: SharedBufferingPolicy? = nil) -> AsyncSharedEvents<Element, Failure> {
        policy?.validate(parameter: "events(buffering:)")
        return AsyncSharedEvents(storage: self.storage, policy: policy, connectRule: self.connectRule)
    }

    /// The number of subscribers, as it changes: the current count first, then every new
    /// count (a slow observer skips to the latest). See ``AsyncSubscriberCounts``.
    ///
    /// ```swift
    /// for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
    /// ```
    @inlinable
    public var subscriberCounts: AsyncSubscriberCounts {
        AsyncSubscriberCounts(storage: self.storage)
    }

    /// Returns once at least `count` subscribers are registered (at once if they already
    /// are), so that a producer can start after its subscribers joined without polling.
    /// Throws `CancellationError` if the task is cancelled first.
    ///
    /// ```swift
    /// let tasks = (0..<3).map { _ in Task { for await price in prices { use(price) } } }
    /// try await prices.waitForSubscribers(atLeast: 3)
    /// prices.connect()   // all three see the first price
    /// ```
    @inlinable
    public func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        try await self.storage.waitForSubscribers(atLeast: count)
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Shares one iteration of this sequence, started explicitly with
    /// ``AsyncMulticastSequence/connect()`` (or on demand with
    /// ``AsyncMulticastSequence/autoconnect()``).
    ///
    /// ```swift
    /// let multicast = numbers.multicast()
    /// var a = multicast.makeAsyncIterator()    // joined, nothing flows yet
    /// var b = multicast.makeAsyncIterator()
    /// multicast.connect()                      // a and b both see the first element
    /// ```
    ///
    /// - Parameters:
    ///   - replay: how many of the latest elements a new subscriber receives first; `>= 0`.
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    @inlinable
    public func multicast(
        replay: Int = 0, buffering: SharedBufferingPolicy = .bounded(64)
    ) -> AsyncMulticastSequence<Self> {
        AsyncMulticastSequence(base: self, replay: replay, buffering: buffering)
    }
}
