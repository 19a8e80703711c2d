// What a lane does when a member would hold more than its buffering policy lets it: the one
// place that reads a `SharedBufferingPolicy`'s numbers. Everything else switches on `Overflow`.

/// What a lane does when one of its members would hold more unread elements than its
/// buffering policy lets it: one case per rule of the machine.
///
/// Each public ``SharedBufferingPolicy`` is normalized into one, once, when its lane is
/// created (`Lane.overflow`). Every decision that depends on the policy switches on it,
/// exhaustively: a new rule is a new case, and the compiler lists every place it must touch.
/// The numbers the producer reads for every element are derived from it once, in `Lane.init`.
@usableFromInline
enum Overflow: Sendable, Equatable {
    /// `.bounded(bound)`: the producer parks once a member holds `bound` (see `hasRoom`).
    /// Lossless.
    case park(bound: Int)
    /// `.evicting(limit, softLimit:)`: members that would hold `limit + 1` are evicted:
    /// their histogram cell leaves the lane, and they learn it when they next read. With a
    /// soft limit (`Lane.softLimit`: kept out of this payload, which the producer copies on
    /// every element), so are members that have held more than its count for its duration
    /// (`Lane.softDeadlines`). Lossless until then.
    case evict(limit: Int)
    /// `.bufferingNewest(keep)`, and `.bufferingOldest(0)`: members that would hold
    /// `keep + 1` drop their oldest: their histogram cell moves one position forward.
    case dropOldest(keep: Int)
    /// `.bufferingOldest(keep)` with `keep > 0`: a cell whose members hold `keep` freezes
    /// before the next element is appended: its elements are copied into a `FrozenGroup`, and
    /// each member goes on from a private queue that takes new elements only while it holds
    /// fewer than `keep` (`PrivateQueue`).
    case freeze(keep: Int)
    /// `.unbounded`: nothing overflows; every element is kept until every member has read it.
    case keepAll

    @inlinable
    init(_ policy: SharedBufferingPolicy) {
        switch policy {
        case .bounded(let bound):
            self = .park(bound: bound)
        case .evicting(let limit, _):
            self = .evict(limit: limit)
        case .bufferingNewest(let keep):
            self = .dropOldest(keep: keep)
        case .bufferingOldest(0):
            // Room for none: a member not waiting in `next()` misses the new element, and
            // holding nothing, it has no oldest to keep instead: it drops like
            // `.bufferingNewest(0)`. Freezing could not say it: a cell freezes when its
            // members are full before an append, and members that hold nothing are no cell
            // yet (they are the lane's `atTail`): they would take the element and hold one.
            self = .dropOldest(keep: 0)
        case .bufferingOldest(let keep):
            self = .freeze(keep: keep)
        case .unbounded:
            self = .keepAll
        }
    }
}
