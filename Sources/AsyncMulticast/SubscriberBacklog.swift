/// How far behind a subscriber runs: what it holds now, and the most it has held since it
/// joined. Read from ``SharedSubscription/backlog``, to size the limits of
/// ``SharedBufferingPolicy/evicting(_:softLimit:)`` from data rather than by trial.
///
/// A subscriber *holds* the elements produced after it joined that were not yet handed to
/// its iterator: what its buffering policy counts. Elements an iterator already took into
/// its batch are handed over, and a replaying `.evicting` subscriber's greeting counts
/// against no limit; neither is held.
///
/// ```swift
/// let feed = AsyncPassthroughSubject<Int, Never>()
/// let client = feed.subscribe(buffering: .evicting(100))
/// for n in 1...30 { feed.send(n) }
/// print(client.backlog!)   // SubscriberBacklog(count: 30, highWaterMark: 30)
/// ```
public struct SubscriberBacklog: Sendable, Hashable {
    /// How many elements the subscriber holds now.
    public let count: Int
    /// The most it has held since it joined. Seen when it reads and when this is read:
    /// between two reads what a subscriber holds only grows (or is dropped by its policy).
    public let highWaterMark: Int

    /// A backlog of `count` elements, of at most `highWaterMark` so far.
    @inlinable
    public init(count: Int, highWaterMark: Int) {
        self.count = count
        self.highWaterMark = highWaterMark
    }
}
