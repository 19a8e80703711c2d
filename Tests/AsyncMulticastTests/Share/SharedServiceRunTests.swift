// `sharedService(replay:buffering:started:clock:)` (AsyncSharedService) hosted by run():
// run() cancelled before it starts, while it waits for a start, mid-iteration, between
// iterations; joins and leaves racing restarts; the strategies; the replay-expiry window;
// a failing base; a base that ignores cancellation; the views (subscribe, events,
// buffering); subscriber counts; a producer parked on a full bounded subscriber; a
// subscriber that cancels run() from its loop; task-local values and priority; overlap of
// iterations; and whether anything of the service outlives run().
//
// Order comes from gates (Signal, Latch, waitUntil on state, the manual clock's sleepers,
// a held executor); deadlines are hang guards only. Races are looped.
//
// Found, and fixed: run() cancelled after it was handed an iteration still created the
// base's iterator (cancelledAfterTheHandOver); a timer task cancelled or replaced before run()
// ended was not awaited (upstreamEndsWhileTheTimerSleeps, replacedTimerIsAwaited); a replay
// whose expiry window was open when run() ended never expired (cancelledDuringTheReplayExpiry).
// A late subscriber after run() returned gets the replay (if any), then nil, as for share().

import Testing

@testable import AsyncMulticast

private enum ServiceTrace {
    @TaskLocal static var id: String?
}

/// Records, per iteration of the base, the task-local trace and priority the upstream task
/// runs with (read in `makeAsyncIterator()`, which runs in the upstream task), and counts
/// concurrently live iterators.
private final class IterationLog: Sendable {
    struct Entry: Sendable {
        let trace: String?
        let priority: TaskPriority
    }
    private struct State: Sendable {
        var entries: [Entry] = []
        var live = 0
        var maxLive = 0
    }
    private let state = Lock(State())
    func began() {
        let entry = Entry(trace: ServiceTrace.id, priority: Task.currentPriority)
        self.state.withLock {
            $0.entries.append(entry)
            $0.live += 1
            $0.maxLive = max($0.maxLive, $0.live)
        }
    }
    func ended() { self.state.withLock { $0.live -= 1 } }
    var entries: [Entry] { self.state.withLock { $0.entries } }
    var live: Int { self.state.withLock { $0.live } }
    var maxLive: Int { self.state.withLock { $0.maxLive } }
}

/// Counts 0, 1, 2, … per iteration, yielding before each element, `nil` once cancelled;
/// logs its iterations in an `IterationLog` (the iterator's release ends it).
private struct LoggedCounter: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let log: IterationLog

    final class Token: Sendable {
        let log: IterationLog
        init(_ log: IterationLog) {
            self.log = log
            log.began()
        }
        deinit { self.log.ended() }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var value = 0
        let token: Token
        mutating func next() async -> Int? {
            await Task.yield()
            if Task.isCancelled { return nil }
            defer { self.value += 1 }
            return self.value
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(token: Token(self.log)) }
}

private func hostIsWaiting<E, F>(_ service: AsyncSharedService<E, F>) -> Bool {
    service.storage.state.withLock { state in
        if case .waiting = state.machine.host { return true }
        return false
    }
}

private func hostIsRunning<E, F>(_ service: AsyncSharedService<E, F>) -> Bool {
    service.storage.state.withLock { state in
        if case .running = state.machine.host { return true }
        return false
    }
}

/// Awaits `task` under a hang guard; `false` if it did not end.
private func ends<T: Sendable>(
    _ task: Task<T, Never>, _ what: String = "run()", seconds: Double = 60,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Bool {
    await withTimeoutOrNil(what, seconds: seconds, sourceLocation: sourceLocation) { _ = await task.value } != nil
}

/// Joins, reads one element, leaves.
/// Polls `condition` for up to `yields` yields, without recording an issue: for checking
/// that something that should not happen does not, where a bug makes it happen at once.
/// Few yields: many of them keep the cooperative pool busy (under the thread sanitizer, on
/// 2 cores, 20,000 starved the tests running beside it).
private func becomesTrue(yields: Int = 500, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<yields {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}

/// A first subscriber joins, its demand starts iteration 0 of the stubborn `source`, it reads
/// 1, and leaves while the base is inside its second `next()`: iteration 0 is cancelled (the
/// upstream stops), and the base ignores it until the test answers that pull.
private func firstVisitReadsOneAndLeavesDuringAPull(
    _ service: AsyncSharedService<Int, Never>, _ source: StubbornSource,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let first = SubscriberBox(service.makeAsyncIterator())
    let read = first.startNext()
    _ = await source.control.pulled.next("iteration 0's first pull")
    source.control.answer(1)
    #expect(await read.value == 1, sourceLocation: sourceLocation)
    _ = await source.control.pulled.next("iteration 0's second pull")
    first.release()
}

private func visit(_ service: AsyncSharedService<Int, Never>) async -> Int? {
    var iterator = service.makeAsyncIterator()
    return await iterator.next()
}

@Suite("sharedService: run() cancelled, restarted and ending", .serialized, .timeLimit(.minutes(5)))
struct SharedServiceRunTests {
    // MARK: - run() cancelled early

    @Test(
        "run() cancelled before it starts: nothing is iterated, early subscribers end, later ones too, run() again returns",
        arguments: [SharingStarted.eagerly, .lazily, .whileSubscribed(), .whileSubscribed(keepAlive: .seconds(5))])
    func cancelledBeforeItStarts(started: SharingStarted) async throws {
        let probe = Probe()
        let source = FedSource()
        let service = Instrumented(source, probe: probe).sharedService(
            replay: 1, buffering: .unbounded, started: started, clock: ManualClock())
        let early = SubscriberBox(service.makeAsyncIterator())
        let reading = early.startNext()
        try await waitUntil("the early subscriber waits") { service.storage.waitingCount == 1 }
        let gate = Latch()
        let hosting = Task {
            await gate.wait()
            #expect(Task.isCancelled)
            await service.run()
        }
        hosting.cancel()
        gate.release()
        #expect(await ends(hosting))
        #expect(await reading.value == nil)
        #expect(probe.iterators == 0, "\(started): cancelled before it started, the base was never iterated")
        #expect(service.storage.upstreamState == .terminated(.finished))
        var late = service.makeAsyncIterator()
        #expect(await late.next() == nil)
        await service.run()  // after it returned: at once
        #expect(service.subscriberCount == 0)
    }

    @Test("run() cancelled while it waits for a first subscriber: returns, nothing iterated, the early waiter ends")
    func cancelledWhileWaitingForAStart() async throws {
        for started in [SharingStarted.lazily, .whileSubscribed()] {
            let source = FedSource()
            let service = source.sharedService(started: started)
            let hosting = Task { await service.run() }
            try await waitUntil("run() waits") { hostIsWaiting(service) }
            hosting.cancel()
            #expect(await ends(hosting))
            #expect(source.control.iteratorCount == 0)
            var late = service.makeAsyncIterator()
            #expect(await late.next() == nil)
        }
    }

    @Test(
        "run() cancelled after it was handed an iteration, before it created the task: the base is not iterated")
    func cancelledAfterTheHandOver() async throws {
        let executor = HeldExecutor()
        let probe = Probe()
        let source = FedSource()
        let service = Instrumented(source, probe: probe).sharedService(buffering: .unbounded, started: .lazily)
        let hosting = Task(executorPreference: executor) { await service.run() }
        try await waitUntil("run() waits") { hostIsWaiting(service) }
        executor.hold()
        let reader = SubscriberBox(service.makeAsyncIterator())
        let reading = reader.startNext()  // demand: iteration 0 is handed to run(), held
        try await waitUntil("the iteration was handed over") { hostIsRunning(service) }
        hosting.cancel()
        executor.release()
        #expect(await ends(hosting))
        #expect(await reading.value == nil)
        #expect(probe.iterators == 0, "run() was cancelled before the iteration began")
    }

    @Test("cancel run() right as it starts, with subscribers reading, 150 times: everything ends, nothing is left")
    func cancelRightAsItStarts() async throws {
        for round in 0..<150 {
            let log = IterationLog()
            let started: SharingStarted = [.eagerly, .lazily, .whileSubscribed()][round % 3]
            let service = LoggedCounter(log: log).sharedService(buffering: .bounded(4), started: started)
            let readers = (0..<2).map { _ in
                let box = SubscriberBox(service.makeAsyncIterator())
                return Task { () -> [Int] in
                    var received: [Int] = []
                    while let n = await box.next() { received.append(n) }
                    return received
                }
            }
            let hosting = Task { await service.run() }
            for _ in 0..<(round % 7) { await Task.yield() }
            hosting.cancel()
            #expect(await ends(hosting))
            #expect(log.live == 0, "round \(round): the base's iterator was released before run() returned")
            #expect(log.maxLive <= 1)
            #expect(log.entries.count <= 1, "one iteration at most: nobody left")
            for reader in readers {
                let received = await reader.value
                #expect(received == Array(0..<received.count), "round \(round): in order, no gap")
            }
            #expect(service.subscriberCount == 0)
        }
    }

    // MARK: - Restarts

    @Test("whileSubscribed(.zero): the last subscriber leaves, a new one comes while run() is between iterations")
    func restartBetweenIterations() async throws {
        let source = StubbornSource()
        let service = source.sharedService(buffering: .unbounded, started: .whileSubscribed())
        let hosting = Task { await service.run() }
        // Iteration 0: one element, then the subscriber leaves while the base is in next().
        await firstVisitReadsOneAndLeavesDuringAPull(service, source)
        try await waitUntil("the upstream stopped") { service.storage.upstreamState == .idle }
        // A new subscriber: its iteration must wait for the old one to end.
        let second = SubscriberBox(service.makeAsyncIterator())
        let secondRead = second.startNext()
        try await waitUntil("the new subscriber waits") { service.storage.waitingCount == 1 }
        await letOthersRun()
        #expect(source.control.iteratorCount == 1, "no second iteration while the first is inside next()")
        source.control.answer(99)  // the old iteration ends (discarded)
        _ = await source.control.pulled.next("iteration 1's first pull")
        #expect(source.control.iteratorCount == 2)
        source.control.answer(2)
        #expect(await secondRead.value == 2)
        _ = await source.control.pulled.next("iteration 1's second pull")
        let returned = LockedFlag()
        let watcher = Task {
            await hosting.value
            returned.set()
        }
        hosting.cancel()
        await letOthersRun()
        #expect(!returned.isSet, "run() waits for the base's next() to return")
        #expect(await second.next() == nil, "the subscriber ends at once")
        source.control.answer(nil)
        #expect(await ends(watcher))
        second.release()
    }

    @Test(
        "run() cancelled between iterations, with the next one pending behind a base still inside next(): it never starts"
    )
    func cancelledWithAnIterationPending() async throws {
        let source = StubbornSource()
        let service = source.sharedService(buffering: .unbounded, started: .whileSubscribed())
        let returned = LockedFlag()
        let hosting = Task {
            await service.run()
            returned.set()
        }
        await firstVisitReadsOneAndLeavesDuringAPull(service, source)  // its base ignores the cancellation
        let second = SubscriberBox(service.makeAsyncIterator())
        let secondRead = second.startNext()  // iteration 1 waits for run() to finish iteration 0
        try await waitUntil("the new subscriber waits") { service.storage.waitingCount == 1 }
        hosting.cancel()
        #expect(await secondRead.value == nil, "the waiting subscriber ends at once")
        #expect(!returned.isSet, "run() waits for iteration 0's next()")
        source.control.answer(7)
        #expect(await ends(hosting))
        #expect(source.control.iteratorCount == 1, "the pending iteration never started")
        second.release()
    }

    @Test("joins and leaves race restarts (keepAlive .zero): iterations never overlap, run() cancelled mid-storm")
    func joinLeaveStormZeroTimeout() async throws {
        for round in 0..<12 {
            let log = IterationLog()
            let service = LoggedCounter(log: log).sharedService(buffering: .bounded(2), started: .whileSubscribed())
            let visits = Tally()
            let hosting = Task { await service.run() }
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        while await visit(service) != nil { visits.add() }
                    }
                }
                group.addTask {
                    await visits.wait(for: 40 + round * 10)
                    hosting.cancel()
                }
            }
            #expect(await ends(hosting))
            #expect(log.maxLive == 1, "round \(round): two iterations of the base overlapped")
            #expect(log.live == 0, "round \(round): an iterator outlived run()")
            #expect(log.entries.count >= 1)
            #expect(service.subscriberCount == 0)
        }
    }

    @Test(
        "joins and leaves race restarts (keepAlive 1 s, replayExpiration 2 s, manual clock moving): no overlap, no timer left"
    )
    func joinLeaveStormWithTimeouts() async throws {
        for round in 0..<8 {
            let log = IterationLog()
            let clock = ManualClock()
            let service = LoggedCounter(log: log).sharedService(
                replay: 1, buffering: .bounded(2),
                started: .whileSubscribed(keepAlive: .seconds(1), replayExpiration: .seconds(2)), clock: clock)
            let visits = Tally()
            let stop = LockedFlag()
            let hosting = Task { await service.run() }
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        // Not `while let`: after run() returned, a late subscriber still
                        // gets the replay (see cancelledDuringTheReplayExpiry).
                        while !stop.isSet {
                            var iterator = service.makeAsyncIterator()
                            _ = await iterator.next()  // the replay, or a fresh element
                            _ = await iterator.next()  // a fresh one: demand
                            visits.add()
                            await Task.yield()
                        }
                    }
                }
                group.addTask {
                    while !stop.isSet {
                        clock.advance(by: .milliseconds(700))
                        for _ in 0..<20 { await Task.yield() }
                    }
                }
                group.addTask {
                    await visits.wait(for: 60 + round * 10)
                    hosting.cancel()
                    _ = await hosting.value
                    stop.set()
                }
            }
            #expect(log.maxLive == 1, "round \(round): two iterations of the base overlapped")
            #expect(log.live == 0)
            #expect(clock.sleeperCount == 0, "round \(round): a timer still sleeps after run() returned")
            #expect(service.storage.state.withLock { $0.timerTask == nil })
        }
    }

    // MARK: - The strategies

    @Test("eagerly, no subscriber ever: the base runs into the replay cache; cancel ends it; nobody was ever counted")
    func eagerlyWithoutSubscribers() async throws {
        let source = FedSource()
        let service = source.sharedService(replay: 2, started: .eagerly)
        let counts = Task { () -> [Int] in
            var seen: [Int] = []
            for await count in service.subscriberCounts {
                seen.append(count)
                if seen.count == 1 { break }
            }
            return seen
        }
        #expect(await counts.value == [0])
        let hosting = Task { await service.run() }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        try await waitUntil("3 produced") { service.replayCache == [2, 3] }
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(source.control.end(of: 0) == .cancelled)
        #expect(source.control.iteratorCount == 1)
        #expect(service.subscriberCount == 0)
    }

    @Test(
        "lazily: a subscriber that joins before run() and leaves starts nothing until a demand; then it runs for good")
    func lazilyJoinLeaveBeforeRun() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded, started: .lazily)
        do {
            let idle = service.makeAsyncIterator()  // joins without demand, leaves
            _ = idle
        }
        let hosting = Task { await service.run() }
        try await waitUntil("run() waits") { hostIsWaiting(service) }
        #expect(source.control.iteratorCount == 0, "no demand: nothing starts")
        await source.oneSubscriberReadsTheFirstElement(of: service)
        try await waitUntil("left") { service.subscriberCount == 0 }
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "lazily keeps running without subscribers")
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(source.control.end(of: 0) == .cancelled)
    }

    /// A `replay(1)` service of a `FedSource` whose cache outlives a stopped upstream by 10 s
    /// on a `ManualClock`, hosted by a task; a first subscriber joined, read 1 and left, and
    /// the expiry window is open (its timer sleeps).
    private func hostedWithAnOpenExpiryWindow() async -> (
        ManualClock, FedSource, AsyncSharedService<Int, Never>, Task<Void, Never>
    ) {
        let clock = ManualClock()
        let source = FedSource()
        let (service, hosting) = source.hostedReplayService(clock: clock)
        await source.oneSubscriberReadsTheFirstElement(of: service)
        await clock.waitForSleepers(count: 1)  // the expiry window
        return (clock, source, service, hosting)
    }

    @Test("replayExpiration: the cache outlives the stopped upstream for the window, then clears; run() keeps going")
    func replayExpirationWindow() async throws {
        let (clock, source, service, hosting) = await hostedWithAnOpenExpiryWindow()
        #expect(await source.control.waitForEnd()?.end == .cancelled)
        #expect(service.replayCache == [1], "within the window")
        clock.advance(by: .seconds(9))
        #expect(service.replayCache == [1])
        clock.advance(by: .seconds(1))
        try await waitUntil("the cache expired") { service.replayCache.isEmpty }
        // run() still hosts: a new subscriber starts iteration 1.
        let second = SubscriberBox(service.makeAsyncIterator())
        let read2 = second.startNext()
        await source.deliver(2, startingIteration: 1, to: read2)
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(clock.sleeperCount == 0)
        second.release()
    }

    @Test(
        "run() cancelled while the replay-expiry window is open: a later subscriber gets nil at once, not the stale cache"
    )
    func cancelledDuringTheReplayExpiry() async throws {
        let (clock, _, service, hosting) = await hostedWithAnOpenExpiryWindow()
        hosting.cancel()
        #expect(await ends(hosting))
        clock.advance(by: .seconds(3600))
        var late = service.makeAsyncIterator()
        #expect(await late.next() == nil, "an hour after the window closed")
    }

    // MARK: - The base's end

    @Test("the base throws while subscribers wait and while lingering: they get the error; run() throws it, twice")
    func baseThrows() async throws {
        let clock = ManualClock()
        let source = PushSource()
        let service = source.sharedService(
            replay: 1, buffering: .unbounded, started: .whileSubscribed(keepAlive: .seconds(5)), clock: clock)
        let hosting = hostingRun(of: service)
        let waiter = SubscriberBox(service.makeAsyncIterator())
        let waiting = Task { () -> Result<[Int], TestError> in
            var got: [Int] = []
            do throws(TestError) {
                while let n = try await waiter.next() { got.append(n) }
                return .success(got)
            } catch {
                return .failure(error)
            }
        }
        try await waitUntil("the subscriber waits") { service.storage.waitingCount == 1 }
        source.yield(1)
        source.fail(.other(3))
        #expect(await hosting.value == .other(3))
        #expect(await waiting.value == .failure(.other(3)))
        do throws(TestError) {
            try await service.run()
            Issue.record("run() after a failure returned normally")
        } catch {
            #expect(error == .other(3), "run() again: the same error at once")
        }
        var late = service.makeAsyncIterator()
        do throws(TestError) {
            while (try await late.next()) != nil {}
            Issue.record("a late subscriber ended without the error")
        } catch {
            #expect(error == .other(3))
        }
        #expect(clock.sleeperCount == 0)
    }

    @Test("the base finishes while lingering in the stop timeout: run() returns; subscribers end")
    func baseFinishesWhileLingering() async throws {
        let clock = ManualClock()
        let source = FedSource()
        let (service, hosting) = await source.hostedServiceLingering(clock: clock)
        source.control.finish(0)
        #expect(await ends(hosting))
        #expect(clock.sleeperCount == 0)
        var late = service.makeAsyncIterator()
        #expect(await late.next() == nil)
    }

    // MARK: - No task left behind: the timer

    /// A service of a `FedSource` on a `ScriptedClock` following `plan` (by default, every
    /// sleep ignores cancellation until released), hosted by a task that sets `returned` when
    /// `run()` returns; a first subscriber joined, read 1, and left.
    private func hostedAfterOneVisit(
        plan: @escaping @Sendable (Int) -> ScriptedClock.Sleep = { _ in .failWhenReleasedIgnoringCancellation },
        replay: Int = 0, started: SharingStarted = .whileSubscribed(keepAlive: .seconds(60))
    ) async -> (ScriptedClock, FedSource, AsyncSharedService<Int, Never>, Task<Void, Never>, LockedFlag) {
        let clock = ScriptedClock(plan: plan)
        let source = FedSource()
        let service = source.sharedService(replay: replay, buffering: .unbounded, started: started, clock: clock)
        let returned = LockedFlag()
        let hosting = Task {
            await service.run()
            returned.set()
        }
        await source.oneSubscriberReadsTheFirstElement(of: service)
        return (clock, source, service, hosting, returned)
    }

    @Test(
        "run() cancelled while the stop-timeout timer sleeps on a clock that ignores cancellation: run() waits for it")
    func runWaitsForAStubbornTimer() async throws {
        let (clock, source, _, hosting, returned) = await hostedAfterOneVisit()
        try await waitUntil("the timer sleeps") { clock.pendingFailures == 1 }
        hosting.cancel()
        _ = await source.control.waitForEnd()
        await letOthersRun()
        #expect(!returned.isSet, "the timer still runs")
        clock.releaseFailures()
        #expect(await ends(hosting))
    }

    @Test(
        "the upstream ends while the stop-timeout timer sleeps: run() returns only once that timer ended")
    func upstreamEndsWhileTheTimerSleeps() async throws {
        let (clock, source, service, hosting, returned) = await hostedAfterOneVisit()
        try await waitUntil("the timer sleeps") { clock.pendingFailures == 1 }
        source.control.finish(0)
        try await waitUntil("the upstream ended") { service.storage.upstreamState == .terminated(.finished) }
        let returnedEarly = await becomesTrue { returned.isSet }
        #expect(!returnedEarly, "run() returned while its timer task still sleeps")
        clock.releaseFailures()
        #expect(await ends(hosting))
    }

    @Test("a subscriber comes back during the stop timeout, then run() is cancelled: run() waits for the timer")
    func timerKeptByARejoinIsAwaited() async throws {
        let (clock, _, service, hosting, returned) = await hostedAfterOneVisit()
        try await waitUntil("the timer sleeps") { clock.pendingFailures == 1 }
        let second = SubscriberBox(service.makeAsyncIterator())  // back within the window
        hosting.cancel()
        let returnedEarly = await becomesTrue { returned.isSet }
        #expect(!returnedEarly, "run() returned while the timer task still sleeps")
        clock.releaseFailures()
        #expect(await ends(hosting))
        #expect(await second.next() == nil)
    }

    @Test(
        "a timer replaced by a shorter window (keep-alive after replay expiry) has ended when run() returns")
    func replacedTimerIsAwaited() async throws {
        // Sleep 0: the first keep-alive window (returns at 1 s). Sleep 1: the replay-expiry
        // window, ignoring cancellation. Later sleeps: normal.
        let (clock, source, service, hosting, returned) = await hostedAfterOneVisit(
            plan: { index in index == 1 ? .failWhenReleasedIgnoringCancellation : .normal }, replay: 1,
            started: .whileSubscribed(keepAlive: .seconds(1), replayExpiration: .seconds(100)))
        try await waitUntil("the keep-alive timer sleeps") { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(1))
        try await waitUntil("the replay-expiry window is timed") { clock.pendingFailures == 1 }
        #expect(await source.control.waitForEnd()?.iteration == 0)
        // Back: a new iteration; then the last subscriber leaves again: a 1 s window, shorter
        // than the sleep toward 101 s.
        let second = SubscriberBox(service.makeAsyncIterator())
        let read2 = second.startNext()
        #expect(await read2.value == 1, "the replay")
        let read3 = second.startNext()
        await source.deliver(2, startingIteration: 1, to: read3)
        second.release()
        try await waitUntil("a timer sleeps for the keep-alive") { clock.sleeperCount == 1 }
        hosting.cancel()
        let returnedEarly = await becomesTrue { returned.isSet }
        #expect(!returnedEarly, "run() returned while the replaced timer task still sleeps")
        clock.releaseFailures()
        #expect(await ends(hosting))
    }

    // MARK: - The views and counts

    @Test(
        "subscribe(), events(), buffering(_:) views on a service: buffered elements, then the end, when run() is cancelled"
    )
    func viewsEndWithRun() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded, started: .eagerly)
        let subscription = service.subscribe()
        var viaSubscription = subscription.makeAsyncIterator()
        var viaEvents = service.events(buffering: .bufferingNewest(1)).makeAsyncIterator()
        var viaView = service.buffering(.bounded(8)).makeAsyncIterator()
        try await withTimeout {
            try await service.waitForSubscribers(atLeast: 3)
        }
        let hosting = Task { await service.run() }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        try await waitUntil("all produced") { source.control.nextCalls >= 4 }
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(await viaSubscription.take(10) == [1, 2, 3])
        let events = await viaEvents.readAll()
        #expect(events == [.missed(2), .element(3)])
        #expect(await viaView.take(10) == [1, 2, 3])
    }

    @Test("subscriberCounts and waitForSubscribers on a service, before and across run()")
    func countsAcrossRun() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded)
        let seen = Signal<Int>()
        let observer = Task {
            for await count in service.subscriberCounts { seen.send(count) }
        }
        #expect(await seen.next() == 0)
        let waiting = Task { try await service.waitForSubscribers(atLeast: 2) }
        let a = SubscriberBox(service.makeAsyncIterator())
        #expect(await seen.next() == 1)
        let b = SubscriberBox(service.makeAsyncIterator())
        #expect(await seen.next() == 2)
        try await withTimeout { try await waiting.value }
        let hosting = Task { await service.run() }
        let readA = a.startNext()
        await source.deliver(1, startingIteration: 0, to: readA)
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(await b.next() == 1)
        #expect(await b.next() == nil)
        #expect(await a.next() == nil)
        // Both reached the end: they left.
        while let count = await seen.next("counts down to 0"), count != 0 {}
        #expect(service.subscriberCount == 0)
        observer.cancel()
        _ = await observer.value
    }

    @Test("run() cancelled while the upstream is parked on a full .bounded(1) subscriber: it unparks, run() returns")
    func cancelledWhileParked() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .bounded(1), started: .eagerly)
        let slow = SubscriberBox(service.makeAsyncIterator())
        let hosting = Task { await service.run() }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2, 3)
        try await waitUntil("the producer parks") { service.storage.producersWaitingForRoom == 1 }
        hosting.cancel()
        #expect(await ends(hosting))
        #expect(service.storage.producersWaitingForRoom == 0)
        #expect(await slow.next() == 1)
        #expect(await slow.next() == nil, "2 was never taken: the producer was parked with it")
        #expect(source.control.end(of: 0) == .cancelled)
    }

    // MARK: - Echo

    @Test("a subscriber cancels run() from inside its loop: it and the others get a contiguous prefix, then nil")
    func subscriberCancelsRun() async throws {
        for _ in 0..<50 {
            let log = IterationLog()
            let service = LoggedCounter(log: log).sharedService(buffering: .bounded(4), started: .lazily)
            let hosting = Task { await service.run() }
            let other = SubscriberBox(service.makeAsyncIterator())
            let echoing = service.subscribe()  // joined before its task runs: it sees 0 on
            let echo = Task { () -> [Int] in
                var got: [Int] = []
                for await n in echoing {
                    got.append(n)
                    if n == 5 { hosting.cancel() }
                }
                return got
            }
            let others = Task { () -> [Int] in
                var got: [Int] = []
                while let n = await other.next() { got.append(n) }
                return got
            }
            let got = await echo.value
            #expect(got.count >= 6 && got == Array(0..<got.count))
            let otherGot = await others.value
            #expect(otherGot == Array(0..<otherGot.count))
            #expect(await ends(hosting))
            #expect(log.live == 0)
        }
    }

    // MARK: - Task-local values and priority

    @Test(
        "every iteration, restarts too, runs with run()'s task-local value and priority, never the subscriber's",
        arguments: [SharingStarted.eagerly, .lazily, .whileSubscribed()])
    func taskLocalsAcrossRestarts(started: SharingStarted) async throws {
        let log = IterationLog()
        let service = LoggedCounter(log: log).sharedService(buffering: .bounded(2), started: started)
        let hosting = ServiceTrace.$id.withValue("service") {
            Task(priority: .high) { await service.run() }
        }
        let visited = Signal<Int?>()
        for _ in 0..<3 {
            ServiceTrace.$id.withValue("visitor") {
                _ = Task(priority: .background) { visited.send(await visit(service)) }
            }
            #expect(await visited.next("a visit") != nil)
            try await waitUntil("the visitor left") { service.subscriberCount == 0 }
        }
        hosting.cancel()
        #expect(await ends(hosting))
        let entries = log.entries
        #expect(!entries.isEmpty)
        if case .whileSubscribed = started.strategy {
            #expect(entries.count >= 2, "restarts happened")
        } else {
            #expect(entries.count == 1)
        }
        #expect(entries.allSatisfy { $0.trace == "service" }, "\(entries.map(\.trace))")
        #expect(entries.allSatisfy { $0.priority == .high }, "\(entries.map(\.priority))")
        #expect(log.maxLive == 1)
    }

    // MARK: - run() twice

    @Test("run() while it runs stops the program, whichever call claims first")
    func runTwiceConcurrently() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let service = FedSource().sharedService(started: .lazily)
            let first = Task { await service.run() }
            await service.run()
            await first.value
        }
        expectMessage(result, contains: "already running in another task")
    }

    // MARK: - run() inside a task group, cancelled by the group

    @Test("run() in a discarding task group: cancelAll ends it with every subscriber, 100 times")
    func groupCancellation() async throws {
        for round in 0..<100 {
            let log = IterationLog()
            let service = LoggedCounter(log: log).sharedService(
                replay: 1, buffering: .bounded(3), started: round.isMultiple(of: 2) ? .eagerly : .whileSubscribed())
            let tally = Tally()
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await service.run() }
                for _ in 0..<3 {
                    group.addTask {
                        var last = -1
                        for await n in service {
                            #expect(n > last)
                            last = n
                            tally.add()
                        }
                    }
                }
                await tally.wait(for: 3)
                group.cancelAll()
            }
            #expect(log.live == 0)
            #expect(log.maxLive == 1)
            #expect(service.storage.upstreamState == .terminated(.finished))
        }
    }
}
