// replay(_:buffering:keepAlive:) with real tasks: the share() lifecycle, the latest `count`
// elements replayed then live ones, the cache after the end and across a restart, its expiry
// (timed on a ManualClock, so no test waits for real time), replay(0) and replay(1). The
// keep-alive window is in KeepAliveTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("replay(_:buffering:keepAlive:)", .timeLimit(.minutes(2)))
struct ReplayTests {
    // MARK: Lifecycle (same as share())

    /// A `replay(count)` of a `FedSource`, and a subscriber whose demand started iteration 0,
    /// which yielded `values`: it read the first, 1.
    static func replayedAndStarted(
        _ count: Int, yielding values: [Int], sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (FedSource, AsyncShareSequence<Int, Never>, SubscriberTask<Int, Never>) {
        let source = FedSource()
        let replayed = source.replay(count)
        let subscriber = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await subscriber.startIteration(of: source, yielding: values) == 1, sourceLocation: sourceLocation)
        return (source, replayed, subscriber)
    }

    @Test("replay starts the upstream lazily, on the first demand")
    func startsLazily() async {
        let source = FedSource()
        let replayed = source.replay(2)
        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(replayed.subscriberCount == 1)
        await letOthersRun()
        #expect(source.control.iteratorCount == 0, "joining is not demand")
        #expect(source.control.nextCalls == 0)

        #expect(await a.startIteration(of: source, yielding: 1) == 1)
        #expect(source.control.iteratorCount == 1)
        await a.leave()
    }

    @Test("the last subscriber leaving cancels the upstream; the next demand restarts it")
    func lastOneOutCancelsThenRestarts() async {
        let source = FedSource()
        let replayed = source.replay(2)
        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await a.startIteration(of: source, yielding: 1, 2) == 1)
        #expect(await b.take(2) == [1, 2])

        await a.leave()
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "one subscriber is still there")
        await b.cancel()
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled)
        #expect(replayed.subscriberCount == 0)

        let c = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(replayed.replayCache.isEmpty, "by default the cache expires when the upstream stops")
        c.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(10)
        #expect(await c.answer() == 10)
        #expect(source.control.iteratorCount == 2, "a fresh makeAsyncIterator() for the restart")
        await c.leave()
    }

    @Test("a restart waits only for the element the cancelled iteration was computing, which is not delivered")
    func restartWaitsForTheCancelledIteration() async {
        let source = StubbornSource()
        let replayed = source.replay(1, replayExpiration: .seconds(Int64.max))
        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        a.request()
        _ = await source.control.pulled.next("first pull")
        source.control.answer(1)
        #expect(await a.answer() == 1)
        _ = await source.control.pulled.next("second pull")  // stuck: it ignores cancellation
        await a.leave()  // cancels the upstream, which does not notice yet

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 1, "the replayed element")
        b.request()  // demand: a restart is due
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "no second base iterator while the first is still running")

        source.control.answer(2)  // the cancelled iteration's late element
        // It was inside next() when it was cancelled, so it has seen the cancellation (and
        // ignored it): it is asked for nothing more, and the next pull is the restart's.
        _ = await source.control.pulled.next("the restarted iteration's first pull")
        #expect(source.control.iteratorCount == 2, "the cancelled iteration was asked for another element")
        source.control.answer(3)
        #expect(await b.answer() == 3, "2 came from the cancelled iteration and is dropped")
        await b.leave()
        source.control.answer(nil)
    }

    // MARK: Replayed elements, then live ones

    @Test("a new subscriber gets the latest `count` elements, oldest first, then live ones")
    func replaysLatestThenLive() async {
        let (source, replayed, a) = await Self.replayedAndStarted(2, yielding: [1, 2, 3, 4, 5])
        #expect(await a.take(4) == [2, 3, 4, 5])  // all five were produced

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.take(2) == [4, 5])
        source.control.yield(6, 7)
        #expect(await b.take(2) == [6, 7])
        #expect(await a.take(2) == [6, 7])
        #expect(source.control.iteratorCount == 1)
        await leaveAll(a, b)
    }

    @Test("fewer elements produced than `count`: a new subscriber gets all of them")
    func replaysWhatThereIs() async {
        let (source, replayed, a) = await Self.replayedAndStarted(5, yielding: [1, 2])
        #expect(await a.next() == 2)
        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.take(2) == [1, 2])
        source.control.yield(3)
        #expect(await b.next() == 3)
        await leaveAll(a, b)
    }

    @Test(
        "joining while the upstream produces continuously: a contiguous run, nothing missed or duplicated at the seam")
    func seamIsContiguous() async throws {
        let probe = Probe()
        let replayed = Instrumented(Counter(), probe: probe).replay(3)
        let progress = Lock(-1)
        // Subscriber A reads continuously, for the whole test.
        let a = Task { () -> (count: Int, contiguous: Bool) in
            var iterator = replayed.makeAsyncIterator()
            var last = -1
            var count = 0
            var contiguous = true
            while let value = await iterator.next() {
                if value != last + 1 { contiguous = false }
                last = value
                count += 1
                progress.withLock { $0 = value }
            }
            return (count, contiguous)
        }
        for round in 1...20 {
            let target = round * 40
            try await waitUntil("A reaches \(target)") { progress.withLock { $0 } >= target }
            let before = progress.withLock { $0 }
            // B joins right now, while the upstream is producing.
            let b = Task { () -> [Int] in
                var iterator = replayed.makeAsyncIterator()
                var values: [Int] = []
                while values.count < 100, let value = await iterator.next() { values.append(value) }
                return values
            }
            let values = try await withTimeout("joiner B") { await b.value }
            #expect(values.count == 100)
            #expect(isConsecutive(values), "round \(round): \(values.prefix(8))…")
            if let first = values.first {
                // Produced before B joined: `before` (A saw it); B starts at most 3 back from the tail.
                #expect(first >= before - 2, "round \(round): B started at \(first), A had seen \(before)")
            }
        }
        a.cancel()
        let result = try await withTimeout("subscriber A") { await a.value }
        #expect(result.contiguous)
        #expect(result.count > 800)
        #expect(probe.iterators == 1, "one upstream iteration throughout")
    }

    // MARK: After the upstream ended

    @Test("after the upstream finished, a new subscriber gets the replayed elements, then nil")
    func afterFinish() async {
        let source = FedSource()
        let replayed = source.replay(2)
        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        a.request()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        source.control.finish()
        #expect(await a.answer() == 1)
        let rest = await a.drain()
        #expect(rest.elements == [2, 3])

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        let late = await b.drain()
        #expect(late.elements == [2, 3])
        #expect(late.failure == nil)
        let c = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await c.drain().elements == [2, 3], "every later subscriber, again")
        #expect(source.control.iteratorCount == 1, "a terminated upstream is not restarted")
    }

    @Test("after the upstream failed, a new subscriber gets the replayed elements, then the error")
    func afterFailure() async {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
        let replayed = stream.replay(2)
        for value in 1...3 { continuation.yield(value) }
        continuation.finish(throwing: TestError.other(7))

        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        let first = await a.drain()
        #expect(first.elements == [1, 2, 3])
        #expect(first.failure as? TestError == TestError.other(7))

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        let late = await b.drain()
        #expect(late.elements == [2, 3])
        #expect(late.failure as? TestError == TestError.other(7))
    }

    // MARK: The cache survives a disconnect

    @Test("a subscriber arriving after everyone left sees the last values, then the restarted upstream's")
    func cacheSurvivesDisconnect() async {
        let source = FedSource()
        let replayed = source.replay(2, replayExpiration: .seconds(Int64.max))
        let a = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await a.startIteration(of: source, yielding: 1, 2, 3) == 1)
        #expect(await a.take(2) == [2, 3])
        await a.leave()
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.take(2) == [2, 3])
        #expect(source.control.iteratorCount == 1, "replayed elements come from the cache, not a restart")
        b.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(10, 11)
        #expect(await b.answer() == 10)
        #expect(await b.next() == 11)
        await b.leave()
    }

    // MARK: The cache's expiry, timed on a manual clock

    /// The instant `offset` after the clock was created (when the sequence was made).
    private func at(_ offset: Duration) -> ManualClock.Instant { ManualClock.Instant(offset: offset) }

    /// One subscriber starts the upstream, reads 1, 2, 3, and leaves.
    private func readOneTwoThreeAndLeave(
        _ replayed: AsyncShareSequence<Int, Never>, _ source: FedSource,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let a = await SubscriberTask.join({ replayed.makeAsyncIterator() }, sourceLocation: sourceLocation)
        #expect(
            await a.startIteration(of: source, yielding: 1, 2, 3, sourceLocation: sourceLocation) == 1,
            sourceLocation: sourceLocation)
        #expect(await a.take(2, sourceLocation: sourceLocation) == [2, 3], sourceLocation: sourceLocation)
        await a.leave(sourceLocation: sourceLocation)
    }

    /// Waits until the timer task of `replayed`, if one runs, has ended.
    private func waitForTheTimer(
        of replayed: AsyncShareSequence<Int, Never>, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        guard let timer = replayed.storage.state.withLock({ $0.timerTask }) else { return }
        _ = await withTimeoutOrNil("the timer task", sourceLocation: sourceLocation) { await timer.value }
    }

    @Test("the cache expires exactly keepAlive + replayExpiration after the last subscriber left, not before")
    func cacheExpiresAfterBothWindows() async {
        let clock = ManualClock()
        let source = FedSource()
        let replayed = source.replay(2, keepAlive: .seconds(10), replayExpiration: .seconds(30), clock: clock)
        await self.readOneTwoThreeAndLeave(replayed, source)
        #expect(await clock.waitForSleepers(count: 1), "the keep-alive window")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(10))])

        clock.advance(by: .seconds(10))
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled, "the keep-alive window ended")
        #expect(await clock.waitForSleepers(count: 1), "the same timer now times the cache's expiry")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(40))])
        #expect(replayed.replayCache == [2, 3], "kept after the upstream stopped")

        clock.advance(to: self.at(.seconds(40) - .nanoseconds(1)))
        #expect(clock.sleeperCount == 1, "one nanosecond early: the timer still sleeps")
        #expect(replayed.replayCache == [2, 3], "one nanosecond early: still full")

        clock.advance(by: .nanoseconds(1))
        await self.waitForTheTimer(of: replayed)
        #expect(replayed.replayCache.isEmpty, "expired at keepAlive + replayExpiration")
        #expect(clock.sleeperCount == 0)

        let late = await SubscriberTask.join { replayed.makeAsyncIterator() }
        late.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(10)
        #expect(await late.answer() == 10, "nothing replayed: the restarted upstream's first element")
        await late.leave()
    }

    @Test("a subscriber arriving before the cache expired is replayed the old values; the restart keeps the cache")
    func subscriberBeforeExpiryIsReplayed() async {
        let clock = ManualClock()
        let source = FedSource()
        let replayed = source.replay(2, replayExpiration: .seconds(30), clock: clock)
        await self.readOneTwoThreeAndLeave(replayed, source)
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled, "no keep-alive: stopped when the last subscriber left")
        #expect(await clock.waitForSleepers(count: 1), "the expiry window")
        #expect(clock.sleeperDeadlines == [self.at(.seconds(30))])
        clock.advance(by: .seconds(30) - .nanoseconds(1))
        #expect(clock.sleeperCount == 1)

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.take(2) == [2, 3], "the old values, one nanosecond before they expire")
        b.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(10)
        #expect(await b.answer() == 10)

        clock.advance(by: .nanoseconds(1))  // the expiry deadline passes while the upstream runs again
        await self.waitForTheTimer(of: replayed)
        #expect(replayed.replayCache == [3, 10], "a restart inside the window cancels the expiry")
        let c = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await c.take(2) == [3, 10])
        await leaveAll(b, c)
    }

    @Test(
        "replayExpiration: .zero empties the cache the moment the upstream stops, without a timer",
        arguments: [
            Duration.zero, .seconds(10),
        ])
    func zeroExpirationEmptiesAtOnce(keepAlive: Duration) async {
        let clock = ManualClock()
        let source = FedSource()
        let replayed = source.replay(2, keepAlive: keepAlive, replayExpiration: .zero, clock: clock)
        await self.readOneTwoThreeAndLeave(replayed, source)
        if keepAlive > .zero {
            #expect(await clock.waitForSleepers(count: 1))
            #expect(replayed.replayCache == [2, 3], "kept while the keep-alive window is open")
            clock.advance(by: keepAlive)
        }
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)
        #expect(replayed.replayCache.isEmpty, "expired when the upstream stopped, with no time passing")
        await self.waitForTheTimer(of: replayed)
        #expect(clock.sleeperCount == 0, "no expiry window to time")
    }

    @Test(
        "an upstream that finished keeps its cache whatever replayExpiration says, even inside a keep-alive window",
        arguments: [Duration.zero, .seconds(30), .seconds(Int64.max)])
    func finishedUpstreamKeepsCache(replayExpiration: Duration) async {
        let clock = ManualClock()
        let source = FedSource()
        let replayed = source.replay(2, keepAlive: .seconds(10), replayExpiration: replayExpiration, clock: clock)
        await self.readOneTwoThreeAndLeave(replayed, source)
        #expect(await clock.waitForSleepers(count: 1), "the keep-alive window")
        let timer = replayed.storage.state.withLock { $0.timerTask }

        source.control.finish()  // nobody is subscribed, the upstream lingers: it finishes
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .finished)
        if let timer {
            _ = await withTimeoutOrNil("the timer task") { await timer.value }
        }
        #expect(clock.sleeperCount == 0, "the upstream's end cancelled the timer")

        clock.advance(by: .seconds(86_400 * 365))
        #expect(replayed.replayCache == [2, 3], "a year later")
        let late = await SubscriberTask.join { replayed.makeAsyncIterator() }
        let drained = await late.drain()
        #expect(drained.elements == [2, 3], "the cache, then the end")
        #expect(source.control.iteratorCount == 1, "a finished upstream is not restarted")
    }

    // MARK: replay(0) and replay(1)

    /// Runs one script against a shared sequence and records what is observable.
    private func trace(_ make: (FedSource) -> AsyncShareSequence<Int, Never>) async -> [String] {
        var trace: [String] = []
        let source = FedSource()
        let shared = make(source)
        let a = await SubscriberTask.join { shared.makeAsyncIterator() }
        trace.append("iterators after join: \(source.control.iteratorCount)")
        a.request()
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        trace.append("a: \(await a.answer().map(String.init) ?? "nil")")
        trace.append("a: \(await a.take(1))")
        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        b.request()
        await letOthersRun()
        source.control.yield(3)
        trace.append("b: \(await b.answer().map(String.init) ?? "nil")")
        trace.append("a: \(await a.take(1))")
        await leaveAll(a, b)
        let ended = await source.control.waitForEnd()
        trace.append("ended: \(ended.map { "\($0.iteration) \($0.end)" } ?? "nil")")
        let c = await SubscriberTask.join { shared.makeAsyncIterator() }
        c.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(7)
        trace.append("c: \(await c.answer().map(String.init) ?? "nil")")
        trace.append("iterators: \(source.control.iteratorCount)")
        await c.leave()
        return trace
    }

    @Test("replay(0) behaves exactly like share()")
    func replayZeroIsShare() async {
        let expected = [
            "iterators after join: 0", "a: 1", "a: [2]", "b: 3", "a: [3]",
            "ended: 0 cancelled", "c: 7", "iterators: 2",
        ]
        let shared = await self.trace { $0.share() }
        let replayZero = await self.trace { $0.replay(0) }
        #expect(shared == expected)
        #expect(replayZero == shared)
    }

    @Test("replay(1): a late subscriber immediately gets the current value")
    func replayOneIsAStateHolder() async {
        let source = FedSource()
        let state = source.replay(1)
        let a = await SubscriberTask.join { state.makeAsyncIterator() }
        #expect(await a.startIteration(of: source, yielding: 1, 2, 3) == 1)
        #expect(await a.take(2) == [2, 3])

        let late = await SubscriberTask.join { state.makeAsyncIterator() }
        #expect(await late.next() == 3, "the current value, without anything new produced")
        #expect(source.control.iteratorCount == 1)
        source.control.yield(4)
        #expect(await late.next() == 4)
        #expect(await a.next() == 4)
        await leaveAll(a, late)
    }

    @Test("a dropping subscriber gets at most max(n, 1) replayed elements, the newest")
    func droppingSubscriberGetsNewestReplayed() async {
        let (_, replayed, a) = await Self.replayedAndStarted(3, yielding: [1, 2, 3, 4])
        #expect(await a.take(3) == [2, 3, 4])
        let newest = await SubscriberTask.join { replayed.buffering(.bufferingNewest(1)).makeAsyncIterator() }
        #expect(await newest.next() == 4)
        let full = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await full.take(3) == [2, 3, 4])
        await leaveAll(a, newest, full)
    }

    // MARK: Bad input

    @Test("replay(-1) stops with a precondition naming the parameter and the value")
    func negativeCountStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncStream<Int> { $0.finish() }.replay(-1)
        }
        expectMessage(result, contains: "replay(_:)")
        expectMessage(result, contains: "-1")
    }
}
