// A subscriber that caught up skips its next read while the producers' offer count has not
// moved (see CaughtUpOfferCountTests.swift), and `wait`, reading under the lock, stands in
// for it. The skip cannot change what a subscriber receives, so these tests check that the
// cases where the guess is wrong or the task was cancelled still come out right: a skip
// forced by an offer not counted yet gives exactly what a read would have (elements,
// `missed`, `evicted`, the end), on every policy and per-subscriber view, for a subscriber
// left alone, on an actor, echoing into its own subject, and under concurrent producers.

import Testing

@testable import AsyncMulticast

/// A subscriber isolated to an actor: its `next()` runs with `isolation` = the actor
/// (no catch-up spin, `withUnsafeContinuation(isolation:)`).
private actor ActorReader {
    private var iterator: SharedIterator<Int, Never>?

    init(_ subject: AsyncPassthroughSubject<Int, Never>) {
        self.iterator = subject.makeAsyncIterator()
    }

    func next() async -> Int? {
        var iterator = self.iterator.take()!
        defer { self.iterator = iterator }
        return await iterator.next(isolation: self)
    }

    /// Reads until `last`, sending `element + 1` into `subject` after each element below it.
    func echo(_ subject: AsyncPassthroughSubject<Int, Never>, upTo last: Int) async -> [Int] {
        var received: [Int] = []
        while let element = await self.next() {
            received.append(element)
            if element < last { subject.send(element + 1) } else { break }
        }
        return received
    }

    var remembered: UInt32? { self.iterator?.batch.offersWhenCaughtUp }
}

// Long: its races scale with scheduler round trips, so on a loaded machine they may take
// minutes. A hang fails sooner, by each test's no-progress watchdog or hang guard.
@Suite("Skipping the read after catching up: what the subscriber still receives", .timeLimit(.minutes(15)))
struct CaughtUpSkippedReadTests {
    /// A `.bounded(8)` subject with two subscribers: the first (returned as `caughtUp`) has
    /// read 1 and caught up, remembering the offer count; the second, in a box (so that the
    /// caught-up iterator can be sent into a task alone), has read nothing yet.
    private static func subjectWithACaughtUpSubscriber(
        sourceLocation: SourceLocation = #_sourceLocation
    ) async
        -> sending (
            AsyncPassthroughSubject<Int, Never>, caughtUp: SharedIterator<Int, Never>, SubscriberBox<Int, Never>
        )
    {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        var caughtUp = subject.makeAsyncIterator()
        let other = SubscriberBox(subject.makeAsyncIterator())
        subject.send(1)
        #expect(await caughtUp.next() == 1, sourceLocation: sourceLocation)
        return (subject, caughtUp, other)
    }

    /// The same with the caught-up subscriber on an actor (`ActorReader`).
    fileprivate static func subjectWithACaughtUpActorReader(
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> sending (AsyncPassthroughSubject<Int, Never>, ActorReader, SharedIterator<Int, Never>) {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
        let reader = ActorReader(subject)
        let other = subject.makeAsyncIterator()
        subject.send(1)
        #expect(await reader.next() == 1, sourceLocation: sourceLocation)
        return (subject, reader, other)
    }

    // MARK: What still comes out right

    @Test func anElementOfferedAfterCatchingUpIsRead() async {
        let (subject, caughtUp, b) = await Self.subjectWithACaughtUpSubscriber()
        var a = caughtUp
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
        let (subject, caughtUp, b) = await Self.subjectWithACaughtUpSubscriber()
        var a = caughtUp
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
        let (subject, caughtUp, b) = await Self.subjectWithACaughtUpSubscriber()
        var a = caughtUp
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
            let (subject, a, b) = await Self.subjectWithACaughtUpSubscriber()
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
            let (subject, a, b) = await Self.subjectWithACaughtUpSubscriber()
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

    // MARK: A forced skip gives what a read gives

    static let policies: [SharedBufferingPolicy] = [
        .unbounded, .bounded(1), .bounded(2), .bounded(4), .bounded(16), .bufferingNewest(1), .bufferingNewest(3),
        .bufferingOldest(1), .bufferingOldest(2), .evicting(1), .evicting(2), .evicting(5),
    ]

    /// Subscriber `a` (a `.buffering(policy)` view's events, beside a default-lane subscriber
    /// `b`) catches up, then `burst` elements are produced and the subject finishes. With
    /// `counted` false the offers are not counted, so on a `.bounded` lane `a`'s next refill
    /// skips its read and `wait` reads instead.
    static func scenario(
        _ policy: SharedBufferingPolicy, burst: Int, counted: Bool
    ) async -> (events: [SharedEvent<Int>], skipped: Bool, other: [Int]) {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var a = subject.buffering(policy).events().makeAsyncIterator()
        var b = subject.makeAsyncIterator()
        subject.send(0)
        var events: [SharedEvent<Int>] = []
        events.append(await a.next()!)
        let remembered = a.batch.offersWhenCaughtUp
        for element in 1...burst {
            if counted { subject.send(element) } else { subject.storage.offerUncounted(element) }
        }
        let skipped = remembered != 0 && remembered == subject.storage.catchUp.offerCount
        subject.finish()
        while let event = await a.next() { events.append(event) }
        let other = await b.readAll()
        #expect(subject.storage.invariantViolation == nil)
        return (events, skipped, other)
    }

    @Test("a skip forced by uncounted offers reports the same events as a read", arguments: policies, [1, 2, 3, 6])
    func aForcedSkipReportsWhatAReadWould(_ policy: SharedBufferingPolicy, burst: Int) async throws {
        try await withTimeout {
            let read = await Self.scenario(policy, burst: burst, counted: true)
            let skip = await Self.scenario(policy, burst: burst, counted: false)
            // Only a `.bounded` lane skips (`MulticastStateMachine.skipsEmptyReads`).
            let skips: Bool
            if case .bounded = policy { skips = true } else { skips = false }
            #expect(skip.skipped == skips, "a caught up on 0 and nothing was counted since")
            #expect(!read.skipped)
            #expect(skip.events == read.events)
            #expect(skip.other == Array(0...burst))
            #expect(read.other == Array(0...burst))
            #expect(read.events.first == .element(0))
        }
    }

    @Test func uncountedOffersStillReportTheMissedElementsOfBufferingNewest() async throws {
        let skip = await Self.scenario(.bufferingNewest(1), burst: 3, counted: false)
        #expect(!skip.skipped, "a dropping lane does not skip")
        #expect(skip.events == [.element(0), .missed(2), .element(3)])
    }

    @Test func uncountedOffersStillReportTheEviction() async throws {
        let skip = await Self.scenario(.evicting(2), burst: 3, counted: false)
        #expect(!skip.skipped, "an evicting lane does not skip")
        #expect(skip.events == [.element(0), .evicted(.hardLimit(2))])
    }

    // MARK: Who skips

    /// `a` remembered the count while `b` was there; `b` leaves, so `a` is now the sole
    /// subscriber that would have waited for offers. Its skip goes to `wait`, which still
    /// receives the next element.
    @Test func aSubscriberLeftAloneAfterRememberingStillGetsTheNextElement() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var first = subject.makeAsyncIterator()
            let b = SubscriberBox(subject.makeAsyncIterator())
            subject.send(1)
            #expect(await first.next() == 1)
            #expect(first.batch.offersWhenCaughtUp == 1)
            let a = SubscriberBox(first)
            b.release()
            #expect(subject.subscriberCount == 1)
            let second = a.startNext()
            try await waitUntil("a waiting") { subject.storage.waitingCount == 1 }
            subject.send(2)
            #expect(await second.value == 2)
            let third = a.startNext()
            try await waitUntil("a waiting again") { subject.storage.waitingCount == 1 }
            third.cancel()
            #expect(await third.value == nil)
            #expect(subject.subscriberCount == 0)
        }
    }

    // MARK: Ends after catching up

    @Test func aFailureOfTheShareUpstreamAfterCatchingUpIsThrown() async throws {
        try await withTimeout {
            let source = PushSource()
            let shared = source.share()
            let a = SubscriberBox(shared.makeAsyncIterator())
            var b = shared.makeAsyncIterator()
            let first = Task { try await a.next() }
            try await shared.waitForWaiting(1)
            source.yield(1)
            #expect(try await first.value == 1)
            try await waitUntil("1 counted") { shared.storage.catchUp.offerCount == 1 }
            #expect(try await b.next() == 1)
            #expect(b.batch.offersWhenCaughtUp == 1)
            source.fail(.boom)  // an end is no offer: b's next refill skips
            await #expect(throws: TestError.boom) { _ = try await b.next() }
            await #expect(throws: TestError.boom) { _ = try await a.next() }
        }
    }

    @Test func cancellingAMulticastConnectionEndsACaughtUpSubscriber() async throws {
        try await withTimeout {
            let source = FedSource()
            let multicast = source.multicast()
            var a = multicast.makeAsyncIterator()
            var b = multicast.makeAsyncIterator()
            let connection = multicast.connect()
            await source.control.waitForStart(of: 0)
            source.control.yield(1)
            try await waitUntil("1 counted") { multicast.storage.catchUp.offerCount == 1 }
            #expect(await a.next() == 1)
            #expect(a.batch.offersWhenCaughtUp == 1)
            connection.cancel()
            #expect(await a.next() == nil, "skipped, and wait finds the end its connection left it")
            #expect(await b.next() == 1)
            #expect(await b.next() == nil)
            // A new connection serves new subscribers; the ended one stays ended.
            var c = multicast.makeAsyncIterator()
            var d = multicast.makeAsyncIterator()
            _ = multicast.connect()
            await source.control.waitForStart(of: 1)
            source.control.yield(2)
            #expect(await c.next() == 2)
            #expect(await d.next() == 2)
            #expect(await a.next() == nil)
        }
    }

    /// After the first connection was cancelled, autoconnecting subscribers read the replay
    /// cache and catch up with the upstream idle: their next `next()` must connect it, which
    /// the skipped read would have done and `wait` must do instead.
    @Test func aCaughtUpAutoconnectingSubscriberStillConnectsOnDemand() async throws {
        try await withTimeout {
            let source = FedSource()
            let multicast = source.multicast(replay: 2)
            let connection = multicast.connect()
            await source.control.waitForStart(of: 0)
            source.control.yield(1, 2)
            try await waitUntil("2 counted") { multicast.storage.catchUp.offerCount == 2 }
            connection.cancel()
            let auto = multicast.autoconnect()
            var first = auto.makeAsyncIterator()
            var b = auto.makeAsyncIterator()
            #expect(await first.next() == 1)
            #expect(await first.next() == 2)
            #expect(first.batch.offersWhenCaughtUp == 2, "caught up on the replay cache")
            #expect(multicast.storage.upstreamState == .idle)
            try await Self.expectTheNextCallStartsTheUpstream(
                caughtUp: first, other: &b, source: source, storage: multicast.storage)
        }
    }

    /// `replay(_:)` whose cache outlived its stopped upstream: subscribers joining while it
    /// is idle catch up on the cache without starting it; the next `next()` must start it,
    /// which the skipped read would have done and `wait` must do instead.
    @Test func aCaughtUpReplaySubscriberStillStartsTheIdleUpstream() async throws {
        try await withTimeout {
            let source = FedSource()
            let shared = source.replay(2, replayExpiration: .seconds(Int64.max))
            let firstSession = Task {
                var iterator = shared.makeAsyncIterator()
                return await iterator.take(2)
            }
            await source.control.waitForStart(of: 0)
            source.control.yield(1, 2)
            #expect(await firstSession.value == [1, 2])
            try await waitUntil("the upstream stopped with the last subscriber") {
                shared.subscriberCount == 0 && shared.storage.upstreamState == .idle
            }
            // The producer counts an offer after it released the lock, so possibly after
            // the first session read it and left.
            try await waitUntil("2 counted") { shared.storage.catchUp.offerCount == 2 }
            #expect(shared.replayCache == [1, 2])
            var joining = shared.makeAsyncIterator()
            var b = shared.makeAsyncIterator()
            #expect(await joining.next() == 1, "replayed")
            #expect(await joining.next() == 2)
            #expect(joining.batch.offersWhenCaughtUp == 2, "caught up on the cache")
            #expect(shared.storage.upstreamState == .idle)
            try await Self.expectTheNextCallStartsTheUpstream(
                caughtUp: joining, other: &b, source: source, storage: shared.storage)
        }
    }

    /// `caughtUp` read the cache `[1, 2]` while `source`'s upstream is idle, and `other` read
    /// nothing. The next `next()` of `caughtUp` must start iteration 1 (the skipped read
    /// would have; `wait` must instead), which delivers 3 to both.
    private static func expectTheNextCallStartsTheUpstream(
        caughtUp: consuming SharedIterator<Int, Never>, other: inout SharedIterator<Int, Never>,
        source: FedSource, storage: MulticastStorage<Int, Never>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let a = SubscriberBox(caughtUp)
        let third = a.startNext()
        await source.control.waitForStart(of: 1)
        try await waitUntil("a waiting", sourceLocation: sourceLocation) { storage.waitingCount == 1 }
        source.control.yield(3)
        #expect(await third.value == 3, sourceLocation: sourceLocation)
        #expect(await other.take(3) == [1, 2, 3], sourceLocation: sourceLocation)
    }

    // MARK: On an actor

    @Test func anActorIsolatedSubscriberSkipsAndIsStillServed() async throws {
        try await withTimeout {
            let (subject, reader, first) = await Self.subjectWithACaughtUpActorReader()
            var b = first
            #expect(await reader.remembered == 1)
            // Waits (skipped read) on the actor, resumed by a send from elsewhere.
            let second = Task { await reader.next() }
            try await waitUntil("reader waiting") { subject.storage.waitingCount == 1 }
            subject.send(2)
            #expect(await second.value == 2)
            // An offer not counted yet: the skip is wrong, `wait` finds it at once.
            subject.send(3)
            #expect(await reader.next() == 3)
            #expect(await reader.remembered == 3)
            subject.storage.offerUncounted(4)
            #expect(await reader.next() == 4)
            // The end, after catching up.
            subject.finish()
            #expect(await reader.next() == nil)
            #expect(await b.take(5) == [1, 2, 3, 4])
        }
    }

    @Test func aCancelledActorIsolatedSubscriberLeavesPromptly() async throws {
        try await withTimeout {
            let (subject, reader, b) = await Self.subjectWithACaughtUpActorReader()
            #expect(await reader.remembered == 1)
            // Cancelled before it calls: the skip goes to `wait`, which sees the cancellation.
            let cancelledFirst = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return await reader.next()
            }
            #expect(await cancelledFirst.value == nil)
            #expect(subject.subscriberCount == 1, "it left")
            withExtendedLifetime(b) {}
        }
    }

    @Test func aCancelledWaitingActorIsolatedSubscriberLeavesPromptly() async throws {
        try await withTimeout {
            let (subject, reader, b) = await Self.subjectWithACaughtUpActorReader()
            let waiting = Task { await reader.next() }
            try await waitUntil("reader waiting") { subject.storage.waitingCount == 1 }
            waiting.cancel()
            #expect(await waiting.value == nil)
            #expect(subject.subscriberCount == 1, "it left")
            withExtendedLifetime(b) {}
        }
    }

    // MARK: Echoing into the same subject

    @Test func aSubscriberEchoingIntoItsSubjectReadsItsOwnEcho() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var a = subject.makeAsyncIterator()
            var b = subject.makeAsyncIterator()
            subject.send(0)
            var received: [Int] = []
            var reads = 0
            while let element = await a.next() {
                received.append(element)
                if a.batch.offersWhenCaughtUp != 0 { reads += 1 }
                if element == 100 { break }
                subject.send(element + 1)
            }
            #expect(received == Array(0...100))
            #expect(reads == 101, "each echo moved the count: every refill read")
            subject.finish()
            let other = await b.readAll()
            #expect(other == Array(0...100))
        }
    }

    @Test func anActorIsolatedEchoBesideAConcurrentReader() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            let reader = ActorReader(subject)
            let b = SubscriberBox(subject.makeAsyncIterator())
            let other = Task {
                let out = await b.readAll()
                return out
            }
            subject.send(0)
            #expect(await reader.echo(subject, upTo: 2_000) == Array(0...2_000))
            subject.finish()
            #expect(await other.value == Array(0...2_000))
        }
    }

    /// An echo through `send(waitingForRoom:)` under `.bounded(2)`: the echo waits for the
    /// other subscriber, which reads concurrently.
    @Test func anEchoWaitingForRoomBesideAConcurrentReader() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
            var a = subject.makeAsyncIterator()
            let b = SubscriberBox(subject.makeAsyncIterator())
            let other = Task {
                let out = await b.readAll()
                return out
            }
            subject.send(0)
            var received: [Int] = []
            while let element = await a.next() {
                received.append(element)
                if element == 1_000 { break }
                await subject.send(waitingForRoom: element + 1)
            }
            #expect(received == Array(0...1_000))
            subject.finish()
            #expect(await other.value == Array(0...1_000))
        }
    }

    // MARK: Concurrent producers and subscribers

    /// A producer task against nonisolated and actor-isolated subscribers: each receives
    /// every element once, in order, whatever the interleaving of counts and reads.
    ///
    /// Under `.bounded(1)` that is 20,000 lock-step hand-offs, each a few scheduler round
    /// trips: a loaded machine stretches it far beyond any fixed deadline, so the hang guard
    /// is a watchdog that each element received feeds.
    @Test(arguments: [SharedBufferingPolicy.unbounded, .bounded(4), .bounded(1)])
    func everySubscriberReceivesEveryElementOnceInOrder(_ policy: SharedBufferingPolicy) async throws {
        try await withProgressWatchdog("20,000 elements to three subscribers") { progress in
            let count = 20_000
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let plain = (0..<2).map { _ in SubscriberBox(subject.makeAsyncIterator()) }
            let reader = ActorReader(subject)
            let start = Latch()
            /// Reads with `next` from the start to the end, ticking `progress` for each element.
            func readingAll(_ next: @escaping @Sendable () async -> Int?) -> Task<[Int], Never> {
                Task {
                    await start.wait()
                    var out: [Int] = []
                    out.reserveCapacity(count)
                    while let element = await next() {
                        out.append(element)
                        progress.tick()
                    }
                    return out
                }
            }
            let readers = plain.map { box in readingAll { await box.next() } }
            let onActor = readingAll { await reader.next() }
            let producer = Task {
                await start.wait()
                for element in 0..<count { await subject.send(waitingForRoom: element) }
                subject.finish()
            }
            start.release()
            await producer.value
            for task in readers { #expect(await task.value == Array(0..<count)) }
            #expect(await onActor.value == Array(0..<count))
        }
    }

    /// Lag reports under a race: what a `.bufferingNewest(4)` subscriber receives plus what
    /// it is told it missed is exactly what was produced, in order. Its length grows with
    /// scheduler round trips: the hang guard is a watchdog that each event read feeds.
    @Test func lagReportsStayExactUnderARace() async throws {
        try await withProgressWatchdog("20,000 elements against lag reports") { progress in
            let count = 20_000
            let subject = AsyncPassthroughSubject<Int, Never>()
            var events = subject.events(buffering: .bufferingNewest(4)).makeAsyncIterator()
            let b = SubscriberBox(subject.makeAsyncIterator())
            let start = Latch()
            let other = Task {
                await start.wait()
                var n = 0
                while await b.next() != nil {
                    n += 1
                    progress.tick()
                }
                return n
            }
            let producer = Task {
                await start.wait()
                for element in 0..<count {
                    subject.send(element)
                    if element % 64 == 0 { await Task.yield() }
                }
                subject.finish()
            }
            start.release()
            var next = 0
            var inOrder = true
            while let event = await events.next() {
                progress.tick()
                switch event {
                case .element(let element):
                    if element != next { inOrder = false }
                    next = element + 1
                case .missed(let missed):
                    next += missed
                case .evicted:
                    Issue.record("no eviction under bufferingNewest")
                }
            }
            await producer.value
            #expect(inOrder, "every element is the one after the last plus what was missed")
            #expect(next == count)
            #expect(await other.value == count)
        }
    }

    /// Subscribers cancelled at arbitrary points while a producer runs leave promptly: none
    /// hangs, and each saw a gap-free prefix.
    @Test func subscribersCancelledMidStreamLeavePromptly() async throws {
        try await withTimeout {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            let keeper = subject.makeAsyncIterator()
            let boxes = (0..<8).map { _ in SubscriberBox(subject.makeAsyncIterator()) }
            let progress = Tally()
            let readers = boxes.map { box in
                Task {
                    var out: [Int] = []
                    while let element = await box.next() {
                        if out.isEmpty { progress.add() }
                        out.append(element)
                    }
                    return out
                }
            }
            let producer = Task {
                var element = 0
                while !Task.isCancelled {
                    subject.send(element)
                    element += 1
                    if element % 16 == 0 { await Task.yield() }
                }
            }
            await progress.wait(for: boxes.count, "every reader received something")
            for task in readers { task.cancel() }
            for task in readers {
                let out = await task.value
                #expect(out == Array(0..<out.count))
            }
            producer.cancel()
            await producer.value
            #expect(subject.subscriberCount == 1, "only the keeper is left")
            withExtendedLifetime(keeper) {}
        }
    }
}
