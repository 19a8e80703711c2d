/// When the upstream of an ``AsyncSharedService`` starts and stops, as Kotlin's
/// `SharingStarted` says it for `shareIn`.
///
/// ```swift
/// let prices = feed.sharedService(replay: 1, started: .whileSubscribed(keepAlive: .seconds(5)))
/// ```
///
/// - ``eagerly``: when `run()` starts, until it ends, subscribers or not.
/// - ``lazily``: with the first subscriber, until `run()` ends.
/// - ``whileSubscribed(keepAlive:replayExpiration:)``: with the first subscriber, until
///   `keepAlive` after the last one left; the next subscriber starts it again. What
///   ``_Concurrency/AsyncSequence/share(buffering:keepAlive:)`` does with its `keepAlive`
///   (Kotlin calls it `stopTimeout`).
public struct SharingStarted: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Strategy: Sendable, Hashable {
        case eagerly
        case lazily
        case whileSubscribed(keepAlive: Duration, replayExpiration: Duration)
    }

    @usableFromInline
    let strategy: Strategy

    @inlinable
    init(_ strategy: Strategy) {
        self.strategy = strategy
    }

    /// The upstream starts when `run()` starts and runs until `run()` ends, with or without
    /// subscribers: what it produces while nobody subscribes only reaches the replay cache.
    ///
    /// ```swift
    /// let config = configUpdates.sharedService(replay: 1, started: .eagerly)
    /// ```
    public static var eagerly: SharingStarted { SharingStarted(.eagerly) }

    /// The upstream starts with the first subscriber's demand and runs until `run()` ends,
    /// however many subscribers leave.
    ///
    /// ```swift
    /// let catalog = catalogLoads.sharedService(replay: 1, started: .lazily)
    /// ```
    public static var lazily: SharingStarted { SharingStarted(.lazily) }

    /// The upstream starts with the first subscriber's demand and stops `keepAlive` after
    /// the last subscriber left, unless one came back meanwhile; the next demand starts a new
    /// iteration of the base. The replay cache outlives a stopped upstream for
    /// `replayExpiration`. Both are timed on the service's `clock:`; neither may be negative,
    /// and one of 2^40 seconds or longer (`.seconds(Int64.max)`) is forever.
    ///
    /// ```swift
    /// let location = locationUpdates.sharedService(started: .whileSubscribed(keepAlive: .seconds(5)))
    /// ```
    @inlinable
    public static func whileSubscribed(
        keepAlive: Duration = .zero, replayExpiration: Duration = .zero
    ) -> SharingStarted {
        precondition(
            keepAlive >= .zero, "whileSubscribed(keepAlive:): keepAlive must not be negative, got \(keepAlive)")
        precondition(
            replayExpiration >= .zero,
            "whileSubscribed(replayExpiration:): replayExpiration must not be negative, got \(replayExpiration)")
        return SharingStarted(.whileSubscribed(keepAlive: keepAlive, replayExpiration: replayExpiration))
    }

    /// The strategy as it is written: `eagerly`, `lazily`,
    /// `whileSubscribed(keepAlive: 5.0 seconds, replayExpiration: 0.0 seconds)`.
    public var description: String {
        switch self.strategy {
        case .eagerly: return "eagerly"
        case .lazily: return "lazily"
        case .whileSubscribed(let keepAlive, let replayExpiration):
            return "whileSubscribed(keepAlive: \(keepAlive), replayExpiration: \(replayExpiration))"
        }
    }
}
