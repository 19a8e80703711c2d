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
/// A multicast's replay window is kept across connections (the connection, not the
/// subscribers, decides when the upstream stops); ``resetReplayCache()`` clears it, before a
/// reconnection for example:
///
/// ```swift
/// connection.cancel()
/// prices.resetReplayCache()
/// prices.connect()
/// ```
///
/// Create it with ``_Concurrency/AsyncSequence/multicast(replay:buffering:)``.
public struct AsyncMulticastSequence<Element: Sendable, Failure: Error>: AsyncReplayingSequence {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    @inlinable
    init<Base: AsyncSequence & Sendable>(
        base: Base, replay: Int, buffering policy: SharedBufferingPolicy, clock: TimerClock = .continuous
    )
    where Base.Element == Element, Base.Failure == Failure {
        policy.validate(parameter: "buffering")
        precondition(replay >= 0, "multicast(replay:buffering:): replay must be at least 0, got \(replay)")
        self._core = _SharedCore(
            MulticastStorage(
                policy: policy, replay: replay, mode: .manual, clock: clock, upstream: MulticastStorage.pulling(base)))
    }

    @inlinable
    init(_ core: _SharedCore<Element, Failure>) {
        self._core = core
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
    public func autoconnect() -> AsyncMulticastSequence<Element, Failure> {
        AsyncMulticastSequence(_SharedCore(self.storage, connectRule: .onDemand))
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
    public func autoconnect(minimumSubscribers: Int) -> AsyncMulticastSequence<Element, Failure> {
        precondition(
            minimumSubscribers >= 1,
            "autoconnect(minimumSubscribers:): minimumSubscribers must be at least 1, got \(minimumSubscribers)")
        return AsyncMulticastSequence(_SharedCore(self.storage, connectRule: .atSubscriberCount(minimumSubscribers)))
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
    ) -> AsyncMulticastSequence<Element, Failure> {
        AsyncMulticastSequence(base: self, replay: replay, buffering: buffering)
    }

    /// ``multicast(replay:buffering:)`` timed on `clock`: the clock of a soft limit
    /// (``SharedBufferingPolicy/evicting(_:softLimit:)``), whose deadlines a subscriber above
    /// its soft count reaches whether or not anything is produced. A multicast has no
    /// keep-alive window: only the connection stops its upstream.
    ///
    /// ```swift
    /// let room = messages.multicast(
    ///     buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))),
    ///     clock: ContinuousClock())
    /// room.connect()
    /// ```
    ///
    /// - Parameters:
    ///   - replay: how many of the latest elements a new subscriber receives first; `>= 0`.
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - clock: the clock that times soft limits: its `now` is read (never under the lock)
    ///     and its `sleep(until:)` awaited (<doc:Clocks>).
    @inlinable
    public func multicast(
        replay: Int = 0, buffering: SharedBufferingPolicy = .bounded(64), clock: some Clock<Duration>
    ) -> AsyncMulticastSequence<Element, Failure> {
        AsyncMulticastSequence(base: self, replay: replay, buffering: buffering, clock: TimerClock(clock))
    }
}
