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
    /// `n` unconsumed elements when another one arrives is **evicted**. Its buffer is
    /// released at once, the upstream and the other subscribers carry on at full speed, and
    /// its iteration ends the next time it asks for an element:
    /// - a sequence whose `Failure` can hold it (`any Error`) throws ``SubscriberEvictedError``;
    /// - otherwise (`Never`, or a concrete error type) the iteration returns `nil`, and
    ///   `events(buffering:)` (``SharedEvent/evicted``) tells the two endings apart.
    ///
    /// This is how a server keeps one stalled client from stalling or bloating the others
    /// (Redis disconnects a pub/sub client whose output buffer passes a hard limit). As with
    /// ``bounded(_:)``, an iterator may also hold up to `min(n / 2, 64)` elements it has
    /// already taken: only elements not yet handed to it count. A subscriber waiting in
    /// `next()` holds nothing and is never evicted. Replayed elements (`replay(_:)`, the
    /// replaying subjects) are a greeting that counts against no limit: a new subscriber
    /// receives all of them, and only what is produced after it joined can evict it.
    /// `n` must be at least 1.
    ///
    /// ```swift
    /// // Each client may fall 256 events behind; past that it is dropped, not waited for.
    /// for try await event in feed.buffering(.evicting(256)) { try await client.write(event) }
    /// ```
    case evicting(Int)

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
        case .evicting(let n):
            precondition(n >= 1, "\(parameter): .evicting(\(n)) needs a limit of at least 1")
        case .unbounded:
            break
        }
    }
}
