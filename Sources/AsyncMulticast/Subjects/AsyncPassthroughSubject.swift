/// A subject that broadcasts the elements you send to every current subscriber, like
/// Combine's `PassthroughSubject`, for Swift Concurrency.
///
/// Each iterator is a subscriber that receives what is sent after it was created. Sending
/// never suspends and can be done from any context; use ``send(waitingForRoom:)`` to wait
/// while a `.bounded` subscriber is full instead.
///
/// ```swift
/// let events = AsyncPassthroughSubject<String, Never>()
/// var listener = events.makeAsyncIterator()   // subscribed from here on
/// events.send("hello")
/// events.send("world")
/// events.finish()
/// while let e = await listener.next() { print("got", e) }   // got hello, got world
/// ```
///
/// A `Task { for await e in events { … } }` subscribes when the task starts running, which
/// may be after sends made right after creating it; create the iterator first (or wait
/// for ``subscriberCount``) when the first elements matter.
///
/// After ``finish()`` or ``fail(_:)`` further sends and completions are ignored; a subscriber
/// created after completion receives the terminal event at once.
public final class AsyncPassthroughSubject<Element: Sendable, Failure: Error>: AsyncSubject {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// Creates a subject.
    ///
    /// - Parameters:
    ///   - buffering: how each subscriber keeps elements it has not consumed yet. Under
    ///     `.bounded(n)` the synchronous ``send(_:)`` buffers past `n` (it cannot wait);
    ///     ``send(waitingForRoom:)`` waits instead.
    ///   - clock: the clock that times a soft limit's duration (<doc:Clocks>)
    ///     (``SharedBufferingPolicy/evicting(_:softLimit:)``); `ContinuousClock` by default,
    ///     a test's manual clock for example.
    @inlinable
    public init(buffering: SharedBufferingPolicy = .unbounded, clock: some Clock<Duration> = ContinuousClock()) {
        buffering.validate(parameter: "buffering")
        self._core = _SharedCore(
            MulticastStorage(
                policy: buffering, replay: 0, mode: .push, clock: TimerClock(clock), upstream: nil))
    }

}
