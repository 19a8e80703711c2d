/// How a shared sequence buffers elements for a subscriber that has not consumed them yet.
///
/// The policy applies **per subscriber**: each subscriber behaves as if it iterated its own
/// `AsyncStream` with the same policy, fed with every element from the moment it joined.
/// The elements themselves live once, in one buffer shared by all subscribers.
///
/// ```swift
/// let ticks = clockTicks.share(buffering: .bufferingNewest(1))  // a slow screen sees the latest
/// let log   = events.share(buffering: .unbounded)                // a logger that must see all
/// let feed  = prices.share()                                     // .bounded(64): lossless, paced
/// ```
public enum SharedBufferingPolicy: Sendable, Hashable {
    /// Lossless back-pressure: once a subscriber has `n` elements not yet handed to it, the
    /// upstream is not pulled until every subscriber is down to `n - max(1, n / 2)` (half the
    /// bound; for `n` of 1 or 2, as soon as there is room), so the upstream runs at the pace
    /// of the slowest subscriber, and each pause buys a batch of elements rather than one
    /// (pausing and resuming costs a thread wake-up). `n` must be at least 1.
    ///
    /// An iterator that finds several elements ready takes up to `n / 2` of them at once (at
    /// most 64) and returns them on its following `next()` calls: they are handed over and no
    /// longer count. So a subscriber that answers each element it reads by sending into the
    /// same subject with `send(waitingForRoom:)` makes room for each answer by reading.
    ///
    /// A push source that cannot wait (a subject's synchronous `send`) buffers past `n` as if
    /// the policy were ``unbounded``.
    case bounded(Int)

    /// A subscriber holding `n` unconsumed elements drops its oldest one to make room for a
    /// new one: a slow subscriber sees the newest elements. Others lose nothing.
    /// `n` must be at least 0; with 0 a subscriber only receives elements that arrive while
    /// it is waiting in `next()`.
    case bufferingNewest(Int)

    /// A subscriber holding `n` unconsumed elements drops new ones until it consumes one:
    /// a slow subscriber sees the oldest elements. Others lose nothing.
    /// `n` must be at least 0; with 0 a subscriber only receives elements that arrive while
    /// it is waiting in `next()`.
    case bufferingOldest(Int)

    /// Every element is kept until every subscriber consumed it, and the upstream is pulled
    /// as fast as it produces. Memory grows with the slowest subscriber's backlog.
    case unbounded

    /// Lossless while a subscriber keeps up, and never waits for it: a subscriber that holds
    /// `hardLimit` unconsumed elements when another one arrives is **evicted**. With a
    /// `softLimit`, one that has held more than its count for its duration is evicted
    /// too: a healthy subscriber absorbs a burst up to the hard limit, and a stalled
    /// one goes once the soft limit's duration is over (the two limits of Redis's
    /// `client-output-buffer-limit pubsub 32mb 8mb 60`).
    ///
    /// An evicted subscriber's buffer is released at once, the upstream and the other
    /// subscribers carry on at full speed, and its iteration ends the next time it asks for
    /// an element:
    /// - a sequence whose `Failure` can hold it (`any Error`) throws ``SubscriberEvictedError``;
    /// - otherwise (`Never`, or a concrete error type) the iteration returns `nil`, and
    ///   `events(buffering:)` (``SharedEvent/evicted(_:)``) tells the two endings apart.
    /// A subscriber that is not reading (a server's handler stuck in a write) learns of its
    /// eviction through ``SharedSubscription/waitForEviction()->SubscriberEviction?``, and
    /// ``SharedSubscription/backlog`` shows how far behind it runs, to size the limits from
    /// data (see [Sizing the two limits](<doc:ServingClients#Sizing-the-two-limits>)).
    ///
    /// This is how a server keeps one stalled client from stalling or bloating the others.
    /// As with ``bounded(_:)``, an iterator may also hold up to `min(hardLimit / 2, 64)`
    /// elements it has already taken: only elements not yet handed to it count. A subscriber
    /// waiting in `next()` holds nothing and is never evicted. Replayed elements
    /// (`replay(_:)`, the replaying subjects) are a greeting that counts against no limit: a
    /// new subscriber receives all of them, and only what is produced after it joined can
    /// evict it. `hardLimit` must be at least 1.
    ///
    /// ```swift
    /// // A hard limit alone: each client may fall 256 events behind; past that it is dropped.
    /// for try await event in feed.buffering(.evicting(256)) { try await client.write(event) }  // no bursts here
    /// ```
    ///
    /// ```swift
    /// // A burst of up to 4096 passes; a client more than 256 behind for 10 s goes.
    /// let subscription = feed.subscribe(buffering: .evicting(4096, softLimit: .above(256, for: .seconds(10))))
    /// ```
    case evicting(_ hardLimit: Int, softLimit: SoftLimit? = nil)

    /// The soft limit of ``evicting(_:softLimit:)``: a subscriber that has held more than
    /// `count` unconsumed elements for `duration` is evicted.
    ///
    /// With a zero duration the soft limit is a second hard limit at `count`.
    ///
    /// The duration is measured from the element that took the subscriber past `count`
    /// elements behind: a subscriber is evicted once the element `count + 1` places after
    /// the last one it took was produced `duration` ago or earlier. Reading moves that
    /// element on, so a subscriber that keeps reading is measured from a later element; one
    /// that stops reading is evicted `duration` after it went past `count`. (Redis measures
    /// from the moment a client went past its soft limit, however much it read since.)
    ///
    /// The duration is a deadline: a subscriber still above `count` when it ends is evicted
    /// then, whether or not anything is produced (a quiet room evicts its staller on time),
    /// and stops counting as a subscriber at that moment. It is timed on the sequence's
    /// `clock:` (`ContinuousClock` by default), read after the element that took a
    /// subscriber past `count` (never under the lock, and only while some subscriber is
    /// past it) and slept on by one timer task; a clock set back never keeps a subscriber
    /// for more than `duration` after the reading that went back. Once the sequence has
    /// ended, nobody is evicted any more: each subscriber reads what it holds, then the end.
    ///
    /// ```swift
    /// let soft = SharedBufferingPolicy.SoftLimit.above(256, for: .seconds(10))
    /// let policy = SharedBufferingPolicy.evicting(4096, softLimit: soft)
    /// ```
    public struct SoftLimit: Sendable, Hashable {
        /// How many unconsumed elements a subscriber may hold for as long as it likes.
        public let count: Int
        /// How long a subscriber may hold more than `count`.
        public let duration: Duration

        /// A subscriber that has held more than `count` unconsumed elements for `duration`
        /// is evicted. `count` must be at least 0 and `duration` not negative.
        @inlinable
        public static func above(_ count: Int, for duration: Duration) -> SoftLimit {
            SoftLimit(count: count, duration: duration)
        }

        @inlinable
        init(count: Int, duration: Duration) {
            self.count = count
            self.duration = duration
        }
    }

    /// Stops with a message naming `parameter` and the value when the policy is invalid.
    @usableFromInline
    func validate(parameter: String = "buffering") {
        switch self {
        case .bounded(let n):
            precondition(n >= 1, "\(parameter): .bounded(\(n)) needs a limit of at least 1")
        case .bufferingNewest(let n):
            precondition(n >= 0, "\(parameter): .bufferingNewest(\(n)) needs a limit of at least 0")
        case .bufferingOldest(let n):
            precondition(n >= 0, "\(parameter): .bufferingOldest(\(n)) needs a limit of at least 0")
        case .evicting(let n, nil):
            precondition(n >= 1, "\(parameter): .evicting(\(n)) needs a limit of at least 1")
        case .evicting(let n, let soft?):
            precondition(n >= 1, "\(parameter): .evicting(\(n), softLimit: ...) needs a hard limit of at least 1")
            precondition(
                soft.count >= 0 && soft.count < n,
                "\(parameter): .evicting(\(n), softLimit: .above(\(soft.count), ...)) needs a soft limit from 0 to \(n - 1)"
            )
            precondition(
                soft.duration >= .zero,
                "\(parameter): .evicting(\(n), softLimit: .above(\(soft.count), for: \(soft.duration))) needs a duration of at least zero"
            )
        case .unbounded:
            break
        }
    }
}

extension SharedBufferingPolicy: CustomStringConvertible {
    /// The policy as it is written, without the leading dot: `bounded(64)`, `evicting(4096)`,
    /// `evicting(4096, softLimit: .above(256, for: 10.0 seconds))`.
    public var description: String {
        switch self {
        case .bounded(let n): return "bounded(\(n))"
        case .bufferingNewest(let n): return "bufferingNewest(\(n))"
        case .bufferingOldest(let n): return "bufferingOldest(\(n))"
        case .unbounded: return "unbounded"
        case .evicting(let n, nil): return "evicting(\(n))"
        case .evicting(let n, let soft?): return "evicting(\(n), softLimit: \(soft))"
        }
    }
}

extension SharedBufferingPolicy.SoftLimit: CustomStringConvertible {
    /// The limit as it is written: `.above(256, for: 10.0 seconds)`.
    public var description: String { ".above(\(self.count), for: \(self.duration))" }
}
