// `CatchUpSpin`: a sole subscriber that caught up waits briefly for a busy producer instead
// of suspending. It is limited to lossless lanes, so what subscribers receive does not
// change: these tests check the rules that bound the wait, who may wait, and that every
// producer path feeds it; delivery itself is covered by every other suite.

import Testing

@testable import AsyncMulticast

@Suite("State machine: catch-up spin")
struct CatchUpSpinTests {
    @Test func withoutOffersItGivesUpAndReleasesTheToken() {
        let spin = CatchUpSpin()
        let first = spin.waitForOffers(upTo: CatchUpSpin.batch)
        #expect(!first, "nothing was offered: suspend")
        let isTaken = spin.isTaken.load(ordering: .relaxed)
        #expect(!isTaken, "the token is free again")
        let second = spin.waitForOffers(upTo: CatchUpSpin.batch)
        #expect(!second, "and can be taken again")
    }

    @Test func onlyOneSubscriberSpinsAtATime() {
        let spin = CatchUpSpin()
        spin.isTaken.store(true, ordering: .relaxed)  // another subscriber is spinning
        var rounds = 0
        let waited = spin.waitForOffers(upTo: 1, eachRound: { rounds += 1 })
        #expect(!waited, "without the token: suspend at once")
        #expect(rounds == 0, "without spinning at all")
        let isTaken = spin.isTaken.load(ordering: .relaxed)
        #expect(isTaken, "the holder's token is left alone")
    }

    // The offers below are made from the waiting thread itself, through the round hook, so
    // that the outcome does not depend on another thread being scheduled meanwhile.

    @Test func itStopsAsSoonAsTheBatchArrived() {
        let spin = CatchUpSpin()
        let clock = ContinuousClock()
        let start = clock.now
        let waited = spin.waitForOffers(upTo: 5, eachRound: { spin.recordOffer() })
        let elapsed = start.duration(to: clock.now)
        #expect(waited)
        let offers = spin.offers.load(ordering: .relaxed)
        #expect(offers <= 5, "one offer per round: it never went on after the fifth")
        // Five rounds take well under maxSpin (20 µs), unless the thread was preempted
        // (other suites run beside this one): then the time bound rightly ended it first.
        if elapsed < CatchUpSpin.maxSpin {
            #expect(offers == 5, "one offer per round: it stopped after the fifth")
        }
        let isTaken = spin.isTaken.load(ordering: .relaxed)
        #expect(!isTaken, "the token is released after a wait that saw offers too")
    }

    @Test func aProducerThatNeverStopsIsWaitedForAtMostMaxSpin() {
        let spin = CatchUpSpin()
        let clock = ContinuousClock()
        let start = clock.now
        let waited = spin.waitForOffers(upTo: .max, eachRound: { spin.recordOffer() })
        let elapsed = start.duration(to: clock.now)
        #expect(waited)
        #expect(elapsed >= CatchUpSpin.maxSpin, "neither the batch nor a quiet spell ended it")
        // Only a hang guard, generous because a loaded machine may preempt the thread for
        // seconds; the bound itself is maxSpin (20 µs).
        #expect(elapsed < .seconds(30), "took \(elapsed)")
    }

    @Test func aCancelledTaskStopsWaiting() async {
        let spin = SpinHolder()
        let rounds = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var rounds = 0
            let waited = spin.spin.waitForOffers(
                upTo: .max,
                eachRound: {
                    rounds += 1
                    spin.spin.recordOffer()
                })
            #expect(waited, "what was offered before it noticed is still read")
            return rounds
        }.value
        #expect(rounds == 1, "it noticed the cancellation after its first round")
    }

    @Test func onlyASoleSubscriberOnALosslessPolicyMayWait() {
        func batch(_ policy: SharedBufferingPolicy) -> Int? {
            var machine = MulticastStateMachine<Int, Never>(policy: policy, replay: 0, mode: .automatic)
            let id = machine.subscriberJoined()
            return machine.catchUpBatch(for: id)
        }
        #expect(batch(.unbounded) == CatchUpSpin.batch)
        #expect(batch(.bounded(64)) == CatchUpSpin.batch)
        #expect(batch(.bounded(8)) == 8, "the producer parks after eight")
        #expect(batch(.bounded(1)) == 1)
        #expect(batch(.bufferingNewest(4)) == nil, "dropping: must be suspended to be handed elements")
        #expect(batch(.bufferingNewest(0)) == nil)
        #expect(batch(.bufferingOldest(4)) == nil)

        var machine = MulticastStateMachine<Int, Never>(policy: .unbounded, replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        let b = machine.subscriberJoined()
        #expect(machine.catchUpBatch(for: a) == nil, "two subscribers: the producer wakes the other anyway")
        _ = machine.subscriberLeft(b)
        #expect(machine.catchUpBatch(for: a) == CatchUpSpin.batch, "alone again")
        _ = machine.subscriberLeft(a)
        #expect(machine.catchUpBatch(for: a) == nil, "a subscriber that left")
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
}

/// A `CatchUpSpin` (non-copyable) that tasks can share, as the storage shares its own.
private final class SpinHolder: Sendable {
    let spin = CatchUpSpin()
}
