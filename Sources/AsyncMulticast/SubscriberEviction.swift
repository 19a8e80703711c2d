/// Why a subscriber of an ``SharedBufferingPolicy/evicting(_:softLimit:)`` policy was evicted,
/// and how far behind it was: what ``SharedSubscription/waitForEviction()->SubscriberEviction?`` returns, what
/// ``SharedEvent/evicted(_:)`` and ``SubscriberEvictedError`` carry, in one line for a log.
///
/// `backlog` is what the subscriber held when it was evicted: at a hard limit of `n`, `n`
/// (the next element would have been one too many); at a soft limit, what it held when its
/// deadline came. `highWaterMark` is the most it held since it joined, that backlog
/// included: the figure to size the limits from (see ``SubscriberBacklog``). The eviction
/// carries no instant: a hard eviction reads no clock, and a task waiting in
/// `waitForEviction()` is resumed at the eviction, so its own clock says when.
///
/// ```swift
/// let room = AsyncPassthroughSubject<String, Never>()
/// let client = room.subscribe(buffering: .evicting(3))
/// for n in 1...4 { room.send("message \(n)") }
/// if let eviction = await client.waitForEviction() {
///     print("evicted", eviction)   // evicted at its hard limit, holding 3 elements (high-water mark 3)
/// }
/// ```
public struct SubscriberEviction: Sendable, Hashable, CustomStringConvertible {
    /// Which limit of ``SharedBufferingPolicy/evicting(_:softLimit:)`` evicted a subscriber.
    ///
    /// ```swift
    /// let reason: SubscriberEviction.Reason = .softLimit
    /// print(reason)   // softLimit
    /// ```
    public enum Reason: String, Sendable, Hashable, CustomStringConvertible {
        /// It would have held more than the hard limit.
        case hardLimit
        /// It held more than the soft limit's count for the soft limit's duration.
        case softLimit

        /// The case's name: `hardLimit` or `softLimit` (a metrics label, say).
        public var description: String { self.rawValue }
    }

    /// Which limit evicted the subscriber.
    public let reason: Reason
    /// How many elements it held when it was evicted.
    public let backlog: Int
    /// The most it held since it joined, `backlog` included.
    public let highWaterMark: Int

    /// An eviction for `reason`, holding `backlog` elements, of at most `highWaterMark` since
    /// the subscriber joined. The library creates these; a test of code that handles them
    /// may too.
    ///
    /// ```swift
    /// let eviction = SubscriberEviction(reason: .hardLimit, backlog: 4096, highWaterMark: 4096)
    /// ```
    @inlinable
    public init(reason: Reason, backlog: Int, highWaterMark: Int) {
        self.reason = reason
        self.backlog = backlog
        self.highWaterMark = highWaterMark
    }

    /// Where and how far behind, to follow "evicted" in a log line: `at its soft limit,
    /// holding 300 elements (high-water mark 310)`.
    public var description: String {
        let limit = self.reason == .hardLimit ? "hard" : "soft"
        let elements = self.backlog == 1 ? "element" : "elements"
        return "at its \(limit) limit, holding \(self.backlog) \(elements) (high-water mark \(self.highWaterMark))"
    }
}
