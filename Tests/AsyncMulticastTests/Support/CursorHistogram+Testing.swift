// Members of the histogram that only the tests use, kept out of the library (as
// swift-collections keeps `Deque+Testing.swift` apart). `nonEmptyCells`, which the invariant
// checks also use, stays in the library (CursorHistogram+Invariants.swift).

@testable import AsyncMulticast

extension CursorHistogram {
    /// How many subscribers are at `position` (zero if none).
    subscript(position: Int) -> Int {
        if position >= self.counts.startIndex {
            return position < self.counts.endIndex ? self.counts[position] : 0
        }
        return self.behind.first { $0.position == position }?.count ?? 0
    }
}
