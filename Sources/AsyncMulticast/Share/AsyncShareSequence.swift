/// An asynchronous sequence that shares one iteration of its base among any number of
/// subscribers. Create it with ``_Concurrency/AsyncSequence/share()``,
/// ``_Concurrency/AsyncSequence/share(buffering:)`` or ``_Concurrency/AsyncSequence/replay(_:buffering:keepAlive:replayExpiration:)``.
///
/// - **Each iterator is one subscriber.** It receives every element produced after it was
///   created (after the replayed ones, for `replay`), in upstream order.
/// - **Lazy start:** the first `next()` of any subscriber starts one task that iterates the
///   base. There is never more than one base iterator running.
/// - **Per-subscriber cancellation:** cancelling a subscriber's task makes its waiting
///   `next()` return `nil` at once (a later `next()` first returns the few elements its
///   iterator had already taken, see ``SharedIterator/next(isolation:)``); the others are not
///   affected.
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
public struct AsyncShareSequence<Element: Sendable, Failure: Error>: AsyncReplayingSequence {
    /// Each iterator is one subscriber; see ``SharedIterator``.
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// Every public way to create one comes here: `buffering` and `keepAlive` are checked
    /// here, `replay`'s count by the `replay` operators, their only source.
    @inlinable
    init<Base: AsyncSequence & Sendable>(
        base: Base, buffering policy: SharedBufferingPolicy, replay: Int, keepAlive: Duration,
        replayExpiration: Duration = .zero, clock: TimerClock = .continuous
    ) where Base.Element == Element, Base.Failure == Failure {
        policy.validate(parameter: "buffering")
        precondition(keepAlive >= .zero, "keepAlive must not be negative, got \(keepAlive)")
        precondition(replayExpiration >= .zero, "replayExpiration must not be negative, got \(replayExpiration)")
        self._core = _SharedCore(
            MulticastStorage(
                policy: policy, replay: replay, mode: .automatic, keepAlive: keepAlive,
                replayExpiration: replayExpiration, clock: clock, upstream: MulticastStorage.pulling(base)))
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
    @inlinable
    public func share() -> AsyncShareSequence<Element, Failure> {
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
    @inlinable
    public func share(buffering: SharedBufferingPolicy) -> AsyncShareSequence<Element, Failure> {
        AsyncShareSequence(base: self, buffering: buffering, replay: 0, keepAlive: .zero)
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Shares one iteration of this sequence, and keeps it running for `keepAlive` after the
    /// last subscriber left: a subscriber that arrives within the window continues the same
    /// iteration instead of restarting it.
    ///
    /// ```swift
    /// // Leaving a screen and coming back within 5 s does not restart location updates.
    /// let locations = locationSource.share(keepAlive: .seconds(5))
    /// ```
    ///
    /// - Parameters:
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - keepAlive: how long the upstream outlives its last subscriber; not negative. Any
    ///     length is accepted: one longer than the process lives (`.seconds(Int64.max)`)
    ///     means subscribers leaving never stop the upstream.
    @inlinable
    public func share(
        buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration
    ) -> AsyncShareSequence<Element, Failure> {
        AsyncShareSequence(base: self, buffering: buffering, replay: 0, keepAlive: keepAlive)
    }

    /// ``share(buffering:keepAlive:)`` timing its `keepAlive` window, and the duration of a
    /// soft limit (``SharedBufferingPolicy/evicting(_:softLimit:)``), on `clock` instead of
    /// `ContinuousClock` (a test's manual clock, for example).
    ///
    /// ```swift
    /// let location = updates.share(keepAlive: .seconds(5), clock: clock)
    /// ```
    ///
    /// - Parameters:
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - keepAlive: how long, on `clock`, the upstream outlives its last subscriber; not
    ///     negative, `.zero` by default. One of 2^40 seconds (about 35,000 years) or longer, such as
    ///     `.seconds(Int64.max)`, is not timed at all: subscribers leaving never stop the
    ///     upstream, whatever the clock does.
    ///   - clock: the clock that times the window and a soft limit: its `now` is read and its
    ///     `sleep(until:)` awaited. What it must do, and what a clock that misbehaves does:
    ///     <doc:Clocks>.
    @inlinable
    public func share(
        buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration = .zero, clock: some Clock<Duration>
    ) -> AsyncShareSequence<Element, Failure> {
        AsyncShareSequence(base: self, buffering: buffering, replay: 0, keepAlive: keepAlive, clock: TimerClock(clock))
    }

    /// Shares one iteration of this sequence, and gives each new subscriber the latest
    /// `count` elements already produced (oldest first) before the live ones.
    ///
    /// The lifecycle is that of ``share()``. When the last subscriber leaves and the upstream
    /// stops, the replayed elements expire (after `replayExpiration`, by default at once), so
    /// a restarted upstream starts afresh; they survive the upstream's end: after it finished
    /// or failed, a new subscriber gets the replayed elements, then the terminal event.
    /// `replay(0)` is `share()`. ``AsyncShareSequence/replayCache`` reads them and
    /// ``AsyncShareSequence/resetReplayCache()`` clears them.
    ///
    /// ```swift
    /// let state = stateUpdates.replay(1)
    /// // A subscriber arriving late gets the current state at once.
    /// for await current in state { render(current) }
    /// ```
    ///
    /// A subscriber with a dropping policy (`.bufferingNewest(n)`, `.bufferingOldest(n)`)
    /// receives at most `n` replayed elements: the newest `n` of the window, with either
    /// policy (a replay is about the latest values).
    ///
    /// - Parameters:
    ///   - count: how many of the latest elements a new subscriber receives first; `>= 0`.
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - keepAlive: how long the upstream outlives its last subscriber; not negative. Any
    ///     length is accepted: one longer than the process lives (`.seconds(Int64.max)`)
    ///     means subscribers leaving never stop the upstream.
    ///   - replayExpiration: how long the replayed elements outlive an upstream stopped
    ///     because its last subscriber left (after `keepAlive`); not negative. With the
    ///     default, `.zero`, a restarted upstream never greets new subscribers with elements
    ///     of its previous run. `.seconds(Int64.max)` keeps them for the life of the process.
    ///     An upstream that finished or failed keeps them whatever this says.
    @inlinable
    public func replay(
        _ count: Int, buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero
    ) -> AsyncShareSequence<Element, Failure> {
        precondition(count >= 0, "replay(_:): count must be at least 0, got \(count)")
        return AsyncShareSequence(
            base: self, buffering: buffering, replay: count, keepAlive: keepAlive, replayExpiration: replayExpiration)
    }

    /// ``replay(_:buffering:keepAlive:replayExpiration:)`` timing its `keepAlive` and
    /// `replayExpiration` windows, and the duration of a soft limit
    /// (``SharedBufferingPolicy/evicting(_:softLimit:)``), on `clock` instead of
    /// `ContinuousClock` (a test's manual clock, for example).
    ///
    /// ```swift
    /// let state = updates.replay(1, keepAlive: .seconds(5), replayExpiration: .seconds(60), clock: clock)
    /// ```
    ///
    /// - Parameters:
    ///   - count: how many of the latest elements a new subscriber receives first; `>= 0`.
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - keepAlive: how long, on `clock`, the upstream outlives its last subscriber; not
    ///     negative. One of 2^40 seconds (about 35,000 years) or longer, such as
    ///     `.seconds(Int64.max)`, is not timed at all: subscribers leaving never stop the
    ///     upstream, whatever the clock does.
    ///   - replayExpiration: how long, on `clock`, the replayed elements outlive an upstream
    ///     stopped because its last subscriber left; not negative. One of 2^40 seconds or
    ///     longer keeps them for the life of the process, whatever the clock does.
    ///   - clock: the clock that times both windows and a soft limit: its `now` is read and its
    ///     `sleep(until:)` awaited. What it must do, and what a clock that misbehaves does:
    ///     <doc:Clocks>.
    @inlinable
    public func replay(
        _ count: Int, buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero, clock: some Clock<Duration>
    ) -> AsyncShareSequence<Element, Failure> {
        precondition(count >= 0, "replay(_:): count must be at least 0, got \(count)")
        return AsyncShareSequence(
            base: self, buffering: buffering, replay: count, keepAlive: keepAlive,
            replayExpiration: replayExpiration, clock: TimerClock(clock))
    }
}
