// A subscriber whose last read took every element produced so far remembers the producers'
// offer count (`ElementBatch.offersWhenCaughtUp`). When its batch is used up and the count
// has not moved, `MulticastStorage.refill` skips the read (a lock acquisition and a
// cancellation check) and says to wait: `wait` reads under the lock anyway. The skip
// cannot change what a subscriber receives, so these tests check when the count is
// remembered, and that the cases where the guess is wrong or the task was cancelled still
// come out right.

import Testing

@testable import AsyncMulticast

@Suite("Skipping the read after catching up")
struct CaughtUpReadTests {
    // MARK: The cost in the iterator

    @Test func theRememberedCountTakesFourBytesOfAnIterator() {
        // The subscription, the batch's elements and index, and the 32-bit count (0: not
        // remembered): 28 bytes, 32 with padding (24 without the count).
        #expect(MemoryLayout<ElementBatch<Int>>.size == 20)
        #expect(MemoryLayout<AsyncShareSequence<AsyncStream<Int>>.AsyncIterator>.stride == 32)
        #expect(MemoryLayout<AsyncPassthroughSubject<Int, Never>.AsyncIterator>.stride == 32)
    }

    // MARK: The machine's report

    @Test func aReadThatTakesEverythingReportsCaughtUp() {
        var (machine, ids) = runningMachine(policy: .bounded(8), subscribers: 1)
        for element in 0..<3 { _ = machine.produce(element, epoch: 0) }
        var batch: [Int]? = []
        var report = ReadReport()
        guard case .element(0) = machine.read(ids[0], batch: &batch, report: &report) else {
            Issue.record("expected element 0")
            return
        }
        #expect(batch == [1, 2])
        #expect(report.caughtUp, "the batch reached the tail")
    }

    @Test func aReadCutShortByTheBatchLimitIsNotCaughtUp() {
        // `.bounded(8)`: at most 4 elements besides the one returned.
        var (machine, ids) = runningMachine(policy: .bounded(8), subscribers: 1)
        for element in 0..<8 { _ = machine.produce(element, epoch: 0) }
        var batch: [Int]? = []
        var report = ReadReport()
        guard case .element(0) = machine.read(ids[0], batch: &batch, report: &report) else {
            Issue.record("expected element 0")
            return
        }
        #expect(batch == [1, 2, 3, 4])
        #expect(!report.caughtUp, "three elements are still ahead")
    }

    @Test func aReadThatFindsNothingIsNotCaughtUp() {
        var (machine, ids) = runningMachine(policy: .bounded(8), subscribers: 1)
        var batch: [Int]? = []
        var report = ReadReport()
        guard case .empty = machine.read(ids[0], batch: &batch, report: &report) else {
            Issue.record("expected nothing to read")
            return
        }
        #expect(!report.caughtUp, "only a read that took elements says so")
    }

    // MARK: When the iterator remembers the count

    @Test func aCaughtUpSubscriberRemembersTheOfferCount() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        var b = subject.makeAsyncIterator()
        for element in 1...3 { subject.send(element) }
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp == 3, "it took 2 and 3 as well: all three offers")
        #expect(subject.storage.catchUp.offerCount == 3)
        #expect(await b.next() == 1)
        #expect(b.batch.offersWhenCaughtUp == 3)
    }

    @Test func aSoleSubscriberDoesNotSkipTheReadItMayWaitForOffersIn() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        for element in 1...3 { subject.send(element) }
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp == 0, "its refill may wait briefly for a busy producer (CatchUpSpin)")
    }

    /// On an actor a subscriber never waits for offers (the main actor must not busy-wait),
    /// so even the sole one remembers the count and skips its empty read.
    @MainActor
    @Test func aSoleSubscriberOnTheMainActorRemembersTheCount() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        for element in 1...3 { subject.send(element) }
        // As `for await` calls it on an actor; a plain `next()` runs off the actor.
        #expect(await a.next(isolation: #isolation) == 1)
        #expect(a.batch.offersWhenCaughtUp == 3)
    }

    /// Where the producer never waits for room, a caught-up subscriber's next read usually
    /// finds elements: reading the count would cost every refill a line the producer writes.
    @Test(arguments: [
        SharedBufferingPolicy.unbounded, .evicting(8), .bufferingNewest(8), .bufferingOldest(8),
    ])
    func aSubscriberWhoseProducerNeverWaitsForRoomDoesNotSkip(_ policy: SharedBufferingPolicy) async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy)
        var a = subject.makeAsyncIterator()
        let b = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp == 0)
        withExtendedLifetime(b) {}
    }

    @Test func aSubscriberStoppedByItsBatchLimitDoesNotSkip() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
        var a = subject.makeAsyncIterator()
        var b = subject.makeAsyncIterator()
        for element in 1...4 { subject.send(element) }
        #expect(await a.next() == 1)
        #expect(a.batch.elements == [2, 3], "half the bound")
        #expect(a.batch.offersWhenCaughtUp == 0, "4 is still ahead")
        for expected in 2...4 { #expect(await a.next() == expected) }
        #expect(await b.next() == 1)
    }

    // MARK: What still comes out right

    @Test func anElementOfferedAfterCatchingUpIsRead() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        let b = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp == 1)
        subject.send(2)
        #expect(await a.next() == 2, "the count moved: it reads")
        #expect(a.batch.offersWhenCaughtUp == 2, "read and caught up again (a wait would have left it unset)")
        withExtendedLifetime(b) {}
    }

    /// The producer records its offer after releasing the lock. A subscriber that compares
    /// the count in between guesses wrong: it waits, and `wait`, reading under the lock,
    /// finds the element at once.
    @Test func anElementProducedButNotYetCountedIsStillReturned() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        let b = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await a.next() == 1)
        let counted = subject.storage.catchUp.offerCount
        #expect(a.batch.offersWhenCaughtUp == counted)
        // Produced under the lock, as `offer` does, but not counted yet.
        #expect(subject.storage.offerUncounted(2) == 0, "nobody was waiting")
        #expect(subject.storage.catchUp.offerCount == counted, "the count has not moved")
        #expect(await a.next() == 2)
        #expect(a.batch.offersWhenCaughtUp == 0, "the remembered count is used once")
        withExtendedLifetime(b) {}
    }

    @Test func theEndAfterCatchingUpIsReturned() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var a = subject.makeAsyncIterator()
        var b = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp != 0)
        subject.finish()  // an end is no offer: the count stays
        #expect(await a.next() == nil)
        #expect(await b.next() == 1)
        #expect(await b.next() == nil)
    }

    /// The skipped read is also where cancellation is observed; `wait` observes it
    /// instead, before it suspends.
    @Test func aCancelledCaughtUpSubscriberLeavesAtItsNextCall() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var a = subject.makeAsyncIterator()
            var b = subject.makeAsyncIterator()
            subject.send(1)
            #expect(await a.next() == 1)
            #expect(a.batch.offersWhenCaughtUp != 0)
            let afterCancel = await Task { [a] in
                var iterator = a
                withUnsafeCurrentTask { $0?.cancel() }
                return await iterator.next()
            }.value
            #expect(afterCancel == nil)
            #expect(subject.subscriberCount == 1, "it left")
            subject.send(2)
            #expect(await b.next() == 1)
            #expect(await b.next() == 2)
        }
    }

    @Test func aWaitAfterTheSkippedReadIsHandedTheNextElement() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var a = subject.makeAsyncIterator()
            let b = subject.makeAsyncIterator()
            subject.send(1)
            #expect(await a.next() == 1)
            let reader = Task { [a] in
                var iterator = a
                return await iterator.next()
            }
            try await waitUntil("a waiting") { subject.storage.waitingCount == 1 }
            subject.send(2)
            #expect(await reader.value == 2)
            withExtendedLifetime(b) {}
        }
    }
}
