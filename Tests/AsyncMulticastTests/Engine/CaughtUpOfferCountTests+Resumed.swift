// A subscriber resumed in `wait` with an element remembers the offer count too
// (`ReadReport.offersWhenParked`): the count it read under the lock when its continuation
// was stored, if exactly one offer (the element it was handed) was counted by the time it
// runs. Then it is still at the tail, and its next refill skips the read that would find
// nothing (lockstep sends: one wake-up per delivery, and no read before the next wait).

import Testing

@testable import AsyncMulticast

extension CaughtUpOfferCountTests {
    /// Every policy hands an element to a subscriber suspended in `next()`. Alone and off an
    /// actor it must read to wait for offers (`CatchUpSpin`), so it does not remember.
    @Test(
        "a subscriber resumed with an element remembers the count, unless it may wait for offers alone",
        arguments: [
            SharedBufferingPolicy.bounded(8), .unbounded, .evicting(8), .bufferingNewest(8), .bufferingOldest(8),
        ], [1, 2])
    func aResumedSubscriberRemembersTheCount(_ policy: SharedBufferingPolicy, subscribers: Int) async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            subject.storage.catchUp.offers.store(5, ordering: .relaxed)
            let other = subscribers > 1 ? subject.makeAsyncIterator() : nil
            let reader = Task { () -> (Int?, UInt32) in
                var a = subject.makeAsyncIterator()
                let element = await a.next()
                return (element, a.batch.offersWhenCaughtUp)
            }
            try await waitUntil("a waiting") { subject.storage.waitingCount == 1 }
            subject.send(1)
            let (element, remembered) = await reader.value
            #expect(element == 1)
            #expect(remembered == (subscribers == 1 ? 0 : 6), "parked at 5, resumed by the sixth offer")
            withExtendedLifetime(other) {}
        }
    }

    /// On the main actor the subscriber runs only once the test yields it, so the test
    /// decides which offers were counted before it was resumed: its hand-over alone (it
    /// remembers the count and skips its next read), or one more (it does not, and reads).
    /// On the main actor the subscriber runs only once the test yields it, so the test
    /// decides which offers were counted before it was resumed: its hand-over alone (it
    /// remembers the count and skips its next read), or one more (it does not, and reads).
    /// The body stays on the main actor (no `withTimeout`, whose body runs in a task of its
    /// own); `waitUntil` and the suite's time limit guard it.
    @MainActor
    @Test func aSubscriberResumedAfterAFurtherOfferDoesNotRememberTheCount() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var b = subject.makeAsyncIterator()
        let reader = Task { @MainActor () -> [[UInt32]] in
            var a = subject.makeAsyncIterator()
            var seen: [[UInt32]] = []
            while let element = await a.next(isolation: MainActor.shared) {
                seen.append([UInt32(element), a.batch.offersWhenCaughtUp])
                if element == 4 { break }
            }
            return seen
        }
        // Each hand-over removes the waiter at once: the next wait is the next call's.
        try await waitUntil("a waiting for 1") { subject.storage.waitingCount == 1 }
        subject.send(1)
        try await waitUntil("a waiting for 2") { subject.storage.waitingCount == 1 }
        subject.send(2)
        try await waitUntil("a waiting for 3") { subject.storage.waitingCount == 1 }
        subject.send(3)
        subject.send(4)
        let seen = await reader.value
        #expect(
            seen == [
                [1, 0],  // parked at 0, which is never remembered
                [2, 2],  // parked at 1, resumed at 2: still at the tail
                [3, 0],  // parked at 2 (its read skipped), resumed at 4: 4 is ahead
                [4, 4],  // read, and caught up
            ])
        #expect(await b.take(4) == [1, 2, 3, 4])
    }
}
