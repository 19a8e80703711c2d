// The histogram's invariants (listed on `CursorHistogram`), checked by code: the histogram
// tests call `invariantViolation()`, and so does the machine's check for every lane
// (MulticastStateMachine+Invariants.swift), which also uses `total`.

extension CursorHistogram {
    /// The positions with subscribers, oldest first (for invariant checks and tests).
    @inlinable
    var nonEmptyCells: [Cell] {
        self.behind
            + (self.counts.startIndex..<self.counts.endIndex).compactMap { position in
                let count = self.counts[position]
                return count == 0 ? nil : Cell(position: position, count: count)
            }
    }

    /// The sum of the counts (for invariant checks).
    @inlinable
    var total: Int { self.nonEmptyCells.reduce(0) { $0 + $1.count } }

    /// What is wrong with the histogram's structure, or `nil`.
    @inlinable
    func invariantViolation() -> String? {
        var sum = 0
        var previous = Int.min
        for cell in self.behind {
            guard cell.count > 0 else { return "a cell behind at \(cell.position) counts \(cell.count)" }
            guard cell.position > previous else { return "cells behind not ascending at \(cell.position)" }
            guard !self.counts.isEmpty, cell.position < self.counts.startIndex else {
                return "a cell behind at \(cell.position), not before the stored counts"
            }
            previous = cell.position
            sum += cell.count
        }
        for position in self.counts.startIndex..<self.counts.endIndex {
            guard self.counts[position] >= 0 else { return "position \(position) counts \(self.counts[position])" }
            sum += self.counts[position]
        }
        guard sum == self.members else { return "the counts sum to \(sum), not to members \(self.members)" }
        guard self.members > 0 else {
            return self.counts.isEmpty && self.behind.isEmpty ? nil : "counts stored with no members"
        }
        guard self.counts[self.counts.startIndex] > 0 else { return "the first stored count is zero" }
        guard self.counts.endIndex <= self.endIndex else {
            return "counts stored up to \(self.counts.endIndex), past the end \(self.endIndex)"
        }
        return nil
    }
}
