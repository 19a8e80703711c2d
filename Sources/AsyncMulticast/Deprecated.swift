// The 0.1.0 spellings that were renamed, kept compiling with a deprecation warning and a
// fix-it (`renamed:`), so that code written for 0.1.0 builds unchanged. To be removed in a
// later minor version; CHANGELOG.md lists each one under "Deprecated". `.ci/deprecations`
// is a package that uses every one and `.ci/deprecation-check.sh` checks its warnings.

/// Renamed ``AsyncSubscribableSequence``: the old name was one letter away from
/// ``AsyncShareSequence``, the type `share()` returns.
@available(*, deprecated, renamed: "AsyncSubscribableSequence")
public typealias AsyncSharedSequence = AsyncSubscribableSequence

extension SharingStarted {
    /// Renamed ``whileSubscribed(keepAlive:replayExpiration:)``: the keep-alive window has
    /// the name `share(buffering:keepAlive:)` gives it.
    @available(*, deprecated, renamed: "whileSubscribed(keepAlive:replayExpiration:)")
    @inlinable
    public static func whileSubscribed(
        stopTimeout: Duration, replayExpiration: Duration = .zero
    ) -> SharingStarted {
        precondition(
            stopTimeout >= .zero, "whileSubscribed(stopTimeout:): stopTimeout must not be negative, got \(stopTimeout)")
        return .whileSubscribed(keepAlive: stopTimeout, replayExpiration: replayExpiration)
    }
}

extension AsyncReplaySubject {
    /// Renamed ``init(replay:buffering:clock:)``: the count of elements replayed has the
    /// name `replay(_:)`, `multicast(replay:)` and `sharedService(replay:)` give it.
    @available(*, deprecated, renamed: "init(replay:buffering:clock:)")
    @inlinable
    public convenience init(
        bufferSize: Int, buffering: SharedBufferingPolicy = .unbounded,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        precondition(
            bufferSize >= 0, "AsyncReplaySubject(bufferSize:): bufferSize must be at least 0, got \(bufferSize)")
        self.init(replay: bufferSize, buffering: buffering, clock: clock)
    }
}
