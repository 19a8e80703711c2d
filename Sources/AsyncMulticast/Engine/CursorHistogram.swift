/// How many subscribers of a lane have their cursor at each position before the tail,
/// stored sparsely: only the positions some subscriber is at.
///
/// It reads like a dense histogram over `startIndex..<endIndex` (positions with nobody
/// count zero), where `endIndex` follows the shared buffer's tail and `startIndex` is the
/// oldest position a subscriber still has to read (`endIndex` when nobody is behind).
///
/// Why sparse: the producer moves `endIndex` for every element it appends, and a dense
/// histogram gave every element a cell, almost always a zero one, that a reader later
/// removed again. Here an element costs a cell only when subscribers stopped at it, which
/// happens once per batch they take, not once per element; the cells are as many as the
/// distinct positions the subscribers are at.
///
///     positions:   startIndex                                           endIndex (tail)
///                      |                                                     |
///     cells:       [ (12, 2) ][ (15, 1) ][ (40, 5) ]                         v
///                  ascending positions, every count positive, every position < endIndex
///
/// Invariants (checked by `invariantViolation()`, in MulticastStateMachine+Invariants.swift):
/// positions strictly ascending and below `endIndex`; every count positive.
@usableFromInline
struct CursorHistogram: Sendable {
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

    /// The cells, from `head` on; those before `head` were removed from the front.
    @usableFromInline
    var cells: [Cell] = []
    @usableFromInline
    var head = 0
    /// One past the last position counted: the shared buffer's tail.
    @usableFromInline
    var endIndex: Int

    /// An empty histogram whose positions start (and end) at `startIndex`.
    @inlinable
    init(startIndex: Int) {
        self.endIndex = startIndex
    }

    /// Nobody is before `endIndex`.
    @inlinable
    var isEmpty: Bool { self.head == self.cells.count }

    /// The oldest position some subscriber is at, or `endIndex` if none.
    @inlinable
    var startIndex: Int { self.isEmpty ? self.endIndex : self.cells[self.head].position }

    /// How many subscribers are at the oldest position (`nil` if none is before `endIndex`).
    @inlinable
    var first: Int? { self.isEmpty ? nil : self.cells[self.head].count }

    /// The number of cells (distinct positions with subscribers).
    @inlinable
    var cellCount: Int { self.cells.count - self.head }

    /// The positions with subscribers, oldest first.
    @inlinable
    var nonEmptyCells: ArraySlice<Cell> { self.cells[self.head...] }

    /// How many subscribers are at `position` (zero if none).
    @inlinable
    subscript(position: Int) -> Int {
        let index = self.index(of: position)
        return index < self.cells.count && self.cells[index].position == position ? self.cells[index].count : 0
    }

    /// The index of the first cell at or after `position` (`cells.count` if none).
    @inlinable
    func index(of position: Int) -> Int {
        // The hot cases first: the oldest cell (the slowest reader) and the newest.
        var low = self.head
        var high = self.cells.count
        guard low < high, self.cells[low].position < position else { return low }
        if self.cells[high &- 1].position < position { return high }
        while low < high {
            let middle = low &+ (high &- low) / 2
            if self.cells[middle].position < position {
                low = middle &+ 1
            } else {
                high = middle
            }
        }
        return low
    }

    /// The producer appended the element at `endIndex`: `count` subscribers, caught up
    /// until now, have it pending (their cursor is that position).
    @inlinable
    mutating func append(_ count: Int) {
        if count > 0 { self.cells.append(Cell(position: self.endIndex, count: count)) }
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
        let index = self.index(of: position)
        if index < self.cells.count && self.cells[index].position == position {
            self.cells[index].count &+= count
        } else {
            self.insertCell(Cell(position: position, count: count), at: index)
        }
    }

    /// Inserts `cell` before the cell at `index`, shifting the older cells one step into
    /// the room left by cells removed from the front when there is some and they are the
    /// fewer, the newer cells otherwise.
    @inlinable
    mutating func insertCell(_ cell: Cell, at index: Int) {
        if self.head > 0 && index &- self.head < self.cells.count &- index {
            self.head &-= 1
            self.slideDown(into: self.head, before: index, placing: cell)
        } else {
            self.cells.insert(cell, at: index)
        }
    }

    /// Removes the cell at `index`, shifting whichever side of it is shorter.
    @inlinable
    mutating func removeCell(at index: Int) {
        if index == self.head {
            self.removeFirst()
        } else if index &- self.head < self.cells.count &- 1 &- index {
            let head = self.head
            self.cells.withUnsafeMutableBufferPointer { cells in
                var k = index
                while k > head {
                    cells[k] = cells[k &- 1]
                    k &-= 1
                }
            }
            self.removeFirst()
        } else {
            self.cells.remove(at: index)
        }
    }

    /// `count` of the subscribers at `position` moved away (there are at least that many).
    @inlinable
    mutating func subtract(_ count: Int, at position: Int) {
        let index = self.index(of: position)
        precondition(
            index < self.cells.count && self.cells[index].position == position && self.cells[index].count >= count,
            "CursorHistogram: fewer than \(count) subscribers at \(position)")
        if self.cells[index].count != count {
            self.cells[index].count &-= count
        } else {
            self.removeCell(at: index)
        }
    }

    /// One subscriber moved from `position` to the later `next` (before `endIndex`): what a
    /// reader's commit does. When it was alone at `position`, its cell moves: it takes the
    /// new position in place if no cell lies in between, else the cells in between shift
    /// one step back over it (or it merges into the cell at `next`), so that a reader in
    /// the middle of the cells moves only the cells it passes.
    @inlinable
    mutating func moveOne(from position: Int, to next: Int) {
        precondition(next > position && next < self.endIndex, "CursorHistogram: move \(position) -> \(next)")
        let index = self.index(of: position)
        precondition(
            index < self.cells.count && self.cells[index].position == position,
            "CursorHistogram: nobody at \(position)")
        guard self.cells[index].count == 1 else {
            self.cells[index].count &-= 1
            self.add(1, at: next)
            return
        }
        let target = self.index(of: next)
        if target < self.cells.count && self.cells[target].position == next {
            self.cells[target].count &+= 1
            self.removeCell(at: index)
            return
        }
        // The cells between the two positions move one step back; the moved one follows them.
        self.slideDown(into: index, before: target, placing: Cell(position: next, count: 1))
    }

    /// Moves the cells at `start + 1 ..< end` one step toward the front (onto
    /// `start ..< end - 1`) and puts `cell` at `end - 1`; what was at `start` is overwritten.
    @inlinable
    mutating func slideDown(into start: Int, before end: Int, placing cell: Cell) {
        self.cells.withUnsafeMutableBufferPointer { cells in
            var k = start
            while k < end &- 1 {
                cells[k] = cells[k &+ 1]
                k &+= 1
            }
            cells[end &- 1] = cell
        }
    }

    /// Removes the oldest cell and returns it.
    @inlinable
    @discardableResult
    mutating func removeFirst() -> Cell {
        precondition(!self.isEmpty, "CursorHistogram: removeFirst with nobody before the end")
        let cell = self.cells[self.head]
        self.head &+= 1
        if self.head == self.cells.count {
            // Keep a small array for the next cells, not the peak of a burst.
            self.cells.removeAll(keepingCapacity: self.cells.capacity <= 64)
            self.head = 0
        } else if self.head >= 16 && self.head &* 2 >= self.cells.count {
            // Reclaim the front once it is most of the array (amortized O(1) per cell).
            self.cells.removeSubrange(0..<self.head)
            self.head = 0
        }
        return cell
    }
}
