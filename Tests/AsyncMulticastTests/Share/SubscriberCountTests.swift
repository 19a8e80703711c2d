// Observing the subscriber count: `subscriberCounts` (the current count first, then each new
// count; a slow observer skips to the latest; it ends when its task is cancelled) and
// `waitForSubscribers(atLeast:)` (returns at once when satisfied, waits otherwise, throws
// `CancellationError` when cancelled), on every face.

import Testing

@testable import AsyncMulticast

extension AsyncSubscriberCounts.Iterator {
    /// Whether a count is waiting to be read. Counts are offered synchronously by the call
    /// that changed them, so after that call returns, `false` means no change was announced.
    fileprivate var hasCountReady: Bool {
        self.observation.cell.state.withLock { $0.latest.version > $0.delivered }
    }
}

/// One face under test: its storage, how to subscribe to it, and how to observe its count.
private struct CountedFace: Sendable, CustomStringConvertible {
    let name: String
    let storage: MulticastStorage<Int, Never>
    let subscribe: @Sendable () -> SharedIterator<Int, Never>
    let subscriberCounts: @Sendable () -> AsyncSubscriberCounts
    let waitForSubscribers: @Sendable (Int) async throws(CancellationError) -> Void

    var description: String { self.name }

    /// `face`, subscribed to through `subscribe` if given, else through `face` itself.
    init<Face: AsyncSubscribableSequence<Int, Never>>(
        _ name: String, _ face: Face, subscribe: (@Sendable () -> SharedIterator<Int, Never>)? = nil
    ) {
        self.name = name
        self.storage = face.storage
        self.subscribe = subscribe ?? { face.makeAsyncIterator() }
        self.subscriberCounts = { face.subscriberCounts }
        self.waitForSubscribers = { n throws(CancellationError) in try await face.waitForSubscribers(atLeast: n) }
    }
}

@Suite("Subscriber counts: subscriberCounts and waitForSubscribers(atLeast:)", .timeLimit(.minutes(2)))
struct SubscriberCountTests {
    enum Face: String, NamedTestCase {
        case passthroughSubject, currentValueSubject, replaySubject, share, replay, multicast, sharedSource, view
    }

    private func make(_ face: Face) -> CountedFace {
        switch face {
        case .passthroughSubject: return CountedFace("\(face)", AsyncPassthroughSubject<Int, Never>())
        case .currentValueSubject: return CountedFace("\(face)", AsyncCurrentValueSubject<Int, Never>(0))
        case .replaySubject: return CountedFace("\(face)", AsyncReplaySubject<Int, Never>(replay: 2))
        case .share: return CountedFace("\(face)", Counter().share())
        case .replay: return CountedFace("\(face)", Counter().replay(1))
        case .multicast: return CountedFace("\(face)", Counter().multicast())
        case .sharedSource: return CountedFace("\(face)", AsyncSharedSource<Int, Never> { _ in {} })
        case .view:
            // A view counts every subscriber of the underlying subject, whatever their policy.
            let subject = AsyncPassthroughSubject<Int, Never>()
            return CountedFace(
                "\(face)", subject.buffering(.bufferingNewest(1)), subscribe: { subject.makeAsyncIterator() })
        }
    }

    // MARK: subscriberCounts

    @Test("every face: the current count first, then each join and leave", arguments: Face.allCases)
    func currentCountThenChanges(_ face: Face) async throws {
        try await withTimeout {
            let face = self.make(face)
            let a = face.subscribe()
            let b = face.subscribe()
            var counts = face.subscriberCounts().makeAsyncIterator()
            #expect(await counts.next() == 2, "the current count first")
            #expect(!counts.hasCountReady)
            var c: SharedIterator<Int, Never>? = face.subscribe()
            #expect(await counts.next() == 3)
            c = nil
            #expect(await counts.next() == 2)
            #expect(!counts.hasCountReady)
            // waitForSubscribers is satisfied by the subscribers already there: it returns
            // without anyone joining (otherwise this would hang).
            try await face.waitForSubscribers(2)
            withExtendedLifetime((a, b, c)) {}
        }
    }

    @Test("a slow observer skips to the latest count")
    func slowObserverConflates() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var counts = subject.subscriberCounts.makeAsyncIterator()
            #expect(await counts.next() == 0)
            var joined: [SharedIterator<Int, Never>] = []
            for _ in 0..<5 { joined.append(subject.makeAsyncIterator()) }
            joined.removeLast(2)
            #expect(await counts.next() == 3, "1, 2, 3, 4, 5, 4 and 3 happened: only the latest is read")
            #expect(!counts.hasCountReady)
            joined.append(subject.makeAsyncIterator())
            #expect(await counts.next() == 4)
            withExtendedLifetime(joined) {}
        }
    }

    /// `AsyncSubscriberCounts.Iterator.next()` is documented to return "the next count that
    /// differs from the last one returned" (like a `StateFlow`, which never repeats a value).
    @Test(
        "a change and back while nobody reads is not announced: next() waits for a count that differs from the last one"
    )
    func changeAndBackIsNotAnnounced() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var counts = subject.subscriberCounts.makeAsyncIterator()
        #expect(await counts.next() == 0)
        do {
            let passing = subject.makeAsyncIterator()  // 1, then 0 again, while nobody reads
            withExtendedLifetime(passing) {}
        }
        let cell = counts.observation.cell
        let returned = LockedFlag()
        let observer = Task { [counts] in
            var counts = counts
            let count = await counts.next()
            returned.set()
            return count
        }
        // Either it returned at once (a repeated 0), or it waits for the next change.
        try await waitUntil("the observer returning or waiting") {
            returned.isSet || cell.state.withLock { $0.waiting != nil }
        }
        let staying = subject.makeAsyncIterator()
        let count = try await withTimeout("the observer") { await observer.value }
        #expect(count == 1, "the next count that differs from 0, the last one returned")
        withExtendedLifetime(staying) {}
    }

    @Test(
        "a subscriber's cancellation, its end, and its eviction change the count; noticing the eviction does not"
    )
    func whatChangesTheCount() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        var counts = subject.subscriberCounts.makeAsyncIterator()
        #expect(await counts.next() == 0)

        // Cancelling a waiting subscriber's task.
        let cancelled = await SubscriberTask.join { subject.makeAsyncIterator() }
        #expect(await counts.next() == 1)
        cancelled.request()
        try await waitUntil("the subscriber waits") { subject.storage.waitingCount == 1 }
        await cancelled.cancel()
        #expect(await counts.next() == 0)

        // Eviction: the count drops at the eviction, not when the subscriber notices.
        var stalled = subject.events().makeAsyncIterator()
        #expect(await counts.next() == 1)
        subject.send(1)
        subject.send(2)
        #expect(subject.storage.evictedCount(.evicting(1)) == 1)
        #expect(await counts.next() == 0, "being evicted is leaving, for the count")
        #expect(await stalled.next() == .evicted(.hardLimit(1)))
        #expect(!counts.hasCountReady, "noticing the eviction changes the count no more")

        // Reaching the end.
        var last = subject.makeAsyncIterator()
        #expect(await counts.next() == 1)
        subject.finish()
        #expect(await last.next() == nil)
        #expect(await counts.next() == 0)
    }

    @Test("cancelling the observing task ends its iteration, and the observer is unregistered")
    func cancellingTheObserverEndsIt() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let seen = Signal<Int>()
        let observer = Task { () -> [Int] in
            var all: [Int] = []
            for await count in subject.subscriberCounts {
                all.append(count)
                seen.send(count)
            }
            return all
        }
        #expect(await seen.next() == 0)
        let a = subject.makeAsyncIterator()
        #expect(await seen.next() == 1)
        #expect(subject.storage.countObserverCount == 1)
        observer.cancel()
        let all = try await withTimeout("the observer ending") { await observer.value }
        #expect(all == [0, 1])
        #expect(subject.storage.countObserverCount == 0)
        withExtendedLifetime(a) {}
    }

    @Test("releasing an observer that never read unregisters it")
    func releasingTheObserver() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        do {
            let counts = subject.subscriberCounts.makeAsyncIterator()
            #expect(subject.storage.countObserverCount == 1)
            withExtendedLifetime(counts) {}
        }
        #expect(subject.storage.countObserverCount == 0)
    }

    @Test("several observers each see the current count first and then the same changes")
    func severalObservers() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>()
            let a = subject.makeAsyncIterator()
            var first = subject.subscriberCounts.makeAsyncIterator()
            var second = subject.subscriberCounts.makeAsyncIterator()
            #expect(await first.next() == 1)
            #expect(await second.next() == 1)
            let b = subject.makeAsyncIterator()
            #expect(await first.next() == 2)
            #expect(await second.next() == 2)
            withExtendedLifetime((a, b)) {}
        }
    }

    // MARK: waitForSubscribers(atLeast:)

    @Test("waitForSubscribers waits until the count is reached, not before")
    func waitsUntilReached() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let returned = LockedFlag()
        let waiter = Task { () async throws -> Void in
            try await subject.waitForSubscribers(atLeast: 2)
            returned.set()
        }
        try await waitUntil("the waiter observing") { subject.storage.countObserverCount == 1 }
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        await letOthersRun()
        #expect(!returned.isSet, "one subscriber is not two")
        let b = await SubscriberTask.join { subject.makeAsyncIterator() }
        try await withTimeout("the waiter returning") { try await waiter.value }
        #expect(returned.isSet)
        #expect(subject.storage.countObserverCount == 0, "the waiter stopped observing")
        // Subscribers that joined, then the send the waiter was for: both receive it.
        subject.send(1)
        #expect(await a.next() == 1)
        #expect(await b.next() == 1)
        await leaveAll(a, b)
    }

    @Test("waitForSubscribers throws CancellationError when its task is cancelled while waiting")
    func cancelledWhileWaiting() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let waiter = Task { () async throws -> Void in
            try await subject.waitForSubscribers(atLeast: 1)
        }
        try await waitUntil("the waiter observing") { subject.storage.countObserverCount == 1 }
        waiter.cancel()
        let result = try await withTimeout("the waiter ending") { await waiter.result }
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(subject.storage.countObserverCount == 0)
        #expect(subject.subscriberCount == 0)
    }

    @Test("waitForSubscribers in an already cancelled task: returns if satisfied, throws otherwise")
    func alreadyCancelled() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let a = subject.makeAsyncIterator()
        let gate = Latch()
        let waiter = Task { () -> (satisfied: Bool, unsatisfied: Bool) in
            await gate.wait()  // ignores cancellation: the task is cancelled by now
            var satisfied = true
            var unsatisfied = true
            do throws(CancellationError) { try await subject.waitForSubscribers(atLeast: 1) } catch {
                satisfied = false
            }
            do throws(CancellationError) { try await subject.waitForSubscribers(atLeast: 2) } catch {
                unsatisfied = false
            }
            return (satisfied, unsatisfied)
        }
        waiter.cancel()
        gate.release()
        let outcome = try await withTimeout("the cancelled waiter") { await waiter.value }
        #expect(outcome.satisfied, "one subscriber is there: it returns")
        #expect(!outcome.unsatisfied, "two will never come in a cancelled task: it throws")
        #expect(subject.storage.countObserverCount == 0)
        withExtendedLifetime(a) {}
    }

    @Test("a producer starts once its subscribers joined, with no polling: every subscriber sees the first element")
    func startsTogether() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let subscribers = (0..<10).map { _ in
            Task { () -> [Int] in
                var received: [Int] = []
                for await value in subject { received.append(value) }
                return received
            }
        }
        try await withTimeout("ten subscribers joining") { try await subject.waitForSubscribers(atLeast: 10) }
        for value in 0..<5 { subject.send(value) }
        subject.finish()
        for subscriber in subscribers {
            #expect(await subscriber.value == Array(0..<5))
        }
    }
}
