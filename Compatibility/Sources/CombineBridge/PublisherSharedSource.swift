import AsyncMulticast
import OpenCombine

extension Publisher where Output: Sendable {
    /// This publisher as a shared sequence: subscribed to when the first subscriber of the
    /// result arrives, and cancelled when the last one leaves (or `keepAlive` later), then
    /// subscribed to again for the next one. A `Subject` held by existing Combine code
    /// becomes something `for await` loops share, without a subscription that outlives them.
    ///
    /// ```swift
    /// let prices = pricesSubject.sharedSource(replay: 1)
    /// Task { for await price in prices { ticker.show(price) } }
    /// ```
    ///
    /// The publisher's completion ends the source for good, as
    /// ``AsyncSharedSource/Emitter/finish()`` does: later subscribers get the end at once.
    ///
    /// - Parameters:
    ///   - buffering: how each subscriber keeps values it has not read yet; a publisher cannot
    ///     be made to wait, so `.bounded(n)` buffers past `n`.
    ///   - replay: how many of the latest values a new subscriber receives first.
    ///   - keepAlive: how long, on `clock`, the Combine subscription outlives the last
    ///     subscriber.
    ///   - replayExpiration: how long, on `clock`, the replayed values outlive a cancelled
    ///     subscription.
    ///   - clock: times `keepAlive` and `replayExpiration`.
    public func sharedSource(
        buffering: SharedBufferingPolicy = .unbounded, replay: Int = 0, keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero, clock: some Clock<Duration> = ContinuousClock()
    ) -> AsyncSharedSource<Output, Failure> {
        makeSharedSource(
            of: UncheckedSendable(self.eraseToAnyPublisher()), buffering: buffering, replay: replay,
            keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock)
    }
}

/// ``Publisher/sharedSource(buffering:replay:keepAlive:replayExpiration:clock:)`` on the
/// erased publisher: outside the extension, so that the closures capture no `Self` type.
///
/// The publisher is subscribed to from the library's session task, which Combine allows from
/// any thread (see `UncheckedSendable`).
private func makeSharedSource<Output: Sendable, Failure: Error>(
    of publisher: UncheckedSendable<AnyPublisher<Output, Failure>>, buffering: SharedBufferingPolicy, replay: Int,
    keepAlive: Duration, replayExpiration: Duration, clock: some Clock<Duration>
) -> AsyncSharedSource<Output, Failure> {
    AsyncSharedSource(
        buffering: buffering, replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock
    ) { emitter in
        let subscription = publisher.value.sink(
            receiveCompletion: { completion in
                switch completion {
                case .finished: emitter.finish()
                case .failure(let error): emitter.fail(error)
                }
            },
            receiveValue: { emitter.send($0) })
        // The stop closure runs in the task that ran this one: the `AnyCancellable` never
        // crosses tasks, and cancelling it ends the Combine subscription.
        return { subscription.cancel() }
    }
}
