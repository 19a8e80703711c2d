// The histogram of a lane's cursors, on its own: the cases a lane meets (appending at the
// tail, a reader moving on, a cell moving forward, a joiner placed before or between the
// others), then random operations against a plain array of counts.

import Testing

@testable import AsyncMulticast

@Suite("CursorHistogram: a lane's cursors")
struct CursorHistogramTests {
    @Test func emptyFollowsTheTail() {
        var histogram = CursorHistogram(startIndex: 5)
        #expect(histogram.isEmpty && histogram.startIndex == 5 && histogram.endIndex == 5)
        histogram.append(0)
        histogram.append(0)
        // Nobody stopped at those positions: nothing stored, the start follows the end.
        #expect(histogram.isEmpty && histogram.startIndex == 7 && histogram.counts.isEmpty)
        #expect(histogram.first == nil)
    }

    @Test func appendingCaughtUpMembersStoresOneCount() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(3)
        histogram.append(0)
        histogram.append(0)
        #expect(histogram.startIndex == 0 && histogram.endIndex == 3)
        // Nobody is after 0: the zeros after it are not stored.
        #expect(histogram.counts.count == 1 && histogram.first == 3)
        #expect(histogram[0] == 3 && histogram[1] == 0 && histogram[2] == 0)
    }

    @Test func readersMovingOn() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(2)
        for _ in 0..<9 { histogram.append(0) }
        // One reader takes 4: it moves from 0 to 4, a position nobody was at.
        histogram.subtract(1, at: 0)
        histogram.add(1, at: 4)
        #expect(Array(histogram.nonEmptyCells) == [.init(position: 0, count: 1), .init(position: 4, count: 1)])
        // The other one follows it: the zeros before 4 go, and the start moves to 4.
        histogram.subtract(1, at: 0)
        histogram.add(1, at: 4)
        #expect(histogram.startIndex == 4 && histogram[4] == 2 && histogram.counts.count == 1)
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func aJoinerBeforeOrBetweenCellsIsPlacedInOrder() {
        var histogram = CursorHistogram(startIndex: 10)
        for _ in 0..<10 { histogram.append(0) }
        histogram.add(1, at: 15)
        histogram.add(2, at: 12)  // before the oldest
        histogram.add(1, at: 13)  // between two cells
        histogram.add(1, at: 19)  // after the newest
        #expect(histogram.nonEmptyCells.map(\.position) == [12, 13, 15, 19])
        #expect(histogram.total == 5 && histogram.startIndex == 12)
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func aReaderMovesOneUnitOfCount() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(1)  // 0: one reader
        histogram.append(0)
        histogram.append(2)  // 2: two readers
        for _ in 0..<7 { histogram.append(0) }
        // Alone at its position, nobody in between.
        histogram.moveOne(from: 0, to: 1)
        #expect(Array(histogram.nonEmptyCells) == [.init(position: 1, count: 1), .init(position: 2, count: 2)])
        // Alone, onto another reader's position.
        histogram.moveOne(from: 1, to: 2)
        #expect(Array(histogram.nonEmptyCells) == [.init(position: 2, count: 3)])
        // Not alone: its position keeps the others.
        histogram.moveOne(from: 2, to: 5)
        #expect(Array(histogram.nonEmptyCells) == [.init(position: 2, count: 2), .init(position: 5, count: 1)])
        // Alone, past another reader.
        histogram.moveOne(from: 5, to: 6)
        histogram.add(1, at: 7)
        histogram.moveOne(from: 6, to: 9)
        #expect(histogram.nonEmptyCells.map(\.position) == [2, 7, 9])
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func removingTheFirstCellReturnsIt() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(2)
        histogram.append(1)
        #expect(histogram.removeFirst() == .init(position: 0, count: 2))
        #expect(histogram.startIndex == 1 && histogram.first == 1)
        #expect(histogram.removeFirst() == .init(position: 1, count: 1))
        #expect(histogram.isEmpty && histogram.startIndex == 2)
    }

    @Test func theOnlyReaderMovesWithoutZerosInBetween() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(1)
        for _ in 0..<99 { histogram.append(0) }
        histogram.moveOne(from: 0, to: 90)
        #expect(histogram.counts.count == 1 && histogram.startIndex == 90 && histogram.first == 1)
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func theFrontIsReclaimed() {
        var histogram = CursorHistogram(startIndex: 0)
        for _ in 0..<100 { histogram.append(1) }
        for _ in 0..<90 { histogram.removeFirst() }
        #expect(histogram.counts.count == 10 && histogram.startIndex == 90)
        // Everyone leaves: nothing stays stored.
        for position in 90..<100 { histogram.subtract(1, at: position) }
        #expect(histogram.isEmpty && histogram.counts.isEmpty && histogram.startIndex == 100)
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func aJoinerFarBehindIsKeptApartUntilItCatchesUp() {
        var histogram = CursorHistogram(startIndex: 0)
        for _ in 0..<100_000 { histogram.append(0) }
        histogram.add(1, at: 99_999)  // a subscriber one element behind the tail
        // A replay subscriber joins 100,000 elements back, and leaves again: nothing is
        // stored for the positions in between.
        histogram.add(1, at: 0)
        #expect(histogram.counts.count == 1 && histogram.behind == [.init(position: 0, count: 1)])
        #expect(histogram.startIndex == 0 && histogram.first == 1)
        histogram.subtract(1, at: 0)
        #expect(histogram.counts.count == 1 && histogram.behind.isEmpty && histogram.startIndex == 99_999)
        // One that reads instead moves within `behind`, then joins the stored counts.
        histogram.add(1, at: 10)
        histogram.moveOne(from: 10, to: 42)
        #expect(histogram.behind == [.init(position: 42, count: 1)] && histogram.counts.count == 1)
        histogram.moveOne(from: 42, to: 99_999)
        #expect(histogram.behind.isEmpty && histogram[99_999] == 2 && histogram.counts.count == 1)
        #expect(histogram.invariantViolation() == nil)
    }

    @Test func theCellsBeforeAPositionAreGatheredOnce() {
        var histogram = CursorHistogram(startIndex: 0)
        histogram.append(2)  // 0: two subscribers that stopped reading
        for _ in 0..<4_000 { histogram.append(0) }
        histogram.add(1, at: 2_000)
        histogram.add(3, at: 1_000)
        // A `.bufferingNewest` lane gathering the members whose oldest elements were
        // dropped: what lies before the position leaves, and nothing after it.
        #expect(histogram.removeAll(before: 10) == 2)
        #expect(histogram.startIndex == 1_000 && histogram.first == 3 && histogram.members == 4)
        #expect(histogram.removeAll(before: 10) == 0)
        #expect(histogram.removeAll(before: 1_001) == 3)
        #expect(histogram.startIndex == 2_000 && histogram.counts.count == 1)
        // From `behind` too, and up to the end: then nothing is stored.
        histogram.add(1, at: 3)
        histogram.add(2, at: 5)
        #expect(histogram.removeAll(before: 5) == 1)
        #expect(histogram.behind == [.init(position: 5, count: 2)])
        #expect(histogram.removeAll(before: histogram.endIndex) == 3)
        #expect(histogram.isEmpty && histogram.counts.isEmpty && histogram.behind.isEmpty)
        #expect(histogram.invariantViolation() == nil)
    }

    /// Random operations a lane performs, checked against a dense array of counts.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func agreesWithADenseHistogram(seed: UInt64) async {
        var random = LCG(seed: seed)
        var histogram = CursorHistogram(startIndex: 0)
        var dense: [Int] = []  // dense[p]: members at p, for p < endIndex
        for _ in 0..<3_000 {
            // Seconds of work under a sanitizer: let the tests beside it run at every step.
            await Task.yield()
            let occupied = dense.indices.filter { dense[$0] > 0 }
            switch random.next() % 5 {
            case 0, 1:
                let count = random.next() % 3 == 0 ? Int(random.next() % 3) : 0
                histogram.append(count)
                dense.append(count)
            case 2 where !dense.isEmpty:
                let position = Int(random.next() % UInt64(dense.count))
                let count = 1 + Int(random.next() % 2)
                histogram.add(count, at: position)
                dense[position] += count
            case 3 where !occupied.isEmpty:
                // A member moves forward (to a position before the end), as a reader does.
                let from = occupied[Int(random.next() % UInt64(occupied.count))]
                let to = from + Int(random.next() % UInt64(dense.count - from))
                if to > from {
                    histogram.moveOne(from: from, to: to)
                } else {
                    histogram.subtract(1, at: from)
                    histogram.add(1, at: to)
                }
                dense[from] -= 1
                dense[to] += 1
            case 4 where !occupied.isEmpty && random.next() % 2 == 0:
                let cell = histogram.removeFirst()
                #expect(cell.position == occupied[0] && cell.count == dense[occupied[0]])
                dense[occupied[0]] = 0
            case 4 where !occupied.isEmpty:
                // The cells before a position are gathered (`.bufferingNewest`).
                let position = Int(random.next() % UInt64(dense.count + 1))
                let expected = dense[..<position].reduce(0, +)
                #expect(histogram.removeAll(before: position) == expected)
                for p in 0..<position { dense[p] = 0 }
            default:
                break
            }
            #expect(histogram.invariantViolation() == nil)
            #expect(histogram.endIndex == dense.count)
            #expect(histogram.startIndex == (dense.firstIndex { $0 > 0 } ?? dense.count))
        }
        for position in dense.indices {
            #expect(histogram[position] == dense[position], "position \(position)")
        }
        #expect(histogram.total == dense.reduce(0, +))
    }
}

/// The histogram inside a lane: what the lane's transitions leave stored. Sizes, not
/// timings: a histogram that stored every position between two subscribers would make each
/// of these transitions cost that distance under the lock.
@Suite("CursorHistogram in a lane: nothing stored between distant subscribers")
struct LaneHistogramTests {
    @Test func replayJoinersBehindALaggingSubscriberStoreNothingInBetween() {
        let window = 10_000
        var machine = Machine(policy: .unbounded, replay: window, mode: .push)
        let lagging = machine.subscriberJoined()
        for value in 0..<window { _ = machine.produce(value, epoch: 0) }
        #expect(machine.drain(lagging).count == window)
        _ = machine.produce(window, epoch: 0)  // `lagging` is now one element behind
        for _ in 0..<100 {
            let joiner = machine.subscriberJoined()  // at the replay window's start
            #expect(machine.lanes[0].counts.counts.count == 1)
            #expect(machine.lanes[0].counts.behind.count == 1)
            _ = machine.subscriberLeft(joiner)
            #expect(machine.lanes[0].counts.behind.isEmpty)
        }
        #expect(machine.invariantViolation() == nil)
    }

    @Test func aStalledBufferingNewestSubscriberMovesWithoutStoringTheWindow() {
        let limit = 1_000
        var machine = Machine(policy: .bufferingNewest(limit), replay: 0, mode: .push)
        let stalled = machine.subscriberJoined()
        let reader = machine.subscriberJoined()
        var next = 0
        for _ in 0..<limit {
            _ = machine.produce(next, epoch: 0)
            next += 1
        }
        for _ in 0..<(limit / 2) { _ = machine.take(reader) }
        // Every element now drops the stalled subscriber's oldest. Its cell stays where it
        // was until it is `settleDistance` behind the tail, then moves to the window start
        // at once (`Lane.settle()`): the counts stored never span more than that, and are
        // neither rebuilt nor scanned more than once per position.
        func step() {
            _ = machine.produce(next, epoch: 0)
            next += 1
            _ = machine.take(reader)
        }
        let span = machine.lanes[0].settleDistance
        #expect(span == 2 * limit)
        for _ in 0..<span { step() }
        let storage = machine.lanes[0].counts.counts.storage.map(ObjectIdentifier.init)
        for _ in 0..<5_000 {
            step()
            #expect(machine.lanes[0].counts.counts.count <= span + 1)
        }
        #expect(machine.lanes[0].counts.counts.storage.map(ObjectIdentifier.init) == storage, "not rebuilt")
        #expect(machine.drain(stalled).count == limit)
        #expect(machine.invariantViolation() == nil)
    }
}
