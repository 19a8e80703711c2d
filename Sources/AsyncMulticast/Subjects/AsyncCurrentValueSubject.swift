/// A subject that holds a current value and broadcasts every change, like Combine's
/// `CurrentValueSubject`, for Swift Concurrency.
///
/// Each iterator is a subscriber that first receives the current value, then every value
/// sent after it was created. Setting ``value`` sends it.
///
/// ```swift
/// let count = AsyncCurrentValueSubject<Int, Never>(0)
/// var screen = count.makeAsyncIterator()       // subscribed: it holds the current value, 0
/// count.update { $0 + 1 }                      // atomic read-modify-send
/// count.finish()
/// while let n = await screen.next() { print("count:", n) }   // count: 1 (it replaced the unread 0)
/// ```
///
/// The default policy, `.bufferingNewest(1)`, makes a slow subscriber skip to the latest
/// value, which is what a state holder wants. After ``finish()`` or ``fail(_:)`` further
/// sends are ignored and ``value`` keeps the last value; a subscriber created after
/// completion receives the last value, then the terminal event.
public final class AsyncCurrentValueSubject<Element: Sendable, Failure: Error>: AsyncSubject {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// Creates a subject holding `value`.
    ///
    /// - Parameters:
    ///   - value: the current value until the first ``send(_:)``; each new subscriber
    ///     receives the current value first.
    ///   - buffering: how each subscriber keeps values it has not consumed yet.
    ///     Under `.bounded(n)` the synchronous ``send(_:)`` buffers past `n` (it cannot wait).
    ///     With `.bufferingNewest(0)` or `.bufferingOldest(0)` a subscriber only receives
    ///     values sent while it waits in `next()`, so it does not receive the current value.
    ///   - clock: the clock that times a soft limit's duration (<doc:Clocks>)
    ///     (``SharedBufferingPolicy/evicting(_:softLimit:)``); `ContinuousClock` by default,
    ///     a test's manual clock for example.
    @inlinable
    public init(
        _ value: Element, buffering: SharedBufferingPolicy = .bufferingNewest(1),
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        buffering.validate(parameter: "buffering")
        self._core = _SharedCore(
            MulticastStorage(
                policy: buffering, replay: 1, mode: .push, clock: TimerClock(clock), upstream: nil))
        self.storage.send(value)
    }

    /// The current value: the last one sent. Setting it sends the new value (ignored after
    /// completion).
    ///
    /// Reading and setting are two separate operations: `value += 1` or
    /// `value.append(x)` compiles, but it reads, then sends, and a send from another task
    /// between the two is lost. Use ``update(_:)`` to change the value based on the current
    /// one atomically, or make every change from one place that runs them one at a time
    /// (an actor).
    @inlinable
    public var value: Element {
        get {
            guard let value = self.storage.latestElement else {
                preconditionFailure("a current-value subject always holds a value")
            }
            return value
        }
        set {
            self.storage.send(newValue)
        }
    }

    /// Replaces the current value with `transform(value)` and sends it, atomically: no
    /// other send can slip between reading the value and sending the new one (unlike
    /// `value += 1`, which reads and then sends). Ignored after completion.
    ///
    /// `transform` runs while the subject is locked: keep it short, and do not use this
    /// subject (or anything that waits for it) inside it.
    ///
    /// ```swift
    /// followers.update { $0 + 1 }
    /// ```
    public func update(_ transform: (Element) -> Element) {
        self.storage.updateLatest(transform)
    }

}
