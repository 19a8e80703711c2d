// A subject's drained shutdown, `finish(drainingWithin:)`, and `waitUntilDrained(within:)`:
// the wait ends once every subscriber read what was buffered for it and the end (or left), at
// the deadline when one does not, and at once when the caller is cancelled. Deadlines are
// timed on a ManualClock that only the test moves; the readers are paced by the test, one
// element per permit, so every order below comes from a gate.

import Testing

@testable import AsyncMulticast

/// Reads a subscription one `next()` per permit, and reports each result (`nil`: the end).
struct PacedReader<Element: Sendable>: Sendable {
    let permits = Signal<Void>()
    let reads = Signal<Element?>()
    let task: Task<[Element], Never>

    init(_ subscription: SharedSubscription<Element, Never>) {
        let permits = self.permits
        let reads = self.reads
        self.task = Task {
            var received: [Element] = []
            var iterator = subscription.makeAsyncIterator()
            var permit = permits.stream.makeAsyncIterator()
            while await permit.next() != nil {
                let element = await iterator.next()
                reads.send(element)
                guard let element else { break }
                received.append(element)
            }
            return received
        }
    }

    /// Lets the reader take one more step, and returns what it read.
    func read() async -> Element?? {
        self.permits.send(())
        return await self.reads.next("a paced read")
    }
}

/// A task running `body` that records when it returned.
struct Watched<Value: Sendable>: Sendable {
    let returned = LockedFlag()
    let task: Task<Value, Never>

    init(_ body: @escaping @Sendable () async -> Value) {
        let returned = self.returned
        self.task = Task {
            let value = await body()
            returned.set()
            return value
        }
    }
}

@Suite("Subjects: drained shutdown", .timeLimit(.minutes(2)))
struct DrainedShutdownTests {
    @Test func finishAndDrainReturnsOnlyOnceASlowSubscriberReadEverythingAndTheEnd() async throws {
        let clock = ManualClock()
        let room = AsyncPassthroughSubject<Int, Never>(clock: clock)
        let reader = PacedReader(room.subscribe())
        for message in 1...3 { room.send(message) }
        let shutdown = Watched { await room.finish(drainingWithin: .seconds(60)) }
        await clock.waitForSleepers(count: 1)  // the deadline's timer: the wait has begun

        // Its first read took all three (a batch): handed over, but not read to the end.
        for expected in 1...3 {
            #expect(await reader.read() == .some(expected))
            #expect(!shutdown.returned.isSet, "returned before the reader read \(expected)")
        }
        #expect(room.subscriberCount == 1)
        #expect(await reader.read() == .some(nil))  // the end: it leaves

        #expect(await shutdown.task.value == true)
        #expect(await reader.task.value == [1, 2, 3])
        #expect(room.subscriberCount == 0)
    }

    @Test func drainReturnsFalseAtTheDeadlineWhenASubscriberStalls() async throws {
        let clock = ManualClock()
        let room = AsyncReplaySubject<String, Never>(replay: 0, clock: clock)
        let stalled = room.subscribe()  // never read
        let reader = PacedReader(room.subscribe())
        room.send("a")
        let shutdown = Watched { await room.finish(drainingWithin: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        #expect(await reader.read() == .some("a"))
        #expect(await reader.read() == .some(nil))

        clock.advance(by: .seconds(4))
        await letOthersRun()
        #expect(!shutdown.returned.isSet, "returned before its deadline")
        clock.advance(by: .seconds(1))
        #expect(await shutdown.task.value == false)
        #expect(room.subscriberCount == 1, "the stalled subscriber is still there")
        withExtendedLifetime(stalled) {}
    }

    @Test func aSubscriberHandedEverythingThatDoesNotAskAgainIsNotDrained() async throws {
        let clock = ManualClock()
        let room = AsyncPassthroughSubject<Int, Never>(clock: clock)
        var client = room.makeAsyncIterator()
        for message in 1...3 { room.send(message) }
        #expect(await client.next() == 1)  // took 2 and 3 with it: nothing is left in the subject
        let shutdown = Task { await room.finish(drainingWithin: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        #expect(await shutdown.value == false)

        #expect(await client.next() == 2)
        #expect(await client.next() == 3)
        #expect(await client.next() == nil)
        #expect(await room.waitUntilDrained(within: .zero), "read to the end: drained, checked at once")
    }

    @Test func cancellingTheCallerEndsTheWaitAtOnceWithTheSubjectFinished() async throws {
        let clock = ManualClock()
        let room = AsyncPassthroughSubject<Int, Never>(clock: clock)
        let stalled = room.subscribe()
        room.send(1)
        let shutdown = Task { await room.finish(drainingWithin: .seconds(3600)) }
        await clock.waitForSleepers(count: 1)
        shutdown.cancel()
        #expect(await shutdown.value == false)

        // Finished all the same: a new subscriber gets the end; the stalled one still gets 1.
        var late = room.makeAsyncIterator()
        #expect(await late.next() == nil)
        var held = stalled.makeAsyncIterator()
        #expect(await held.next() == 1)
        #expect(await held.next() == nil)
    }

    @Test func aTaskCancelledBeforeItWaitsReturnsFalseAtOnce() async throws {
        let room = AsyncPassthroughSubject<Int, Never>(clock: ManualClock())
        let stalled = room.subscribe()
        let shutdown = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await room.finish(drainingWithin: .seconds(3600))
        }
        #expect(await shutdown.value == false)
        #expect(room.subscriberCount == 1)
        withExtendedLifetime(stalled) {}
    }

    @Test func aSubscriberJoiningAfterTheFinishDelaysTheDrainOnlyUntilItReadTheEnd() async throws {
        let clock = ManualClock()
        let room = AsyncReplaySubject<String, Never>(replay: 2, clock: clock)
        room.send("a")
        room.send("b")
        #expect(await room.finish(drainingWithin: .seconds(5)), "nobody subscribed: drained at once")

        let late = PacedReader(room.subscribe())  // replayed a and b, then the end
        let waiting = Watched { await room.waitUntilDrained(within: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        #expect(await late.read() == .some("a"))
        #expect(await late.read() == .some("b"))
        #expect(!waiting.returned.isSet, "returned while a late subscriber held replayed elements")
        #expect(await late.read() == .some(nil))
        #expect(await waiting.task.value == true)
    }

    @Test func waitingBeforeTheEndWaitsForTheEndToo() async throws {
        let clock = ManualClock()
        let room = AsyncCurrentValueSubject<Int, Never>(0, clock: clock)
        let reader = PacedReader(room.subscribe())
        let waiting = Watched { await room.waitUntilDrained(within: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        #expect(await reader.read() == .some(0))
        room.value = 1
        #expect(await reader.read() == .some(1))
        #expect(!waiting.returned.isSet, "returned before the subject ended")
        room.finish()
        #expect(await reader.read() == .some(nil))
        #expect(await waiting.task.value == true)
    }

    @Test func aFailedSubjectDrainsLikeAFinishedOne() async throws {
        struct Closed: Error {}
        let room = AsyncPassthroughSubject<Int, any Error>(clock: ManualClock())
        let client = room.subscribe()
        room.send(7)
        room.fail(Closed())
        let reading = Task { () -> [Int] in
            var received: [Int] = []
            do { for try await message in client { received.append(message) } } catch {}
            return received
        }
        #expect(await room.finish(drainingWithin: .seconds(3600)), "already failed: it only waits")
        #expect(await reading.value == [7])
    }

    @Test func aDrainWaitsForEveryWaiter() async throws {
        let clock = ManualClock()
        let room = AsyncPassthroughSubject<Int, Never>(clock: clock)
        let reader = PacedReader(room.subscribe())
        let first = Watched { await room.waitUntilDrained(within: .seconds(5)) }
        let second = Watched { await room.waitUntilDrained(within: .seconds(10)) }
        await clock.waitForSleepers(count: 2)
        room.finish()
        #expect(!first.returned.isSet && !second.returned.isSet)
        #expect(await reader.read() == .some(nil))
        #expect(await first.task.value == true)
        #expect(await second.task.value == true)
    }
}
