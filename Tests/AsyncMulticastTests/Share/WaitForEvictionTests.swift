// A subscription's eviction, seen by a task that is not reading (`waitForEviction()`), and
// its backlog read from another task: real tasks, the order set by gates (a watcher counts
// as waiting once the storage holds it).

import Testing

@testable import AsyncMulticast

@Suite("waitForEviction() and backlog", .timeLimit(.minutes(2)))
struct WaitForEvictionTests {
    @Test("a hard-limit eviction of a subscriber that never reads wakes every watcher with true")
    func hardEvictionWakesEveryWatcher() async throws {
        let (subject, (stalled, watchers), (healthy, healthyWatchers)) =
            try await evictingSubjectWithTwoWatchedSubscriptions(limit: 8, watchers: (3, 1))
        for n in 1...8 { subject.send(n) }
        #expect(subject.storage.evictionWatcherCount == 4, "at the limit, nobody is evicted")
        var reader = healthy.makeAsyncIterator()
        for n in 1...8 { #expect(await reader.next() == n) }
        subject.send(9)  // the 9th unread element: the stalled subscriber goes
        for watcher in watchers { #expect(await watcher.value) }
        #expect(stalled.backlog == nil)
        #expect(subject.subscriberCount == 1, "an evicted subscriber stops counting when it is evicted")
        #expect(await stalled.waitForEviction() != nil, "a late watcher learns it at once")
        #expect(await reader.next() == 9, "the healthy subscriber lost nothing")
        subject.finish()
        #expect(await reader.next() == nil)
        #expect(await healthyWatchers[0].value == false, "it ended without being evicted")
        #expect(subject.storage.evictionWatcherCount == 0)
    }

    @Test("a soft-limit eviction, timed on share()'s clock, wakes a watcher with true; a burst within it does not")
    func softEvictionOnTheClock() async throws {
        let clock = ManualClock()
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let shared = stream.share(buffering: .evicting(100, softLimit: .above(4, for: .seconds(10))), clock: clock)
        let subscription = shared.subscribe()
        let watcher = try await startWatchers(1, of: subscription, storage: shared.storage)[0]
        // A reader that keeps up starts the upstream (share() pulls it on demand). Unbounded,
        // so that a reader whose task is slow to run is never soft-evicted itself.
        let reader = Task {
            var received: [Int] = []
            for await n in shared.buffering(.unbounded) { received.append(n) }
            return received
        }
        // Pushed by the upstream task: wait until the subscriber holds them (a gate on the backlog).
        for n in 1...50 { feed.yield(n) }
        try await waitUntil("a burst of 50 held") { subscription.backlog?.count == 50 }
        clock.advance(by: .seconds(9))
        feed.yield(51)
        try await waitUntil("51 held") { subscription.backlog?.count == 51 }
        #expect(subscription.backlog?.highWaterMark == 51)
        #expect(shared.storage.evictionWatcherCount == 1, "behind for 9 s of 10: still waited for")
        clock.advance(by: .seconds(1))
        feed.yield(52)
        #expect(await watcher.value, "behind for 10 s: evicted")
        #expect(subscription.backlog == nil)
        feed.finish()
        #expect(await reader.value == Array(1...52), "the reader lost nothing")
    }

    @Test("a subscriber that leaves otherwise (its task cancelled, its iteration ended) wakes its watchers with false")
    func leavingOtherwiseWakesWithFalse() async throws {
        let (subject, (cancelled, cancelledWatchers), (ended, endedWatchers)) =
            try await evictingSubjectWithTwoWatchedSubscriptions(limit: 8)

        let reading = Signal<Void>()
        let reader = Task {
            var iterator = cancelled.makeAsyncIterator()
            reading.send(())
            return await iterator.next()
        }
        _ = await reading.next("the reader took the subscriber")
        try await waitUntil("the reader waits") { subject.storage.waitingCount == 1 }
        reader.cancel()
        #expect(await reader.value == nil)
        #expect(await cancelledWatchers[0].value == false)

        subject.send(1)
        subject.finish()
        var iterator = ended.makeAsyncIterator()
        #expect(await iterator.next() == 1)
        #expect(await iterator.next() == nil)
        #expect(await endedWatchers[0].value == false)
        #expect(subject.subscriberCount == 0)
    }

    @Test("a cancelled watcher returns false at once; the subscriber and the other watchers stay")
    func cancelledWatcherReturnsFalse() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))
        let subscription = subject.subscribe()
        let watchers = try await startWatchers(2, of: subscription, storage: subject.storage)
        watchers[0].cancel()
        #expect(await watchers[0].value == false)
        #expect(subject.storage.evictionWatcherCount == 1)
        #expect(subject.subscriberCount == 1)
        for n in 1...3 { subject.send(n) }
        #expect(await watchers[1].value)

        let alreadyCancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await subscription.waitForEviction() != nil
        }
        #expect(await alreadyCancelled.value == false, "a task cancelled before it waits does not wait")
    }

    @Test("a subscriber evicted before anyone waits: waiting returns true at once, also after its iteration learned it")
    func alreadyEvicted() async throws {
        let subject = AsyncPassthroughSubject<Int, any Error>(buffering: .evicting(1))
        let subscription = subject.subscribe()
        subject.send(1)
        subject.send(2)
        #expect(await subscription.waitForEviction() != nil)
        #expect(await subscription.waitForEviction() != nil, "as often as asked")
        var iterator = subscription.makeAsyncIterator()
        await #expect(throws: SubscriberEvictedError.self) { try await iterator.next() }
        #expect(await subscription.waitForEviction() != nil, "it has left, by its eviction: still true")
    }

    @Test(
        "an iteration that learned its eviction (events, or a Never sequence's nil) leaves true behind for late watchers"
    )
    func evictionLearntByTheIterationIsRemembered() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let byEvents = subject.subscribe()
        let byElements = subject.subscribe()
        var events = byEvents.events.makeAsyncIterator()
        var elements = byElements.makeAsyncIterator()
        subject.send(1)
        subject.send(2)
        #expect(await events.next() == .evicted(.hardLimit(1)))
        #expect(await events.next() == nil)
        #expect(await elements.next() == nil, "a Never sequence's eviction ends as nil")
        #expect(subject.subscriberCount == 0, "both evicted subscribers left")
        #expect(await byEvents.waitForEviction() != nil)
        #expect(await byElements.waitForEviction() != nil)
        let ended = subject.subscribe()
        subject.send(3)
        subject.finish()
        var rest = ended.makeAsyncIterator()
        while await rest.next() != nil {}
        #expect(await ended.waitForEviction() == nil, "it left at the end, not evicted")
    }

    @Test("under a policy that never evicts, watchers wait until the subscriber leaves")
    func policiesThatNeverEvict() async throws {
        for policy in [SharedBufferingPolicy.unbounded, .bufferingNewest(1), .bufferingOldest(1), .bounded(1)] {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let subscription = subject.subscribe()
            let watcher = try await startWatchers(1, of: subscription, storage: subject.storage)[0]
            for n in 1...5 { subject.send(n) }
            #expect(subject.storage.evictionWatcherCount == 1, "\(policy)")
            subject.finish()
            var iterator = subscription.makeAsyncIterator()
            while await iterator.next() != nil {}
            #expect(await watcher.value == false, "\(policy)")
        }
    }

    @Test("a never-iterated subscription released while nobody waits leaves; while a task waits, it stays")
    func watchingKeepsTheSubscription() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(4))
        var subscription: SharedSubscription<Int, Never>? = subject.subscribe()
        let watcher = try await startWatchers(1, of: subscription!, storage: subject.storage)[0]
        subscription = nil
        #expect(subject.subscriberCount == 1, "the waiting task holds a copy")
        watcher.cancel()
        #expect(await watcher.value == false)
        try await waitUntil("the last copy released") { subject.subscriberCount == 0 }
    }

    @Test("the backlog read from another task while the subscription is iterated")
    func backlogFromAnotherTask() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1000))
        let subscription = subject.subscribe()
        let tookFirst = Signal<Void>()
        let resume = Latch()
        let reader = Task {
            var received: [Int] = []
            for await n in subscription {
                received.append(n)
                if n == 1 {
                    tookFirst.send(())
                    await resume.wait()
                }
            }
            return received
        }
        subject.send(1)
        _ = await tookFirst.next("the reader took 1")
        for n in 2...101 { subject.send(n) }
        let sampled = await Task.detached { subscription.backlog }.value
        #expect(sampled == SubscriberBacklog(count: 100, highWaterMark: 100))
        resume.release()
        subject.finish()
        #expect(await reader.value == Array(1...101))
        #expect(subscription.backlog == nil, "it has left")
    }

    @Test("a replaying subscriber's greeting is not held; what is sent after it joined is")
    func greetingIsNotHeld() async throws {
        let subject = AsyncReplaySubject<Int, Never>(replay: 5, buffering: .evicting(3))
        for n in 1...5 { subject.send(n) }
        let subscription = subject.subscribe()
        #expect(subscription.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
        subject.send(6)
        subject.send(7)
        #expect(subscription.backlog == SubscriberBacklog(count: 2, highWaterMark: 2))
        var iterator = subscription.makeAsyncIterator()
        for n in 1...7 { #expect(await iterator.next() == n) }
        #expect(subscription.backlog == SubscriberBacklog(count: 0, highWaterMark: 2))
    }
}

@Suite("waitForEviction(): only the evicted", .timeLimit(.minutes(2)))
struct EvictionWatcherTargetTests {
    @Test("a reader waiting in next() is not evicted with the subscriber that stalls beside it")
    func waitingReaderIsNotTakenForEvicted() async throws {
        for iteration in 0..<20 {
            let (subject, (reader, readerWatchers), (_, stalledWatchers)) =
                try await evictingSubjectWithTwoWatchedSubscriptions(limit: 4)
            let received = Signal<Int>()
            let readerTask = Task {
                var got: [Int] = []
                for await n in reader {
                    got.append(n)
                    received.send(n)
                }
                return got
            }
            for n in 1...5 {
                // The reader waits in next() when each element arrives: handed over at once.
                try await waitUntil("the reader waits (\(iteration), \(n))") { subject.storage.waitingCount == 1 }
                subject.send(n)
                #expect(await received.next("the reader got \(n)") == n)
            }
            #expect(await stalledWatchers[0].value, "the 5th element evicted the stalled subscriber")
            #expect(reader.backlog != nil)
            subject.finish()
            #expect(await readerTask.value == [1, 2, 3, 4, 5])
            #expect(await readerWatchers[0].value == false, "the reader was never evicted")
        }
    }
}
