/// A subject that keeps the latest `replay` elements sent and gives them to each new
/// subscriber before the live ones, like RxSwift's `ReplaySubject` or Kotlin's
/// `MutableSharedFlow(replay:)`, for Swift Concurrency.
///
/// ``send(_:)`` puts the element in the replay cache before it returns, so a subscriber
/// created right after a `send` receives it: there is no upstream task to wait for (unlike
/// a subject behind `multicast(replay:)` and `connect()`).
///
/// ```swift
/// let messages = AsyncReplaySubject<String, Never>(replay: 2)
/// messages.send("a")
/// messages.send("b")
/// messages.send("c")
/// messages.finish()
/// for await m in messages { print(m) }   // b, c: the cache, then the end
/// ```
///
/// ``replayCache`` reads the cache and ``resetReplayCache()`` empties it. After ``finish()``
/// or ``fail(_:)`` further sends and completions are ignored; a subscriber created after
/// completion receives the cache, then the terminal event.
public final class AsyncReplaySubject<Element: Sendable, Failure: Error>: AsyncSubject, AsyncReplayingSequence {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// Creates a subject that replays the latest `replay` elements to new subscribers.
    ///
    /// - Parameters:
    ///   - replay: how many of the latest elements a new subscriber receives first;
    ///     at least 0 (0 makes it a passthrough subject).
    ///   - buffering: how each subscriber keeps elements it has not consumed yet. Under
    ///     `.bounded(n)` the synchronous ``send(_:)`` buffers past `n` (it cannot wait);
    ///     ``send(waitingForRoom:)`` waits instead. A dropping policy's limit below
    ///     `replay` also limits what a new subscriber is replayed. Under `.evicting(n)` a
    ///     new subscriber gets the whole replay, which counts against no limit: only what is
    ///     sent after it joined can evict it.
    ///   - clock: the clock that times a soft limit's duration (<doc:Clocks>)
    ///     (``SharedBufferingPolicy/evicting(_:softLimit:)``); `ContinuousClock` by default,
    ///     a test's manual clock for example.
    @inlinable
    public init(
        replay: Int, buffering: SharedBufferingPolicy = .unbounded,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        precondition(
            replay >= 0, "AsyncReplaySubject(replay:): replay must be at least 0, got \(replay)")
        buffering.validate(parameter: "buffering")
        self._core = _SharedCore(
            MulticastStorage(
                policy: buffering, replay: replay, mode: .push, clock: TimerClock(clock), upstream: nil))
    }

}
