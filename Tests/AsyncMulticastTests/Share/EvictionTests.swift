// The `.evicting(n)` policy, with real tasks: a subscriber that stops reading is evicted once
// it holds `n` unconsumed elements and another arrives, without pausing the upstream or
// losing anything for the subscribers that keep up; its buffer is released at once, and it
// learns that it was evicted the next time it asks (`.evicted` from `events`,
// `SubscriberEvictedError` when the `Failure` can hold it, `nil` otherwise).

import Testing

@testable import AsyncMulticast

/// One face under test, fed by the test: a subject's `send`, or the upstream of a `share()`.
private struct EvictionFace<Failure: Error>: Sendable {
    let storage: MulticastStorage<Int, Failure>
    let subscribe: @Sendable () -> SharedIterator<Int, Failure>
    let subscribeEvents: @Sendable () -> SharedEventIterator<Int, Failure>
    let feed: @Sendable (Int) -> Void
    let finish: @Sendable () -> Void
}

extension EvictionFace {
    init(subject: AsyncPassthroughSubject<Int, Failure>) {
        self.init(
            storage: subject.storage,
            subscribe: { subject.makeAsyncIterator() },
            subscribeEvents: { subject.events().makeAsyncIterator() },
            feed: { subject.send($0) },
            finish: { subject.finish() })
    }

    init(
        shared: AsyncShareSequence<Int, Failure>, feed: @escaping @Sendable (Int) -> Void,
        finish: @escaping @Sendable () -> Void
    ) {
        self.init(
            storage: shared.storage,
            subscribe: { shared.makeAsyncIterator() },
            subscribeEvents: { shared.events().makeAsyncIterator() },
            feed: feed,
            finish: finish)
    }
}

@Suite("Eviction: .evicting(n)", .timeLimit(.minutes(2)))
struct EvictionTests {
    /// How the stalled subscriber of a run iterates, and so how it must learn of its eviction.
    enum StalledSubscriber: Sendable, CustomStringConvertible {
        /// `events()`: `.evicted`, then `nil`.
        case events
        /// A plain iteration that can throw `SubscriberEvictedError` (`Failure` is `any Error`).
        case throwing
        /// A plain iteration whose `Failure` cannot hold it: `nil`, as at the end.
        case returningNil

        var description: String {
            switch self {
            case .events: return "events() sees .evicted"
            case .throwing: return "plain iteration throws SubscriberEvictedError"
            case .returningNil: return "plain iteration returns nil"
            }
        }
    }

    /// The configurations of the many-readers test: a face and a kind of stalled subscriber.
    enum StalledAmongReadersCase: Sendable, CaseIterable, CustomStringConvertible {
        case subjectNeverEvents
        case subjectNeverPlain
        case subjectTypedErrorPlain
        case subjectAnyErrorPlain
        case shareStreamEvents
        case shareThrowingStreamPlain

        var description: String {
            switch self {
            case .subjectNeverEvents: return "AsyncPassthroughSubject<Int, Never>, events()"
            case .subjectNeverPlain: return "AsyncPassthroughSubject<Int, Never>, plain iteration"
            case .subjectTypedErrorPlain: return "AsyncPassthroughSubject<Int, TestError>, plain iteration"
            case .subjectAnyErrorPlain: return "AsyncPassthroughSubject<Int, any Error>, plain iteration"
            case .shareStreamEvents: return "AsyncStream.share(buffering:), events()"
            case .shareThrowingStreamPlain: return "AsyncThrowingStream.share(buffering:), plain iteration"
            }
        }
    }

    static let limit = 16
    static let policy = SharedBufferingPolicy.evicting(limit)

    // MARK: One stalled subscriber among many readers

    @Test(
        "a subscriber that never reads, among 100 readers: they lose nothing, it holds at most n, then learns it was evicted",
        arguments: StalledAmongReadersCase.allCases)
    func stalledAmongReaders(_ configuration: StalledAmongReadersCase) async throws {
        switch configuration {
        case .subjectNeverEvents:
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.policy)
            try await self.runStalledAmongReaders(EvictionFace(subject: subject), stalled: .events)
        case .subjectNeverPlain:
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: Self.policy)
            try await self.runStalledAmongReaders(EvictionFace(subject: subject), stalled: .returningNil)
        case .subjectTypedErrorPlain:
            let subject = AsyncPassthroughSubject<Int, TestError>(buffering: Self.policy)
            try await self.runStalledAmongReaders(EvictionFace(subject: subject), stalled: .returningNil)
        case .subjectAnyErrorPlain:
            let subject = AsyncPassthroughSubject<Int, any Error>(buffering: Self.policy)
            try await self.runStalledAmongReaders(EvictionFace(subject: subject), stalled: .throwing)
        case .shareStreamEvents:
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share(buffering: Self.policy)
            let face = EvictionFace(shared: shared, feed: { input.yield($0) }, finish: { input.finish() })
            try await self.runStalledAmongReaders(face, stalled: .events)
        case .shareThrowingStreamPlain:
            let (stream, input) = AsyncThrowingStream.makeStream(of: Int.self)
            let shared = stream.share(buffering: Self.policy)
            let face = EvictionFace(shared: shared, feed: { input.yield($0) }, finish: { input.finish() })
            try await self.runStalledAmongReaders(face, stalled: .throwing)
        }
    }

    /// 100 readers and one subscriber that never reads. Elements arrive in bursts of `n / 2`
    /// (so a reader, caught up before each burst, never holds `n`); after each burst the test
    /// waits until every reader received it, then looks into the storage. The upstream (or
    /// the subject) never waits, and the stalled subscriber holds everything sent until it
    /// holds `n`; the next element evicts it, which releases its buffer.
    private func runStalledAmongReaders<Failure: Error>(
        _ face: EvictionFace<Failure>, stalled kind: StalledSubscriber
    ) async throws {
        let readerCount = 100
        let burst = Self.limit / 2
        let bursts = 5
        let joined = Tally()
        let received = Tally()

        // Joins before any reader, and never reads until the end.
        var stalledEvents: SharedEventIterator<Int, Failure>?
        var stalledPlain: SharedIterator<Int, Failure>?
        let stalledID: SubscriberID
        if case .events = kind {
            stalledEvents = face.subscribeEvents()
            stalledID = stalledEvents!.subscription.id
        } else {
            stalledPlain = face.subscribe()
            stalledID = stalledPlain!.subscription.id
        }

        let readers = (0..<readerCount).map { _ in
            Task { () -> Result<[Int], Failure> in
                var iterator = face.subscribe()
                joined.add()
                var values: [Int] = []
                do throws(Failure) {
                    while let value = try await iterator.next() {
                        values.append(value)
                        received.add()
                    }
                } catch {
                    return .failure(error)
                }
                return .success(values)
            }
        }
        await joined.wait(for: readerCount, "readers joining")

        var sent = 0
        for _ in 0..<bursts {
            for _ in 0..<burst {
                face.feed(sent)
                sent += 1
            }
            await received.wait(for: readerCount * sent, "every reader receiving \(sent) elements")
            #expect(face.storage.producersWaitingForRoom == 0, "nothing ever waits for the stalled subscriber")
            #expect(face.storage.invariantViolation == nil)
            if sent <= Self.limit {
                // Not evicted yet: it holds everything sent so far, which is all the buffer holds.
                #expect(face.storage.undelivered(stalledID) == Array(0..<sent))
                #expect(face.storage.bufferedCount == sent)
                #expect(face.storage.evictedCount(Self.policy) == 0)
            } else {
                // Evicted by the element that would have been its (n + 1)-th: its buffer is gone.
                #expect(face.storage.undelivered(stalledID).isEmpty)
                #expect(face.storage.bufferedCount == 0, "the evicted subscriber's buffer is released")
                #expect(face.storage.evictedCount(Self.policy) == 1)
                #expect(face.storage.subscriberCount == readerCount, "it stopped counting when it was evicted")
            }
        }

        // The stalled subscriber now asks, and learns it was evicted.
        switch kind {
        case .events:
            do throws(Failure) {
                let first = try await stalledEvents!.next()
                let second = try await stalledEvents!.next()
                #expect(first == .evicted(.hardLimit(Self.limit)))
                #expect(second == nil, ".evicted is the last event")
            } catch {
                Issue.record("an evicted events() subscriber threw \(error)")
            }
        case .throwing, .returningNil:
            do throws(Failure) {
                let value = try await stalledPlain!.next()
                #expect(value == nil)
                #expect(kind == .returningNil, "with Failure \(Failure.self) eviction should throw, not return nil")
            } catch {
                #expect(
                    kind == .throwing, "with Failure \(Failure.self) eviction should return nil, not throw \(error)")
                #expect(
                    (error as? SubscriberEvictedError)?.eviction == .hardLimit(Self.limit), "threw \(error)")
            }
        }
        #expect(face.storage.subscriberCount == readerCount, "noticing the eviction leaves")
        #expect(face.storage.evictedCount(Self.policy) == 0)

        face.finish()
        for reader in readers {
            switch await reader.value {
            case .success(let values):
                #expect(values == Array(0..<sent), "a reader that keeps up loses nothing")
            case .failure(let error):
                Issue.record("a reader failed with \(error)")
            }
        }
        #expect(face.storage.subscriberCount == 0)
        #expect(face.storage.invariantViolation == nil)
    }

    // MARK: What counts towards the limit

    @Test("elements the iterator already took do not count; it returns them, then .evicted")
    func takenElementsDoNotCount() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(4))
            var client = subject.events().makeAsyncIterator()
            let id = client.subscription.id
            for n in 1...3 { subject.send(n) }
            // Reading one takes the ready ones too (up to min(4 / 2, 64) = 2 of them).
            #expect(await client.next() == .element(1))
            #expect(subject.storage.undelivered(id).isEmpty, "2 and 3 are the iterator's now")
            for n in 4...7 { subject.send(n) }
            #expect(subject.storage.undelivered(id) == [4, 5, 6, 7], "holding 4 is allowed")
            #expect(subject.storage.evictedCount(.evicting(4)) == 0)
            subject.send(8)
            #expect(subject.storage.evictedCount(.evicting(4)) == 1, "holding 4 when another arrives is not")
            #expect(subject.storage.bufferedCount == 0)

            let events = await client.readAll()
            #expect(events == [.element(2), .element(3), .evicted(.hardLimit(4))])
            #expect(subject.subscriberCount == 0)
        }
    }

    @Test("a subscriber waiting in next() holds nothing: what arrives then never counts towards the limit")
    func waitingSubscriberIsNotEvicted() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        let waiting = await SubscriberTask.join { subject.makeAsyncIterator() }
        waiting.request()
        try await waitUntil("the subscriber waits") { subject.storage.waitingCount == 1 }
        subject.send(1)  // handed to it directly
        subject.send(2)  // it holds 1: allowed
        #expect(await waiting.answer() == 1)
        #expect(await waiting.next() == 2)
        #expect(subject.storage.evictedCount(.evicting(1)) == 0)

        // The same two elements evict a subscriber that is not waiting.
        var idle = subject.events().makeAsyncIterator()
        waiting.request()
        try await waitUntil("the subscriber waits again") { subject.storage.waitingCount == 1 }
        subject.send(3)
        subject.send(4)
        #expect(await idle.next() == .evicted(.hardLimit(1)))
        #expect(await waiting.answer() == 3)
        #expect(await waiting.next() == 4)
        await waiting.leave()
    }

    // MARK: Leaving, ending and other policies alongside

    @Test("an evicted subscriber released before it noticed leaves cleanly")
    func releasedBeforeNoticing() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))
        var reader = subject.buffering(.unbounded).makeAsyncIterator()
        do {
            let stalled = subject.makeAsyncIterator()
            for n in 1...3 { subject.send(n) }
            #expect(subject.storage.evictedCount(.evicting(2)) == 1)
            #expect(subject.subscriberCount == 1, "an evicted subscriber stops counting at once")
            withExtendedLifetime(stalled) {}
        }
        #expect(subject.subscriberCount == 1, "releasing the evicted iterator leaves, counted once")
        #expect(subject.storage.evictedCount(.evicting(2)) == 0)
        #expect(subject.storage.invariantViolation == nil)
        #expect(await reader.next() == 1)
        subject.finish()
        #expect(await reader.next() == 2)
        #expect(await reader.next() == 3)
        #expect(await reader.next() == nil)
    }

    @Test("eviction wins over a later end: an evicted subscriber gets .evicted, not the subject's error")
    func evictionBeforeTheEnd() async {
        let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .evicting(1))
        var events = subject.events().makeAsyncIterator()
        var plain = subject.makeAsyncIterator()
        subject.send(1)
        subject.send(2)
        subject.fail(.boom)
        do throws(TestError) {
            #expect(try await events.next() == .evicted(.hardLimit(1)))
            #expect(try await events.next() == nil)
            // TestError cannot hold SubscriberEvictedError: the plain iteration returns nil.
            #expect(try await plain.next() == nil)
        } catch {
            Issue.record("an evicted subscriber received the subject's error \(error)")
        }
        // A subscriber joining after the end gets the error.
        var late = subject.makeAsyncIterator()
        await #expect(throws: TestError.boom) { try await late.next() }
    }

    @Test(
        "an evicting view does not pace a bounded share: the bounded readers pace the upstream, the stalled view is evicted"
    )
    func evictingViewOnBoundedShare() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let shared = stream.share(buffering: .bounded(4))
        var stalled = shared.buffering(.evicting(3)).events().makeAsyncIterator()
        let reader = await SubscriberTask.join { shared.makeAsyncIterator() }
        for n in 0..<10 { input.yield(n) }
        input.finish()
        let drained = await reader.drain()
        #expect(drained.elements == Array(0..<10), "a .bounded(4) reader paced the upstream; the stalled view did not")
        #expect(await stalled.next() == .evicted(.hardLimit(3)))
        #expect(await stalled.next() == nil)
    }

    @Test("a multicast whose connection is cancelled: an evicted subscriber still ends as evicted")
    func evictedWhenTheConnectionEnds() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(buffering: .evicting(2))
        var stalled = multicast.events().makeAsyncIterator()
        var stalledPlain = multicast.makeAsyncIterator()
        let reader = await SubscriberTask.join { multicast.buffering(.unbounded).makeAsyncIterator() }
        let connection = multicast.connect()
        for n in 1...3 { input.yield(n) }
        #expect(await reader.take(3) == [1, 2, 3])
        #expect(multicast.storage.evictedCount(.evicting(2)) == 2)
        connection.cancel()
        #expect(await stalled.next() == .evicted(.hardLimit(2)))
        #expect(await stalled.next() == nil)
        #expect(await stalledPlain.next() == nil)
        #expect(await reader.next() == nil)
        #expect(multicast.subscriberCount == 0)
    }

    @Test("a subscriber that keeps up under .evicting(1) is never evicted, whatever the number of elements")
    func keepingUpUnderTheSmallestLimit() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(1))
        var client = subject.events().makeAsyncIterator()
        for n in 0..<1_000 {
            subject.send(n)
            #expect(await client.next() == .element(n))
        }
        subject.finish()
        #expect(await client.next() == nil)
    }

    // MARK: Replayed elements are a greeting

    @Test("a greeting as long as the limit does not make a new subscriber evictable by the next element")
    func greetingAsLongAsTheLimit() async {
        let room = AsyncReplaySubject<Int, Never>(replay: 8, buffering: .evicting(8))
        for n in 1...8 { room.send(n) }
        var client = room.events().makeAsyncIterator()
        room.send(9)  // the first element produced after it joined: 1 of its 8
        room.finish()
        let events = await client.readAll()
        #expect(events == (1...9).map { .element($0) })
    }

    @Test("a greeting longer than the limit is replayed whole, with no gap")
    func greetingLongerThanTheLimit() async {
        let room = AsyncReplaySubject<Int, Never>(replay: 20, buffering: .evicting(5))
        for n in 1...20 { room.send(n) }
        var client = room.events().makeAsyncIterator()
        room.finish()
        let events = await client.readAll()
        #expect(events == (1...20).map { .element($0) })
    }

    @Test("a current-value subject under .evicting(1): a new subscriber keeps its current value through the next send")
    func currentValueGreeting() async {
        let state = AsyncCurrentValueSubject<Int, Never>(0, buffering: .evicting(1))
        var client = state.events().makeAsyncIterator()
        state.send(1)
        state.finish()
        let events = await client.readAll()
        #expect(events == [.element(0), .element(1)])
    }

    @Test("only what is produced after it joined can evict a greeted subscriber")
    func greetedSubscriberIsEvictedByWhatFollows() async {
        let state = AsyncCurrentValueSubject<Int, Never>(0, buffering: .evicting(1))
        var keepsUp = state.events().makeAsyncIterator()
        var stalls = state.events().makeAsyncIterator()
        #expect(await keepsUp.next() == .element(0))
        state.send(1)  // keepsUp: 1 held; stalls: its greeting 0, then 1
        #expect(await keepsUp.next() == .element(1))
        state.send(2)  // stalls now holds 1 and 2 that came after it joined: evicted
        #expect(await keepsUp.next() == .element(2))
        #expect(await stalls.next() == .evicted(.hardLimit(1)))
        #expect(await stalls.next() == nil)
        state.finish()
        #expect(await keepsUp.next() == nil)
    }

    @Test("replay(n) with .evicting(m ≤ n): a late subscriber gets the whole replay, then what follows")
    func replayOperatorGreeting() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let recent = stream.replay(4, buffering: .evicting(2))
        let reader = await SubscriberTask.join { recent.buffering(.unbounded).makeAsyncIterator() }
        reader.request()  // its demand starts the upstream
        for n in 1...4 { input.yield(n) }
        #expect(await reader.answer() == 1)
        #expect(await reader.take(3) == [2, 3, 4])
        var late = recent.events().makeAsyncIterator()
        input.yield(5)
        #expect(await reader.take(1) == [5])
        input.finish()
        #expect(await reader.next() == nil)
        let events = await late.readAll()
        #expect(events == (1...5).map { .element($0) })
    }

    @Test("a multicast cancelled while a greeted subscriber has not read its greeting: it still gets it")
    func greetingSurvivesTheEndOfAConnection() async throws {
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(replay: 3, buffering: .evicting(1))
        let reader = await SubscriberTask.join { multicast.buffering(.unbounded).makeAsyncIterator() }
        let connection = multicast.connect()
        for n in 1...3 { input.yield(n) }
        #expect(await reader.take(3) == [1, 2, 3])
        var late = multicast.makeAsyncIterator()
        connection.cancel()
        let received = await late.readAll()
        #expect(received == [1, 2, 3])
    }

    @Test("evicting(0) is refused with a message naming the parameter")
    func zeroLimitIsRefused() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(0))
        }
        expectMessage(result, contains: "buffering: .evicting(0) needs a limit of at least 1")
    }
}
