/// A shared sequence fed by a callback-based producer (a location manager, a network path
/// monitor, a timer) that is **started when the first subscriber arrives and stopped when
/// the last one leaves**, and started again for the next subscriber.
///
/// The `start` closure receives an ``Emitter`` to send values through, starts the producer,
/// and returns the closure that stops it:
///
/// ```swift
/// let paths = AsyncSharedSource<NetworkPath, Never> { emitter in
///     let monitor = PathMonitor()
///     monitor.onUpdate = { path in emitter.send(path) }
///     monitor.start()
///     return { monitor.stop() }   // called when the last subscriber leaves
/// }
/// Task { for await path in paths { statusBar.show(path) } }
/// Task { for await path in paths { sync.adapt(to: path) } }
/// ```
///
/// Lifecycle: the first subscriber's first `next()` calls `start` (once, never
/// concurrently with a previous session's `stop`); when the subscriber count drops to zero,
/// or after `keepAlive` without a new subscriber, `stop` is called; a later subscriber calls
/// `start` again. If the producer calls ``Emitter/finish()`` or ``Emitter/fail(_:)``, every
/// subscriber ends after its buffered values, `stop` is called, and the source stays ended:
/// a later subscriber gets the end (or the error) at once, and `start` is never called
/// again. To retry a failed producer, create a new source.
///
/// `stop` may be `async`: closing a connection can be awaited, and the next session's
/// `start` waits until `stop` has returned, so two sessions never overlap. It runs in the
/// session's task, cancelled when the last subscriber left: an `await` in it that stops on
/// cancellation (`Task.sleep`, say) returns at once.
///
/// ```swift
/// let notifications = AsyncSharedSource<String, any Error> { emitter in
///     let connection = Connection()
///     connection.onNotification = { emitter.send($0) }
///     return { await connection.close() }   // the next session starts after this returns
/// }
/// ```
public struct AsyncSharedSource<Element: Sendable, Failure: Error>: AsyncReplayingSequence {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    /// Sends values from the producer to the subscribers of one session (from `start` until
    /// `stop`). Calls after the session ended are ignored, so a late callback is harmless.
    public struct Emitter: Sendable {
        @usableFromInline
        let storage: MulticastStorage<Element, Failure>
        @usableFromInline
        let epoch: UInt64
        @usableFromInline
        let ended: AsyncStream<Never>.Continuation

        @inlinable
        init(storage: MulticastStorage<Element, Failure>, epoch: UInt64, ended: AsyncStream<Never>.Continuation) {
            self.storage = storage
            self.epoch = epoch
            self.ended = ended
        }

        /// Delivers `element` to every subscriber. Never suspends.
        @inlinable
        public func send(_ element: Element) {
            _ = self.storage.offer(element, epoch: self.epoch, respectingBounds: false)
        }

        /// Ends the source: subscribers receive what is buffered, then `nil`.
        @inlinable
        public func finish() {
            self.storage.finish(epoch: self.epoch, failure: nil)
            self.ended.finish()
        }

        /// Ends the source with an error: subscribers receive what is buffered, then `error`.
        @inlinable
        public func fail(_ error: Failure) {
            self.storage.finish(epoch: self.epoch, failure: error)
            self.ended.finish()
        }
    }

    public let _core: _SharedCore<Element, Failure>

    /// Creates a shared source.
    ///
    /// `stop` need not be `Sendable`: it is called in the same task that called `start`, so
    /// it may capture what `start` created, such as a Combine `AnyCancellable`:
    ///
    /// ```swift
    /// let prices = AsyncSharedSource<Price, Never> { emitter in
    ///     let subscription = pricePublisher.sink { emitter.send($0) }   // AnyCancellable
    ///     return { subscription.cancel() }
    /// }
    /// ```
    ///
    /// `start` is `@Sendable`, and Combine's publishers are not `Sendable`: in Swift 6 mode,
    /// the example compiles after `@preconcurrency import Combine` (or `OpenCombine`, as the
    /// repository's `Compatibility` package checks).
    ///
    /// - Parameters:
    ///   - buffering: how each subscriber keeps values it has not consumed yet. A callback
    ///     cannot wait, so `.bounded(n)` buffers past `n` like `.unbounded` (the default).
    ///   - replay: how many of the latest values a new subscriber receives first; `>= 0`.
    ///   - keepAlive: how long the producer keeps running after the last subscriber left;
    ///     a subscriber arriving within the window continues the same session.
    ///   - replayExpiration: how long the replayed values outlive a stopped session; by
    ///     default they expire at once, so a new session never greets its subscribers with
    ///     values of the previous one. `.seconds(Int64.max)` keeps them.
    ///   - start: starts the producer for a new session and returns the closure that stops
    ///     it, which may be `async`: the next session starts after it returned.
    @inlinable
    public init(
        buffering: SharedBufferingPolicy = .unbounded,
        replay: Int = 0,
        keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero,
        start: @escaping @Sendable (Emitter) -> () async -> Void
    ) {
        self.init(
            buffering: buffering, replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration,
            timerClock: .continuous, start: start)
    }

    /// ``init(buffering:replay:keepAlive:replayExpiration:start:)`` timing its `keepAlive`
    /// and `replayExpiration` windows, and a soft limit's duration
    /// (``SharedBufferingPolicy/evicting(_:softLimit:)``), on `clock` instead of
    /// `ContinuousClock`.
    ///
    /// ```swift
    /// let paths = AsyncSharedSource<Path, Never>(keepAlive: .seconds(2), clock: testClock) { emitter in
    ///     monitor.onUpdate = { emitter.send($0) }
    ///     return { monitor.stop() }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - buffering: how each subscriber keeps values it has not consumed yet. A callback
    ///     cannot wait, so `.bounded(n)` buffers past `n` like `.unbounded` (the default).
    ///   - replay: how many of the latest values a new subscriber receives first; `>= 0`.
    ///   - keepAlive: how long, on `clock`, the producer keeps running after the last
    ///     subscriber left. One of 2^40 seconds (about 35,000 years) or longer, such as
    ///     `.seconds(Int64.max)`, is not timed at all: subscribers leaving never stop it.
    ///   - replayExpiration: how long, on `clock`, the replayed values outlive a stopped
    ///     session. One of 2^40 seconds or longer keeps them.
    ///   - clock: the clock that times both windows and a soft limit: its `now` is read and its
    ///     `sleep(until:)` awaited (a window that closes calls `stop`). What it must do, and
    ///     what a clock that misbehaves does: <doc:Clocks>.
    ///   - start: starts the producer for a new session and returns the closure that stops
    ///     it, which may be `async`: the next session starts after it returned.
    @inlinable
    public init(
        buffering: SharedBufferingPolicy = .unbounded,
        replay: Int = 0,
        keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero,
        clock: some Clock<Duration>,
        start: @escaping @Sendable (Emitter) -> () async -> Void
    ) {
        self.init(
            buffering: buffering, replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration,
            timerClock: TimerClock(clock), start: start)
    }

    @inlinable
    init(
        buffering: SharedBufferingPolicy, replay: Int, keepAlive: Duration, replayExpiration: Duration,
        timerClock: TimerClock, start: @escaping @Sendable (Emitter) -> () async -> Void
    ) {
        buffering.validate(parameter: "buffering")
        precondition(replay >= 0, "AsyncSharedSource: replay must be at least 0, got \(replay)")
        precondition(keepAlive >= .zero, "keepAlive must not be negative, got \(keepAlive)")
        precondition(replayExpiration >= .zero, "replayExpiration must not be negative, got \(replayExpiration)")
        self._core = _SharedCore(
            MulticastStorage(
                policy: buffering, replay: replay, mode: .automatic, keepAlive: keepAlive,
                replayExpiration: replayExpiration, clock: timerClock,
                upstream: { sink in
                    let (ended, endedContinuation) = AsyncStream.makeStream(of: Never.self)
                    // `stop` stays in this task: it is created and called here.
                    let stop = start(Emitter(storage: sink.storage, epoch: sink.epoch, ended: endedContinuation))
                    // Ends when the session's task is cancelled (the last subscriber left) or
                    // the producer finished.
                    for await _ in ended {}
                    // Awaited here, so the next session's `start` (chained after this task)
                    // waits for it: two sessions never overlap.
                    await stop()
                }))
    }
}
