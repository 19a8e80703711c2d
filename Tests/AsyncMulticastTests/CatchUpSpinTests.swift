// `CatchUpSpin`: a subscriber that caught up waits briefly for a busy producer instead of
// suspending. Only timing changes, so these tests check the rules that bound the wait and
// that every producer path feeds it; delivery itself is covered by every other suite.

import Testing
@testable import AsyncMulticast

@Suite("Catch-up spin")
struct CatchUpSpinTests {
    @Test func withoutOffersItGivesUpAndReleasesTheToken() {
        let spin = CatchUpSpin()
        let first = spin.waitForOffers()
        #expect(!first, "nothing was offered: suspend")
        let isTaken = spin.isTaken.load(ordering: .relaxed)
        #expect(!isTaken, "the token is free again")
        let second = spin.waitForOffers()
        #expect(!second, "and can be taken again")
    }

    @Test func onlyOneSubscriberSpinsAtATime() {
        let spin = CatchUpSpin()
        spin.isTaken.store(true, ordering: .relaxed)  // another subscriber is spinning
        spin.recordOffer()
        let waited = spin.waitForOffers()
        #expect(!waited, "without the token: suspend at once")
        let isTaken = spin.isTaken.load(ordering: .relaxed)
        #expect(isTaken, "the holder's token is left alone")
    }

    @Test func offersDuringTheWaitAreReported() async throws {
        // A waiter on one thread and a producer on another: each attempt spins for at most
        // `maxSpin`, so on a machine with two threads free one soon overlaps the producer.
        // The timeout is only a guard against that never happening.
        try await withTimeout {
            let holder = SpinHolder()
            let stop = Lock(false)
            let producer = Task.detached {
                while !stop.withLock({ $0 }) { holder.spin.recordOffer() }
            }
            while !holder.spin.waitForOffers() {
                await Task.yield()
            }
            stop.withLock { $0 = true }
            await producer.value
            let isTaken = holder.spin.isTaken.load(ordering: .relaxed)
            #expect(!isTaken, "the token is released after a wait that saw offers too")
        }
    }

    @Test func everyWayOfProducingRecordsAnOffer() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
        let offers = { subject.storage.catchUp.offers.load(ordering: .relaxed) }
        let iterator = subject.makeAsyncIterator()
        subject.send(1)
        #expect(offers() == 1)
        await subject.send(waitingForRoom: 2)
        #expect(offers() == 2)
        subject.finish()
        subject.send(3)  // ignored after completion: not an offer
        #expect(offers() == 2)
        _ = iterator

        let current = AsyncCurrentValueSubject<Int, Never>(0)
        let before = current.storage.catchUp.offers.load(ordering: .relaxed)
        current.update { $0 + 1 }
        let after = current.storage.catchUp.offers.load(ordering: .relaxed)
        #expect(after == before + 1)

        let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
        let shared = stream.share()
        for value in 0..<3 { upstream.yield(value) }
        upstream.finish()
        var received: [Int] = []
        for await value in shared { received.append(value) }
        #expect(received == [0, 1, 2])
        let upstreamOffers = shared.storage.catchUp.offers.load(ordering: .relaxed)
        #expect(upstreamOffers == 3)
    }

    @Test func onlyASoleSubscriberMayWait() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            let mayWait = { shared.storage.state.withLock { $0.machine.mayWaitForProducer } }
            let a = Sub(shared.makeAsyncIterator())
            #expect(mayWait(), "the only subscriber")
            let b = Sub(shared.makeAsyncIterator())
            #expect(!mayWait(), "two subscribers")
            let aNext = a.startNext()
            try await shared.waitForWaiting(1)
            #expect(!mayWait(), "also while the other one is suspended: the producer wakes it anyway")

            upstream.yield(1)
            #expect(await aNext.value == 1)
            #expect(await b.next() == 1)
            b.release()
            #expect(mayWait(), "the only subscriber again")
            upstream.finish()
            #expect(await a.next() == nil)
        }
    }
}

/// A `CatchUpSpin` (non-copyable) that tasks can share, as the storage shares its own.
private final class SpinHolder: Sendable {
    let spin = CatchUpSpin()
}
