/// How many subscribers of a lane have their cursor at each position before the tail.
///
/// It is a dense array of counts over the positions from the oldest subscriber's to the
/// newest position some subscriber was put at, and it stops there: the positions after it,
/// up to `endIndex` (the shared buffer's tail), count zero without being stored.
///
/// Why this shape: the producer moves `endIndex` for every element it appends, and storing
/// a count for each element (almost always a zero that a reader later removes again) was
/// most of the producer's bookkeeping. Here an element costs a count only when caught-up
/// subscribers stop at it, once per batch they take. A reader's move is two array writes,
/// whatever the number of subscribers and of distinct positions they are at, so the
/// time a reader holds the lock does not grow with them (a sorted list of the occupied
/// positions, tried before this, made a reader search and shift it under the lock, and
/// lost 10% of fan-out throughput at 64 subscribers and more). Zeros are written when a
/// reader moves past the stored counts, and skipped when the oldest subscribers leave
/// their position: each position is written and skipped at most once.
///
///     positions:  startIndex                          counts.endIndex       endIndex (tail)
///                     |                                      |                     |
///     counts:     [ 2 ][ 0 ][ 0 ][ 1 ][ 0 ][ 5 ][ 0 ]         (zeros, not stored)  v
///                 first positive   (zeros at the end may stay)
///
/// Invariants (checked by `invariantViolation()`, in MulticastStateMachine+Invariants.swift):
/// `members` is the sum of the counts and none is negative; nothing is stored when
/// `members` is zero; otherwise the first stored count is positive and the stored counts
/// end at or before `endIndex`.
@usableFromInline
struct CursorHistogram: Sendable {
    /// A position and how many subscribers are at it.
    @usableFromInline
    struct Cell: Sendable, Equatable {
        @usableFromInline var position: Int
        @usableFromInline var count: Int

        @inlinable
        init(position: Int, count: Int) {
            self.position = position
            self.count = count
        }
    }

    /// `counts[p]` for `p` in `counts.startIndex..<counts.endIndex`.
    @usableFromInline
    var counts: IndexedRing<Int>
    /// The sum of the counts: subscribers before `endIndex`.
    @usableFromInline
    var members = 0
    /// One past the last position counted: the shared buffer's tail.
    @usableFromInline
    var endIndex: Int

    /// An empty histogram whose positions start (and end) at `startIndex`.
    @inlinable
    init(startIndex: Int) {
        self.counts = IndexedRing(startIndex: startIndex)
        self.endIndex = startIndex
    }

    /// Nobody is before `endIndex`.
    @inlinable
    var isEmpty: Bool { self.members == 0 }

    /// The oldest position some subscriber is at, or `endIndex` if none.
    @inlinable
    var startIndex: Int { self.members == 0 ? self.endIndex : self.counts.startIndex }

    /// How many subscribers are at the oldest position (`nil` if none is before `endIndex`).
    @inlinable
    var first: Int? { self.members == 0 ? nil : self.counts[self.counts.startIndex] }

    /// The positions with subscribers, oldest first (for tests and invariant checks).
    @inlinable
    var nonEmptyCells: [Cell] {
        (self.counts.startIndex..<self.counts.endIndex).compactMap { position in
            let count = self.counts[position]
            return count == 0 ? nil : Cell(position: position, count: count)
        }
    }

    /// How many subscribers are at `position` (zero if none).
    @inlinable
    @inline(__always)
    subscript(position: Int) -> Int {
        position >= self.counts.startIndex && position < self.counts.endIndex ? self.counts[position] : 0
    }

    /// The producer appended the element at `endIndex`: `count` subscribers, caught up
    /// until now, have it pending (their cursor is that position).
    @inlinable
    @inline(__always)
    mutating func append(_ count: Int) {
        if count > 0 { self.place(count, atOrAfterStoredEnd: self.endIndex) }
        self.endIndex &+= 1
    }

    /// Moves an empty histogram so that it starts (and ends) at `position`.
    @inlinable
    mutating func rebase(to position: Int) {
        precondition(self.isEmpty, "CursorHistogram: rebase with subscribers before the end")
        self.endIndex = position
    }

    /// `count` more subscribers are at `position` (before `endIndex`).
    @inlinable
    mutating func add(_ count: Int, at position: Int) {
        precondition(position < self.endIndex, "CursorHistogram: position \(position) not before \(self.endIndex)")
        if self.members == 0 || position >= self.counts.endIndex {
            self.place(count, atOrAfterStoredEnd: position)
        } else if position >= self.counts.startIndex {
            self.counts.add(count, at: position)
            self.members &+= count
        } else {
            self.prepend(count, at: position)
        }
    }

    /// `count` of the subscribers at `position` moved away (there are at least that many).
    @inlinable
    mutating func subtract(_ count: Int, at position: Int) {
        precondition(
            self[position] >= count && count > 0, "CursorHistogram: fewer than \(count) subscribers at \(position)")
        self.members &-= count
        if self.members == 0 {
            self.removeAll()
            return
        }
        self.counts.add(-count, at: position)
        if position == self.counts.startIndex { self.dropLeadingZeros() }
    }

    /// One subscriber moved from `position` to the later `next` (before `endIndex`): what a
    /// reader's commit does.
    @inlinable
    mutating func moveOne(from position: Int, to next: Int) {
        precondition(next > position && next < self.endIndex, "CursorHistogram: move \(position) -> \(next)")
        precondition(self[position] > 0, "CursorHistogram: nobody at \(position)")
        if self.members == 1 {
            // The only one: its count moves, with no zeros in between.
            self.removeAll()
            self.place(1, atOrAfterStoredEnd: next)
            return
        }
        self.counts.add(-1, at: position)
        self.members &-= 1
        self.add(1, at: next)
        if position == self.counts.startIndex { self.dropLeadingZeros() }
    }

    /// Removes the oldest position's subscribers and returns them.
    @inlinable
    @discardableResult
    mutating func removeFirst() -> Cell {
        precondition(!self.isEmpty, "CursorHistogram: removeFirst with nobody before the end")
        let cell = Cell(position: self.counts.startIndex, count: self.counts[self.counts.startIndex])
        self.members &-= cell.count
        if self.members == 0 {
            self.removeAll()
        } else {
            self.counts.removeFirst(1)
            self.dropLeadingZeros()
        }
        return cell
    }

    /// Stores `count` at `position`, at or after the stored counts' end (or anywhere when
    /// nothing is stored), padding with zeros in between.
    @inlinable
    @inline(__always)
    mutating func place(_ count: Int, atOrAfterStoredEnd position: Int) {
        if self.members == 0 {
            self.counts.rebase(to: position)
        } else {
            self.counts.appendZeros(position &- self.counts.endIndex)
        }
        self.counts.append(count)
        self.members &+= count
    }

    /// Stores `count` at `position`, before the oldest stored position: a subscriber that
    /// joins behind everyone (a replay). Rare, so it rebuilds the counts.
    @inlinable
    mutating func prepend(_ count: Int, at position: Int) {
        var counts = IndexedRing<Int>(startIndex: position)
        counts.append(count)
        counts.appendZeros(self.counts.startIndex &- position &- 1)
        for stored in self.counts.startIndex..<self.counts.endIndex { counts.append(self.counts[stored]) }
        self.counts = counts
        self.members &+= count
    }

    /// Forgets every stored count (nobody is before `endIndex` any more).
    @inlinable
    mutating func removeAll() {
        self.counts.removeFirst(self.counts.count)
        self.members = 0
    }

    /// Skips the zeros at the front, so that the first stored count is positive again.
    @inlinable
    mutating func dropLeadingZeros() {
        self.counts.removeFirst(self.counts.leadingZeroCount())
    }
}
