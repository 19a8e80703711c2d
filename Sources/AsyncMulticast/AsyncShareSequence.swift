/// An asynchronous sequence that shares one iteration of its base among any number of
/// subscribers. Create it with ``_Concurrency/AsyncSequence/share()``,
/// ``_Concurrency/AsyncSequence/share(buffering:)`` or ``_Concurrency/AsyncSequence/replay(_:buffering:)``.
///
/// - **Each iterator is one subscriber.** It receives every element produced after it was
///   created (after the replayed ones, for `replay`), in upstream order.
/// - **Lazy start:** the first `next()` of any subscriber starts one task that iterates the
///   base. There is never more than one base iterator running.
/// - **Per-subscriber cancellation:** cancelling a subscriber's task makes its `next()`
///   return `nil` at once; the others are not affected.
/// - **Last one out cancels the upstream**, even while this value is still referenced; a
///   later subscriber starts a fresh iteration with a new `makeAsyncIterator()`.
/// - **Terminal events are sticky:** after the base finished or threw, every subscriber gets
///   its buffered elements and then `nil` or the error; later subscribers get it at once.
///
/// ```swift
/// let shared = temperatures.share()
/// Task { for await t in shared { display.show(t) } }
/// Task { for await t in shared { logger.log(t) } }
/// ```
public struct AsyncShareSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Sendable {
    public typealias Element = Base.Element
    public typealias Failure = Base.Failure
    /// Each iterator is one subscriber; see ``SharedIterator``.
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    let storage: MulticastStorage<Element, Failure>

    init(base: Base, buffering policy: SharedBufferingPolicy, replay: Int, keepAlive: Duration) {
        policy.validate(parameter: "buffering")
        precondition(replay >= 0, "replay: the count must be at least 0, got \(replay)")
        self.storage = MulticastStorage(
            policy: policy, replay: replay, mode: .automatic, keepAlive: keepAlive,
            upstream: MulticastStorage.pulling(base))
    }

    /// Registers a new subscriber.
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage)
    }

    /// The number of subscribers currently registered: iterators that exist and have not
    /// left (by cancellation, by reaching the end, or by being released).
    public var subscriberCount: Int {
        self.storage.subscriberCount
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Shares one iteration of this sequence among all iterators of the result, with
    /// lossless back-pressure: `.bounded(64)`.
    ///
    /// ```swift
    /// let shared = stream.share()
    /// async let a: [Int] = shared.reduce(into: []) { $0.append($1) }
    /// async let b: [Int] = shared.reduce(into: []) { $0.append($1) }
    /// ```
    ///
    /// This is a separate overload (rather than a defaulted parameter) so that a plain
    /// `share()` stays unambiguous when swift-async-algorithms is imported too.
    public func share() -> AsyncShareSequence<Self> {
        AsyncShareSequence(base: self, buffering: .bounded(64), replay: 0, keepAlive: .zero)
    }

    /// Shares one iteration of this sequence among all iterators of the result, buffering
    /// for each subscriber according to `buffering`.
    ///
    /// ```swift
    /// let latest = sensor.readings.share(buffering: .bufferingNewest(1))
    /// ```
    ///
    /// - Parameter buffering: how unconsumed elements are kept for each subscriber.
    ///   `.bounded(n)` needs `n >= 1`; the dropping policies need `n >= 0`.
    public func share(buffering: SharedBufferingPolicy) -> AsyncShareSequence<Self> {
        AsyncShareSequence(base: self, buffering: buffering, replay: 0, keepAlive: .zero)
    }
}
