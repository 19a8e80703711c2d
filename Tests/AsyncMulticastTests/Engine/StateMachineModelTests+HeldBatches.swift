// The model's `.bufferingNewest` iterators: the batch a read took ahead stays subject to the
// policy (`HeldBatch.take`), as the storage's `refill` checks it. Its elements stay in
// the subscriber's `pending` until returned, where the model's own queue drops them.

@testable import AsyncMulticast

extension ModelRun {
    /// A read of subscriber `k`, whose `.bufferingNewest` batch holds more, as the iterator
    /// does it: its next element or gap, checked against the model; `nil` then. Or, when the
    /// policy dropped all the rest, how many: the machine's read comes next, told that count.
    mutating func readHeld(_ k: Int) throws(ModelFailure) -> Int? {
        let id = self.subscribers[k].id
        let machine = self.machine
        let taken = self.subscribers[k].held.take(
            tail: machine.tail, reportsGaps: self.subscribers[k].reportsGaps,
            exactTail: { machine.heldBatchTail(of: id) })
        switch taken {
        case .element(let element, let missed):
            if self.subscribers[k].reportsGaps, let gap = self.subscribers[k].takeGap() {
                throw self.fail("read \(element) from the batch, expected a gap of \(gap)")
            }
            guard !self.subscribers[k].pending.isEmpty else {
                throw self.fail("read \(element) from the batch, expected nothing")
            }
            let expected = self.subscribers[k].pending.removeFirst()
            let expectedMissed = self.subscribers[k].carried + self.subscribers[k].gaps.removeFirst()
            self.subscribers[k].carried = 0
            try self.check(element == expected, "read \(element) from the batch, expected \(expected)")
            try self.check(missed == expectedMissed, "read \(missed) missed from the batch, expected \(expectedMissed)")
            return nil
        case .gap(let missed):
            guard self.subscribers[k].reportsGaps, let gap = self.subscribers[k].takeGap() else {
                throw self.fail("a gap of \(missed) from the batch, expected none")
            }
            try self.check(missed == gap, "a gap of \(missed) from the batch, expected \(gap)")
            return nil
        case .usedUp(let missed):
            return missed
        }
    }
}
