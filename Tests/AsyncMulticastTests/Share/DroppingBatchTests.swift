// A `.bufferingNewest(n)` iterator takes up to `min(n / 2, 64)` ready elements ahead in one
// read, as lossless ones do, but its policy may still drop them: before returning each, it
// checks the element's position against the tail the producers publish
// (`HeldBatch.take`), and a drop it sees is confirmed under the lock. What it returns
// and reports is what reading them one at a time would give (tokio's receivers check their
// position the same way). The randomized comparisons with a one-at-a-time reference are in
// LagReportingTests (`.bufferingNewest(6)` and `(9)`) and the model tests; these pin down
// the cases by hand.

import Testing

@testable import AsyncMulticast

@Suite("Dropping batches: what a .bufferingNewest iterator took ahead", .timeLimit(.minutes(2)))
struct DroppingBatchTests {
    /// `HeldBatch.take` alone: a batch of 3 at positions 1, 2, 3 under `.bufferingNewest(4)`
    /// (expiry 1 + 4), read at different tails.
    @Test(
        "a held element is returned until the tail passes its position plus n",
        arguments: [
            // (tail, reportsGaps, what the first call returns)
            (4, false, "element 10, missed 0, next 1"),
            (5, false, "element 10, missed 0, next 1"),
            (6, false, "element 11, missed 1, next 2"),
            (7, false, "element 12, missed 2, next 3"),
            (7, true, "gap 2, next 2"),
            (8, false, "used up, missed 3, next 3"),
            (8, true, "used up, missed 3, next 3"),
        ])
    func takeHeldFollowsThePositions(tail: Int, reportsGaps: Bool, expected: String) {
        var held = HeldBatch<Int>()
        var batch = [10, 11, 12]
        held.hold(&batch, expiry: 5)
        let taken = held.take(tail: tail, reportsGaps: reportsGaps, exactTail: { tail })
        let described: String
        switch taken {
        case .element(let element, let missed): described = "element \(element), missed \(missed), next \(held.next)"
        case .gap(let missed): described = "gap \(missed), next \(held.next)"
        case .usedUp(let missed): described = "used up, missed \(missed), next \(held.next)"
        }
        #expect(described == expected)
    }

    @Test("a drop the published tail shows is confirmed by the exact tail: an ended subscriber's stays")
    func theExactTailDecides() {
        var held = HeldBatch<Int>()
        var batch = [10, 11]
        held.hold(&batch, expiry: 5)
        // Published: 9 (a later connection produced); the subscriber's connection ended at 5.
        guard case .element(10, missed: 0) = held.take(tail: 9, reportsGaps: true, exactTail: { 5 }) else {
            Issue.record("the held element was dropped by elements that never reached its subscriber")
            return
        }
        guard case .element(11, missed: 0) = held.take(tail: 9, reportsGaps: true, exactTail: { 6 }) else {
            Issue.record("the second held element was dropped")
            return
        }
        #expect(held.next == 2)
    }

    @Test("sends after a read that took a batch drop what the iterator holds: .missed, then the newest n")
    func sendsDropWhatTheIteratorHolds() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(4))
        var events = subject.events().makeAsyncIterator()
        for value in 0..<4 { subject.send(value) }
        #expect(await events.next() == .element(0))
        #expect(events.subscription.held?.withLock(\.elements) == [1, 2], "it took n / 2 ahead")
        // One at a time it would now hold 1, 2, 3 and these two: the oldest one drops.
        subject.send(4)
        subject.send(5)
        #expect(await events.next() == .missed(1))
        #expect(await events.next() == .element(2), "from its batch: still within the newest 4")
        #expect(await events.next() == .element(3))
        // Ten more: everything it holds and took ahead drops but the newest 4.
        for value in 6..<16 { subject.send(value) }
        #expect(await events.next() == .missed(8))
        subject.finish()
        var rest: [SharedEvent<Int>] = []
        while let event = await events.next() { rest.append(event) }
        #expect(rest == (12..<16).map { .element($0) })
    }

    @Test("a plain iterator skips what its policy dropped from its batch")
    func aPlainIteratorSkips() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(8))
        var iterator = subject.makeAsyncIterator()
        for value in 0..<8 { subject.send(value) }
        #expect(await iterator.next() == 0)
        for value in 8..<12 { subject.send(value) }
        subject.finish()
        var rest: [Int] = []
        while let value = await iterator.next() { rest.append(value) }
        #expect(rest == Array(4..<12), "the newest 8, as reading one at a time would give")
    }

    /// Senders waiting for room are appended in the critical section of the read that made
    /// room, another subscriber's: that critical section publishes the tail too, or the
    /// iterator would return what its policy dropped.
    @Test("senders let in by another subscriber's read drop what the iterator holds")
    func sendersLetInByAnotherRead() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var paced = subject.buffering(.bounded(1)).makeAsyncIterator()
        var events = subject.events(buffering: .bufferingNewest(4)).makeAsyncIterator()
        for value in 0..<4 { subject.send(value) }  // past `paced`'s bound: a plain send never waits
        #expect(await events.next() == .element(0))
        #expect(events.subscription.held?.withLock(\.elements) == [1, 2])
        var senders: [Task<Void, Never>] = []
        for value in 4..<7 {
            senders.append(Task { await subject.send(waitingForRoom: value) })
            try await waitUntil("\(value - 3) senders waiting") {
                subject.storage.producersWaitingForRoom == value - 3
            }
        }
        // `paced` reads 0 to 5: each read that empties it lets the next sender in.
        for expected in 0..<6 { #expect(await paced.next() == expected) }
        for sender in senders { await sender.value }
        // One at a time, `events` would hold 3, 4, 5, 6: 1 and 2 dropped.
        #expect(await events.next() == .missed(2))
        #expect(await events.next() == .element(3))
        subject.finish()
        var rest: [SharedEvent<Int>] = []
        while let event = await events.next() { rest.append(event) }
        #expect(rest == [.element(4), .element(5), .element(6)])
        withExtendedLifetime(paced) {}
    }
}
