/// How many subscribers of a lane have their cursor at each position before the tail.
///
/// Mostly a dense array of counts over the positions from the oldest subscriber's to the
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
/// their position: each position is written and skipped at most once while the
/// subscribers move forward.
///
/// Subscribers that join *behind* the stored counts (a replay subscriber starts at the
/// replay window's start, possibly far behind everyone) are kept apart, in `behind`: a
/// short sorted list of cells, so that neither their joining nor their leaving nor their
/// reading costs anything proportional to the distance to the others. A reader in
/// `behind` that catches up with the stored counts joins them.
///
///     positions:  startIndex              counts.startIndex    counts.endIndex  endIndex
///                     |                          |                    |             |
///     behind:     [(3, 1)]  [(40, 2)]            v                    v             v
///     counts:                                [ 2 ][ 0 ][ 1 ][ 0 ][ 5 ] (zeros, not stored)
///                                            first positive (zeros at the end may stay)
///
/// Invariants (checked by `invariantViolation()`, in CursorHistogram+Invariants.swift):
/// `members` is the sum of all counts and none is negative; nothing is stored when
/// `members` is zero; otherwise the first stored count is positive, the stored counts end at
/// or before `endIndex`, and the cells of `behind` are positive, ascending and before the
/// stored counts.
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

    /// Subscribers before `counts.startIndex`, by position (see the type's docs). Usually
    /// empty.
    @usableFromInline
    var behind: [Cell] = []
    /// `counts[p]` for `p` in `counts.startIndex..<counts.endIndex`.
    @usableFromInline
    var counts: IndexedRing<Int>
    /// The sum of all counts: subscribers before `endIndex`.
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
    var startIndex: Int {
        guard self.members > 0 else { return self.endIndex }
        return self.behind.first?.position ?? self.counts.startIndex
    }

    /// How many subscribers are at the oldest position (`nil` if none is before `endIndex`).
    @inlinable
    var first: Int? {
        guard self.members > 0 else { return nil }
        return self.behind.first?.count ?? self.counts[self.counts.startIndex]
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
        // `members == 0` exactly when nothing is stored.
        if self.members == 0 || position >= self.counts.endIndex {
            self.place(count, atOrAfterStoredEnd: position)
        } else if position >= self.counts.startIndex {
            self.counts.add(count, at: position)
            self.members &+= count
        } else {
            self.addBehind(count, at: position)
        }
    }

    /// `count` of the subscribers at `position` moved away (there are at least that many).
    @inlinable
    mutating func subtract(_ count: Int, at position: Int) {
        precondition(count > 0 && self.members > 0, "CursorHistogram: subtract \(count) at \(position)")
        guard position >= self.counts.startIndex else {
            // Behind the stored counts, which keep somebody: `members` stays positive.
            self.subtractBehind(count, at: position)
            self.members &-= count
            return
        }
        precondition(
            position < self.counts.endIndex && self.counts[position] >= count,
            "CursorHistogram: fewer than \(count) subscribers at \(position)")
        self.members &-= count
        if self.members == 0 {
            self.removeAll()
        } else {
            self.counts.add(-count, at: position)
            if position == self.counts.startIndex { self.dropLeadingZeros() }
        }
    }

    /// One subscriber moved from `position` to the later `next` (before `endIndex`): what a
    /// reader's commit does.
    @inlinable
    mutating func moveOne(from position: Int, to next: Int) {
        precondition(
            next > position && next < self.endIndex && self.members > 0,
            "CursorHistogram: move \(position) -> \(next)")
        guard position >= self.counts.startIndex else {
            // From behind the stored counts, which keep somebody.
            self.subtract(1, at: position)
            self.add(1, at: next)
            return
        }
        precondition(
            position < self.counts.endIndex && self.counts[position] > 0, "CursorHistogram: nobody at \(position)")
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
        if !self.behind.isEmpty {
            let cell = self.behind.removeFirst()
            self.members &-= cell.count
            return cell
        }
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

    /// Removes every subscriber counted before `position` (at most `endIndex`) and returns
    /// how many there were: a `.bufferingNewest` lane gathering the members whose oldest
    /// elements were dropped (`Lane.settle()`), to count them again at its window start.
    /// Costs one step per stored position before `position`, each stored once.
    @inlinable
    mutating func removeAll(before position: Int) -> Int {
        precondition(position <= self.endIndex, "CursorHistogram: remove before \(position), past \(self.endIndex)")
        guard self.members > 0, self.startIndex < position else { return 0 }
        var removed = 0
        while let cell = self.behind.first, cell.position < position {
            removed &+= cell.count
            self.behind.removeFirst()
        }
        let storedEnd = Swift.min(position, self.counts.endIndex)
        if self.counts.startIndex < storedEnd {
            for p in self.counts.startIndex..<storedEnd { removed &+= self.counts[p] }
            self.counts.removeFirst(storedEnd &- self.counts.startIndex)
        }
        self.members &-= removed
        if self.members == 0 {
            self.removeAll()
        } else {
            self.dropLeadingZeros()
        }
        return removed
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

    /// `count` more subscribers at `position`, before the stored counts.
    @inlinable
    mutating func addBehind(_ count: Int, at position: Int) {
        let index = self.behind.firstIndex { $0.position >= position } ?? self.behind.endIndex
        if index < self.behind.endIndex && self.behind[index].position == position {
            self.behind[index].count &+= count
        } else {
            self.behind.insert(Cell(position: position, count: count), at: index)
        }
        self.members &+= count
    }

    /// `count` fewer subscribers at `position`, before the stored counts (`members` is
    /// updated by the caller).
    @inlinable
    mutating func subtractBehind(_ count: Int, at position: Int) {
        guard let index = self.behind.firstIndex(where: { $0.position == position }) else {
            preconditionFailure("CursorHistogram: nobody behind at \(position)")
        }
        if self.behind[index].count == count {
            self.behind.remove(at: index)
        } else {
            self.behind[index].count &-= count
        }
    }

    /// Forgets every count (nobody is before `endIndex` any more).
    @inlinable
    mutating func removeAll() {
        self.behind.removeAll()
        self.counts.removeFirst(self.counts.count)
        self.members = 0
    }

    /// Skips the zeros at the front of the stored counts, so that the first stored count is
    /// positive again. If none is left, the newest cell of `behind` becomes the stored
    /// counts' start (there is one: somebody is still counted).
    @inlinable
    mutating func dropLeadingZeros() {
        self.counts.removeFirst(self.counts.leadingZeroCount())
        if self.counts.isEmpty, let newest = self.behind.popLast() {
            self.counts.rebase(to: newest.position)
            self.counts.append(newest.count)
        }
    }
}
