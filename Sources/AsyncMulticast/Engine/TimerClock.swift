/// The clock a storage's timer (keep-alive and replay-expiry windows) reads and sleeps on:
/// any `Clock` whose `Duration` is `Swift.Duration`, erased so that the storage is not
/// generic over it. Instants are kept as durations since the clock's reading at creation.
///
/// Only the timer path uses it (a subscriber leaving last, the timer task): nothing per
/// element.
@usableFromInline
struct TimerClock: Sendable {
    /// The time elapsed on the clock since this value was created.
    @usableFromInline
    let now: @Sendable () -> Duration
    /// Sleeps until the clock reads `deadline` (as returned by `now`); throws if cancelled,
    /// or if the user's clock fails (the timer then closes the open window at once).
    @usableFromInline
    let sleepUntil: @Sendable (Duration) async throws -> Void

    @inlinable
    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        self.now = { origin.duration(to: clock.now) }
        self.sleepUntil = { deadline in try await clock.sleep(until: origin.advanced(by: deadline), tolerance: nil) }
    }

    /// The real clock that keeps counting while the system sleeps: the default.
    @inlinable
    static var continuous: TimerClock { TimerClock(ContinuousClock()) }
}

extension Duration {
    /// `self + other`, or the largest (smallest) `Duration` where that sum would overflow: a
    /// clock read near `Duration`'s limit (a user's clock may jump there) must not trap
    /// under the lock. Such a deadline is never reached.
    @inlinable
    func saturatingAdding(_ other: Duration) -> Duration {
        let (sum, overflow) = self.attoseconds.addingReportingOverflow(other.attoseconds)
        guard overflow else { return Duration(attoseconds: sum) }
        return Duration(attoseconds: other.attoseconds > 0 ? .max : .min)
    }
}
