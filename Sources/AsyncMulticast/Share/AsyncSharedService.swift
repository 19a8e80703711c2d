/// A shared sequence whose upstream runs inside a task you own: its ``run()``, as Kotlin's
/// `shareIn(scope, started, replay)` runs it in the caller's scope. Create it with
/// ``_Concurrency/AsyncSequence/sharedService(replay:buffering:started:)``.
///
/// `share()` iterates its base in a task of its own, which belongs to nobody: graceful
/// shutdown does not reach it, and it runs at a priority nobody chose. Here the iteration runs
/// in tasks that ``run()`` creates and awaits, so it sees `run()`'s task-local values and
/// priority, and ends when `run()` is cancelled. Subscribers join and leave as with `share()`;
/// ``SharingStarted`` says when the upstream starts and stops.
///
/// ```swift
/// let ticks = tickSource.sharedService(replay: 1, started: .eagerly)
/// await withDiscardingTaskGroup { group in
///     group.addTask { await ticks.run() }   // hosts the upstream until cancelled
///     group.addTask { for await tick in ticks { render(tick) } }
/// }
/// ```
///
/// In a swift-service-lifecycle `ServiceGroup`, run it beside the server through a small
/// `Service` whose `run()` calls this one inside `cancelWhenGracefulShutdown`: graceful
/// shutdown is a request, not a cancellation, and this library does not depend on
/// swift-service-lifecycle to hear it (a bare `extension AsyncSharedService: Service {}`
/// compiles, but would keep the group from shutting down); once `run()` returned, the
/// service waits with ``AsyncSubscribableSequence/waitUntilDrained(within:)`` until every
/// subscriber has read what was buffered for it and the end. The Share guide's
/// [Structured sharing](<doc:Share#Structured-sharing>) section shows the service and the
/// order of a streaming server's services.
///
/// - **Before `run()`**, subscribers may join; under `.lazily` or `.whileSubscribed` their
///   demand starts the upstream once `run()` runs.
/// - **When `run()` is cancelled** (graceful shutdown), the upstream iteration is cancelled
///   and `run()` returns once it has ended: every subscriber receives what was buffered for
///   it, then `nil`, and later subscribers get the replayed elements (if any), then `nil`,
///   at once (a replay whose expiry window was open expires then). No task of the service
///   is left running.
/// - **When the upstream ends**, its subscribers get the end as with `share()`, and `run()`
///   returns, or throws the upstream's error.
/// - `run()` runs once: calling it while it runs stops the program; after it returned, it
///   returns at once.
public struct AsyncSharedService<Element: Sendable, Failure: Error>: AsyncReplayingSequence {
    /// Each iterator is one subscriber; see ``SharedIterator``.
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    public let _core: _SharedCore<Element, Failure>

    /// When the upstream starts and stops.
    public let started: SharingStarted

    @inlinable
    init<Base: AsyncSequence & Sendable>(
        base: Base, replay: Int, buffering policy: SharedBufferingPolicy, started: SharingStarted, clock: TimerClock
    ) where Base.Element == Element, Base.Failure == Failure {
        precondition(replay >= 0, "sharedService(replay:): replay must be at least 0, got \(replay)")
        policy.validate(parameter: "buffering")
        let mode: UpstreamMode
        let keepAlive: Duration
        let replayExpiration: Duration
        switch started.strategy {
        case .eagerly:
            (mode, keepAlive, replayExpiration) = (.manual, .zero, .seconds(Int64.max))
        case .lazily:
            (mode, keepAlive, replayExpiration) = (.automatic, .seconds(Int64.max), .seconds(Int64.max))
        case .whileSubscribed(let window, let expiration):
            (mode, keepAlive, replayExpiration) = (.automatic, window, expiration)
        }
        self.started = started
        self._core = _SharedCore(
            MulticastStorage(
                policy: policy, replay: replay, mode: mode, keepAlive: keepAlive,
                replayExpiration: replayExpiration, clock: clock, hosted: true,
                upstream: MulticastStorage.pulling(base)))
    }

    /// Hosts the upstream: iterates the base, as ``started`` says, in tasks this call creates
    /// and awaits, until this task is cancelled or the upstream ends. Returns once nothing
    /// of the service runs any more; throws the upstream's error if it failed.
    ///
    /// ```swift
    /// let hosting = Task { await ticks.run() }
    /// // ... subscribers read ticks ...
    /// hosting.cancel()   // they get what was buffered, then nil
    /// ```
    @inlinable
    public func run() async throws(Failure) {
        if case .eagerly = self.started.strategy {
            try await self._core.storage.host(connectingAtOnce: true)
        } else {
            try await self._core.storage.host(connectingAtOnce: false)
        }
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// Shares one iteration of this sequence among all iterators of the result, like
    /// ``share(buffering:)``, but iterates it inside the result's
    /// ``AsyncSharedService/run()``, which you run in a task you own (a task group, a
    /// `ServiceGroup`), instead of a task of its own.
    ///
    /// ```swift
    /// let prices = feed.sharedService(replay: 1, started: .whileSubscribed(keepAlive: .seconds(5)))
    /// ```
    ///
    /// - Parameters:
    ///   - replay: how many of the latest elements a new subscriber receives first; at
    ///     least 0.
    ///   - buffering: how unconsumed elements are kept for each subscriber.
    ///   - started: when the upstream starts and stops (``SharingStarted``).
    @inlinable
    public func sharedService(
        replay: Int = 0, buffering: SharedBufferingPolicy = .bounded(64),
        started: SharingStarted = .whileSubscribed()
    ) -> AsyncSharedService<Element, Failure> {
        AsyncSharedService(base: self, replay: replay, buffering: buffering, started: started, clock: .continuous)
    }

    /// ``sharedService(replay:buffering:started:)`` timing `started`'s windows and a soft
    /// limit's duration on `clock` instead of `ContinuousClock` (a test's manual clock).
    ///
    /// ```swift
    /// let location = updates.sharedService(started: .whileSubscribed(keepAlive: .seconds(5)), clock: clock)
    /// ```
    @inlinable
    public func sharedService(
        replay: Int = 0, buffering: SharedBufferingPolicy = .bounded(64),
        started: SharingStarted = .whileSubscribed(), clock: some Clock<Duration>
    ) -> AsyncSharedService<Element, Failure> {
        AsyncSharedService(base: self, replay: replay, buffering: buffering, started: started, clock: TimerClock(clock))
    }
}
