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
    let connectsOnDemand: Bool

    @inlinable
    init(base: Base, replay: Int, buffering policy: SharedBufferingPolicy) {
        policy.validate(parameter: "buffering")
        precondition(replay >= 0, "multicast(replay:buffering:): replay must be at least 0, got \(replay)")
        self.storage = MulticastStorage(
            policy: policy, replay: replay, mode: .manual, upstream: MulticastStorage.pulling(base))
        self.connectsOnDemand = false
    }

    @inlinable
    init(storage: MulticastStorage<Element, Failure>, connectsOnDemand: Bool) {
        self.storage = storage
        self.connectsOnDemand = connectsOnDemand
    }

    /// Registers a new subscriber. It receives the replay window, then what the upstream
    /// produces once connected.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage, connectsOnDemand: self.connectsOnDemand)
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
    /// for await tick in shared { … }   // the first wait connects
    /// ```
    ///
    /// Leaving still does not disconnect: to stop the upstream when the last subscriber
    /// leaves, use ``_Concurrency/AsyncSequence/share()`` instead.
    @inlinable
    public func autoconnect() -> AsyncMulticastSequence<Base> {
        AsyncMulticastSequence(storage: self.storage, connectsOnDemand: true)
    }

    /// This multicast seen with a buffering policy of its own; see ``AsyncSharedView``.
    @inlinable
    public func buffering(_ policy: SharedBufferingPolicy) -> AsyncSharedView<Element, Failure> {
        policy.validate(parameter: "buffering(_:)")
        return AsyncSharedView(storage: self.storage, policy: policy, connectsOnDemand: self.connectsOnDemand)
    }

    /// The number of subscribers currently registered.
    @inlinable
    public var subscriberCount: Int {
        self.storage.subscriberCount
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
