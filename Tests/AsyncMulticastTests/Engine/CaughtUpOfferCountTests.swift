// A subscriber whose last read took every element produced so far remembers the producers'
// offer count (`ElementBatch.offersWhenCaughtUp`). When its batch is used up and the count
// has not moved, `MulticastStorage.refill` skips the read (a lock acquisition and a
// cancellation check) and says to wait: `wait` reads under the lock anyway. These tests check
// the count itself: what it costs an iterator, when a read reports catching up and the
// iterator remembers the count, that every producer path moves it, and its wrap-around.
// What a subscriber still receives when it skips: CaughtUpSkippedReadTests.swift.

import Synchronization
import Testing

@testable import AsyncMulticast

@Suite("Skipping the read after catching up: the offer count", .timeLimit(.minutes(2)))
struct CaughtUpOfferCountTests {
    // MARK: The cost in the iterator

    @Test func theRememberedCountTakesFourBytesOfAnIterator() {
        // The subscription, the batch's elements and index, and the 32-bit count (0: not
        // remembered): 28 bytes, 32 with padding (24 without the count).
        #expect(MemoryLayout<ElementBatch<Int>>.size == 20)
        #expect(MemoryLayout<AsyncShareSequence<Int, Never>.AsyncIterator>.stride == 32)
        #expect(MemoryLayout<AsyncPassthroughSubject<Int, Never>.AsyncIterator>.stride == 32)
    }

    // MARK: The machine's report

    /// Merged from aReadThatTakesEverythingReportsCaughtUp and
    /// aReadCutShortByTheBatchLimitIsNotCaughtUp: the same read, after 3 or after 8 elements.
    @Test(
        "a read reports catching up when its batch reached the tail, not when the batch limit cut it short",
        arguments: [
            (produced: 3, batch: [1, 2], caughtUp: true),
            // `.bounded(8)`: at most 4 elements besides the one returned; three are still ahead.
            (produced: 8, batch: [1, 2, 3, 4], caughtUp: false),
        ])
    func aReadReportsCaughtUpOnlyIfItTookEverything(produced: Int, expectedBatch: [Int], caughtUp: Bool) {
        var (machine, ids) = runningMachine(policy: .bounded(8), subscribers: 1)
        for element in 0..<produced { _ = machine.produce(element, epoch: 0) }
        var batch: [Int]? = []
        var report = ReadReport()
        guard case .element(0) = machine.read(ids[0], batch: &batch, report: &report) else {
            Issue.record("expected element 0")
            return
        }
        #expect(batch == expectedBatch)
        #expect(report.caughtUp == caughtUp, "caught up exactly when the batch reached the tail")
    }

    @Test func aReadThatFindsNothingIsNotCaughtUp() {
        var (machine, ids) = runningMachine(policy: .bounded(8), subscribers: 1)
        var batch: [Int]? = []
        var report = ReadReport()
        guard case .nothingReady = machine.read(ids[0], batch: &batch, report: &report) else {
            Issue.record("expected nothing to read")
            return
        }
        #expect(!report.caughtUp, "only a read that took elements says so")
    }

    // MARK: When the iterator remembers the count

    /// A `.bounded(bound)` subject whose two subscribers, `a` and `b`, each hold 1...sent.
    private struct TwoSubscribers {
        let subject: AsyncPassthroughSubject<Int, Never>
        var a: SharedIterator<Int, Never>
        var b: SharedIterator<Int, Never>

        init(bound: Int, holding sent: Int) {
            self.subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
            self.a = self.subject.makeAsyncIterator()
            self.b = self.subject.makeAsyncIterator()
            for element in 1...sent { self.subject.send(element) }
        }
    }

    @Test func aCaughtUpSubscriberRemembersTheOfferCount() async {
        var readers = TwoSubscribers(bound: 8, holding: 3)
        #expect(await readers.a.next() == 1)
        #expect(readers.a.batch.offersWhenCaughtUp == 3, "it took 2 and 3 as well: all three offers")
        #expect(readers.subject.storage.catchUp.offerCount == 3)
        #expect(await readers.b.next() == 1)
        #expect(readers.b.batch.offersWhenCaughtUp == 3)
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
        var readers = TwoSubscribers(bound: 4, holding: 4)
        #expect(await readers.a.next() == 1)
        #expect(readers.a.batch.elements == [2, 3], "half the bound")
        #expect(readers.a.batch.offersWhenCaughtUp == 0, "4 is still ahead")
        for expected in 2...4 { #expect(await readers.a.next() == expected) }
        #expect(await readers.b.next() == 1)
    }

    // MARK: Every producer path counts its offers

    enum ProducerPath: String, NamedTestCase {
        case send, sendWaitingForRoom, sendContentsOf, currentValueSet, currentValueUpdate, replaySend
        case sharedSourceEmitter, shareUpstream
    }

    /// Two subscribers; `a` catches up on 1, then 2 is produced through `path`. If the path
    /// counts its offer, `a`'s next refill reads (and remembers the count again); had it
    /// skipped, `wait` would return the element and leave the count unremembered.
    @Test("an offer through every producer path moves the count", arguments: ProducerPath.allCases)
    func everyProducerPathMovesTheCount(_ path: ProducerPath) async throws {
        try await withTimeout {
            switch path {
            case .send, .sendWaitingForRoom, .sendContentsOf:
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
                var a = subject.makeAsyncIterator()
                var b = subject.makeAsyncIterator()
                subject.send(1)
                #expect(await a.next() == 1)
                #expect(a.batch.offersWhenCaughtUp == 1)
                switch path {
                case .send: subject.send(2)
                case .sendWaitingForRoom: await subject.send(waitingForRoom: 2)
                default: await subject.send(contentsOf: [2].async)
                }
                #expect(await a.next() == 2)
                #expect(a.batch.offersWhenCaughtUp == 2, "read, not waited for")
                #expect(await b.next() == 1)
                #expect(await b.next() == 2)
            case .currentValueSet, .currentValueUpdate:
                let subject = AsyncCurrentValueSubject<Int, Never>(1, buffering: .bounded(8))
                var a = subject.makeAsyncIterator()
                var b = subject.makeAsyncIterator()
                #expect(await a.next() == 1)
                #expect(a.batch.offersWhenCaughtUp == subject.storage.catchUp.offerCount)
                if path == .currentValueSet { subject.value = 2 } else { subject.update { $0 + 1 } }
                #expect(await a.next() == 2)
                #expect(a.batch.offersWhenCaughtUp == subject.storage.catchUp.offerCount, "read, not waited for")
                #expect(await b.next() == 1)
                #expect(await b.next() == 2)
            case .replaySend:
                let subject = AsyncReplaySubject<Int, Never>(replay: 2, buffering: .bounded(8))
                subject.send(0)
                var a = subject.makeAsyncIterator()
                var b = subject.makeAsyncIterator()
                #expect(await a.next() == 0, "replayed")
                subject.send(1)
                #expect(await a.next() == 1)
                #expect(a.batch.offersWhenCaughtUp == 2)
                subject.send(2)
                #expect(await a.next() == 2)
                #expect(a.batch.offersWhenCaughtUp == 3, "read, not waited for")
                #expect(await b.take(3) == [0, 1, 2])
            case .sharedSourceEmitter:
                let emitter = Lock<AsyncSharedSource<Int, Never>.Emitter?>(nil)
                let source = AsyncSharedSource<Int, Never>(buffering: .bounded(8)) { sessionEmitter in
                    emitter.withLock { $0 = sessionEmitter }
                    return {}
                }
                let a = SubscriberBox(source.makeAsyncIterator())
                var b = source.makeAsyncIterator()
                let first = a.startNext()  // starts the session
                try await waitUntil("session started") { emitter.withLock { $0 } != nil }
                try await waitUntil("a waiting") { source.storage.waitingCount == 1 }
                emitter.withLock { $0 }!.send(1)
                #expect(await first.value == 1)
                #expect(await b.next() == 1)
                #expect(b.batch.offersWhenCaughtUp == 1)
                emitter.withLock { $0 }!.send(2)
                #expect(await b.next() == 2)
                #expect(b.batch.offersWhenCaughtUp == 2, "read, not waited for")
                emitter.withLock { $0 }!.finish()
                #expect(await b.next() == nil)
                #expect(await a.next() == 2)
                #expect(await a.next() == nil)
            case .shareUpstream:
                let source = FedSource()
                let shared = source.share()
                var a = shared.makeAsyncIterator()
                let b = SubscriberBox(shared.makeAsyncIterator())
                let first = b.startNext()  // starts the upstream
                await source.control.waitForStart(of: 0)
                try await shared.waitForWaiting(1)
                source.control.yield(1)
                #expect(await first.value == 1)
                try await waitUntil("1 counted") { shared.storage.catchUp.offerCount == 1 }
                #expect(await a.next() == 1)
                #expect(a.batch.offersWhenCaughtUp == 1)
                source.control.yield(2)
                try await waitUntil("2 counted") { shared.storage.catchUp.offerCount == 2 }
                #expect(await a.next() == 2)
                #expect(a.batch.offersWhenCaughtUp == 2, "read, not waited for")
                source.control.finish()
                #expect(await a.next() == nil)
                #expect(await b.next() == 2)
                #expect(await b.next() == nil)
            }
        }
    }

    // MARK: Wrap-around

    @Test func theCountWrapsAroundWithoutHidingAnOffer() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            let storage = subject.storage
            storage.catchUp.offers.store(.max - 1, ordering: .relaxed)
            let a = SubscriberBox(subject.makeAsyncIterator())
            var b = subject.makeAsyncIterator()
            subject.send(1)
            #expect(storage.catchUp.offerCount == .max)
            #expect(await a.next() == 1)
            subject.send(2)
            #expect(storage.catchUp.offerCount == 0, "wrapped")
            #expect(await a.next() == 2)
            // Caught up at 0, which is never remembered: the next call reads, finds nothing
            // and waits.
            let third = a.startNext()
            try await waitUntil("a waiting") { storage.waitingCount == 1 }
            subject.send(3)
            #expect(await third.value == 3)
            #expect(await b.take(3) == [1, 2, 3])
        }
    }

    @Test func theRememberedCountAcrossTheWrapIsExact() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        subject.storage.catchUp.offers.store(.max - 1, ordering: .relaxed)
        var a = subject.makeAsyncIterator()
        let b = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await a.next() == 1)
        #expect(a.batch.offersWhenCaughtUp == .max)
        subject.send(2)
        #expect(await a.next() == 2, "0 != UInt32.max: it reads")
        #expect(a.batch.offersWhenCaughtUp == 0, "a count of 0 is not remembered")
        subject.send(3)
        #expect(await a.next() == 3)
        #expect(a.batch.offersWhenCaughtUp == 1, "remembered again past the wrap")
        withExtendedLifetime(b) {}
    }
}
