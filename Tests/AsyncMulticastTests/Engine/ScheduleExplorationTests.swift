// The library's real code under thousands of schedules of its tasks (Support/ScheduleExplorer.swift):
// each test is a small scenario through the public API, run under random walks and PCT schedules,
// every one of which must pass. The scenarios are the races found by hand in the suites of
// send(contentsOf:), the timer, sharedService and multicast (SendContentsOfCompletionTests,
// MisbehavingClockTimerTests, SharedServiceRunTests, MulticastTests) and the restart
// behind an intermittent CI timeout of CancellationTests; the first tests check the explorer
// itself on planted bugs.
//
// They run only when ASYNC_MULTICAST_SCHEDULES is set, in a process of their own (the runtime
// hooks are process-wide), as CI's step 3 does:
//
//   ASYNC_MULTICAST_SCHEDULES=1 SWIFT_DETERMINISTIC_HASHING=1 swift test --skip-build --filter ScheduleExplorationTests
//
// A scenario waits only through continuations (signals, streams, task values) or `run.until`,
// never with a hang guard or a sleep: a wait that cannot end is a deadlock, which the scheduler
// reports with the schedule that led to it. It checks with `run.check`, not `#expect`.

import Testing

@testable import AsyncMulticast

@Suite(.serialized, .enabled(if: ScheduleExploration.isEnabled, ScheduleExploration.skipped))
struct ScheduleExplorationTests {
    // MARK: - The explorer, on planted bugs

    @Test("the explorer finds a planted lost update, and replays its failing schedules the same way")
    func explorerFindsALostUpdate() async {
        guard case .explore = ScheduleExploration.mode else { return }
        let report = await exploreSchedules("a planted lost update", atMost: 300, recordingIssues: false) { run in
            let counter = Lock(0)
            let add: @Sendable () async -> Void = {
                let seen = counter.withLock { $0 }
                await Task.yield()
                counter.withLock { $0 = seen + 1 }
            }
            let first = Task { await add() }
            let second = Task { await add() }
            await first.value
            await second.value
            run.check(counter.withLock { $0 } == 2, "an update was lost")
        }
        #expect(report.failedCount > 0, "no schedule lost the update")
        #expect(report.failedCount < report.schedules, "every schedule lost the update")
        #expect(!report.failures.isEmpty && report.failures.allSatisfy { $0.replayedIdentically == true })
    }

    @Test("the explorer reports a planted lost wake-up as a deadlock")
    func explorerFindsADeadlock() async {
        guard case .explore = ScheduleExploration.mode else { return }
        let report = await exploreSchedules("a planted lost wake-up", atMost: 300, recordingIssues: false) { run in
            let waiter = Lock<CheckedContinuation<Void, Never>?>(nil)
            let sleeping = Task {
                await withCheckedContinuation { continuation in waiter.withLock { $0 = continuation } }
            }
            // Resumes the waiter only if it is already waiting: otherwise the wake-up is lost.
            let waking = Task { waiter.withLock { $0 }?.resume() }
            await waking.value
            await sleeping.value
        }
        #expect(report.failures.contains { $0.outcome.end == .deadlock })
        #expect(report.failedCount < report.schedules, "every schedule deadlocked")
    }

    @Test("a condition that can never hold ends a schedule as stuck, naming what it waited for")
    func explorerReportsAWaitThatCannotEnd() async {
        guard case .explore = ScheduleExploration.mode else { return }
        let report = await exploreSchedules("a wait that cannot end", atMost: 30, recordingIssues: false) { run in
            await run.until("a flag nobody sets") { false }
        }
        #expect(report.failedCount == report.schedules)
        #expect(report.failures.first?.outcome.end == .stuck(waitingFor: ["a flag nobody sets"]))
    }

    #if compiler(>=6.3) && os(Linux)
        @Test("a sleep runs in virtual time: an hour passes at once, once nothing else can run")
        func sleepsRunInVirtualTime() async {
            guard case .explore = ScheduleExploration.mode else { return }
            let report = await exploreSchedules("an hour's sleep", atMost: 30, recordingIssues: false) { run in
                let start = ContinuousClock.now
                let done = LockedFlag()
                let sleeper = Task {
                    try? await Task.sleep(for: .seconds(3600))
                    run.check(done.isSet, "the sleep ended while another task could still run")
                }
                let worker = Task {
                    for _ in 0..<10 { await Task.yield() }
                    done.set()
                }
                await worker.value
                await sleeper.value
                run.check(ContinuousClock.now - start < .seconds(60), "an hour's sleep took real time")
            }
            #expect(report.failedCount == 0)
        }
    #endif

    // MARK: - share(): a restart after a cancelled iteration

    // CancellationTests.restartWaitsUntilTheCancelledIterationHasEnded timed out after 60 s once,
    // in a fresh clone's CI run on a loaded 2-core machine (TSan step), and passes alone. Either a
    // restart can be lost when the cancelled iteration's late element arrives while a new
    // subscriber waits, or the test starved. The two tests below answer it: the test's own steps,
    // and the same race with the order left entirely to the schedule.

    @Test("CancellationTests' restart test, step by step as written, finishes under every schedule")
    func restartTestFinishesUnderEverySchedule() async {
        await exploreSchedules("restartWaitsUntilTheCancelledIterationHasEnded, as written") { run in
            let probe = Probe()
            let source = StubbornSource()
            let shared = Instrumented(source, probe: probe).share()
            let a = SubscriberBox(shared.makeAsyncIterator())
            let aFirst = a.startNext()
            _ = await source.control.pulled.nextUnguarded()
            source.control.answer(0)
            run.check(await aFirst.value == 0, "a's first element")
            let aNext = a.startNext()
            _ = await source.control.pulled.nextUnguarded()  // the second pull, which ignores cancellation
            await run.until("the upstream to block") { probe.snapshot.activePulls == 1 }
            aNext.cancel()
            run.check(await aNext.value == nil, "a's cancelled next() returns nil")
            let b = SubscriberBox(shared.makeAsyncIterator())
            let bNext = b.startNext()
            await run.until("b to wait, or a second iteration") {
                shared.storage.waitingCount == 1 || probe.iterators == 2
            }
            await letOthersRun()  // 200 yields (1,000 when it timed out, at 7c3e370)
            run.check(probe.iterators == 1, "a new base iterator while the old one is still in next()")
            run.note("the cancelled iteration's late element")
            source.control.answer(1)
            _ = await source.control.pulled.nextUnguarded()  // the new iteration's first pull
            source.control.answer(100)
            let value = await bNext.value
            run.check(value == 100, "b got \(String(describing: value)), not the new iteration's 100")
            let stats = probe.snapshot
            run.check(stats.iterators == 2, "\(stats.iterators) base iterators")
            run.check(!stats.iteratorMadeDuringPull, "a base iterator was made while the first was still pulling")
            run.check(stats.maxActivePulls == 1, "\(stats.maxActivePulls) pulls at once")
            _ = await source.control.pulled.nextUnguarded()  // the new iteration pulls on
            b.release()
            source.control.answer(nil)
            run.atEnd { run.check(probe.liveIterators == 0, "an iteration is left") }
        }
    }

    @Test("a restart after a cancelled iteration is never lost, wherever its late element and the new subscriber fall")
    func restartAfterACancelledIterationIsNeverLost() async {
        await exploreSchedules("a restart while the cancelled iteration's late element arrives") { run in
            let probe = Probe()
            let source = PermitSource()
            // .bounded(1) parks the upstream whenever a subscriber holds an element.
            let parks = run.choose("share(buffering: .bounded(1)) (1), or the default .bounded(64)", 0...1) == 1
            let shared = Instrumented(source, probe: probe).share(buffering: parks ? .bounded(1) : .bounded(64))
            let a = SubscriberBox(shared.makeAsyncIterator())
            let aFirst = a.startNext()
            _ = await source.pulled.nextUnguarded()
            source.allow(1)
            run.check(await aFirst.value == 1, "a's first element")
            let aNext = a.startNext()
            _ = await source.pulled.nextUnguarded()  // the second pull, which ignores cancellation
            if run.choose("a waits in next() before its read is cancelled (1)", 0...1) == 1 {
                await run.until("a to wait") { shared.storage.waitingCount == 1 }
            }
            // A waiting subscriber leaves inside cancel(); one whose next() has not begun leaves
            // when it begins, in its cancelled task.
            run.note("a's read cancelled")
            aNext.cancel()
            // From here on the schedule orders everything: a's task ending, b joining and
            // waiting, the late element, the upstream tasks' steps.
            let aEnded = Task { await aNext.value }
            let bRead = Task { () -> (SubscriberBox<Int, Never>, Int?, Bool) in
                let b = SubscriberBox(shared.makeAsyncIterator())
                let alone = shared.subscriberCount == 1  // read in the step b joined in
                run.note(alone ? "b joined alone" : "b joined while a was still there")
                let value = await b.next()
                run.note("b got \(String(describing: value))")
                return (b, value, alone)
            }
            let feeder = Task {
                run.note("the late element, and every one after it")
                source.allowAll()
            }
            run.check(await aEnded.value == nil, "a's cancelled next() returns nil")
            let (b, value, alone) = await bRead.value
            await feeder.value
            let stats = probe.snapshot
            if alone {
                // The last subscriber had left: the iteration was cancelled, and b started one.
                run.check(
                    value.map { $0 > 1000 } == true,
                    "b joined alone and got \(String(describing: value)), not iteration 1's first element")
                run.check(stats.iterators == 2, "b joined alone: \(stats.iterators) base iterators")
            } else {
                // a was still there: the iteration went on, and its late element was like any other.
                run.check(value.map { $0 < 1000 } == true, "b joined beside a and got \(String(describing: value))")
                run.check(stats.iterators == 1, "b joined beside a: \(stats.iterators) base iterators")
            }
            run.check(!stats.iteratorMadeDuringPull, "a base iterator was made while the first was still pulling")
            run.check(stats.maxActivePulls == 1, "\(stats.maxActivePulls) pulls at once")
            b.release()
            source.end()
            run.atEnd { run.check(probe.liveIterators == 0, "an iteration is left") }
        }
    }

    // MARK: - Subjects: send(contentsOf:) and completion

    @Test("send(contentsOf:) racing finish(): the held stream always sees .cancelled; nothing is lost or repeated")
    func sendContentsOfCancelsTheSequenceAtCompletion() async {
        await exploreSchedules("send(contentsOf:) racing finish()") { run in
            let bounded = run.choose("bounded(1) (1) or unbounded (0)", 0...1) == 1
            let completeAfter = run.choose("elements read before finish()", 0...3)
            let held = HeldStream(prefilled: 0..<4)  // never finished: only a cancelled next() ends it
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: bounded ? .bounded(1) : .unbounded)
            let reader = SubscriberBox(subject.makeAsyncIterator())
            let sequence = held.counted
            let sending = Task {
                await subject.send(contentsOf: sequence)
                run.note("send(contentsOf:) returned")
            }
            let (reading, finishing) = reader.readAll(runningAfter: completeAfter) {
                run.note("finish()")
                subject.finish()
            }
            await sending.value
            let ends = held.ends.all  // the call returns after the sequence saw the cancellation
            await finishing.value
            let received = await reading.value
            // A call that found the subject completed returns without iterating (documented).
            let neverIterated = ends.isEmpty && held.countedPulls == 0
            run.check(
                ends == [.cancelled] || neverIterated,
                "the held stream ended \(ends) after \(held.countedPulls) pulls, \(received.count) elements received")
            run.check(received == Array(0..<received.count), "received \(received)")
            run.check(
                held.countedPulls <= received.count + 2,
                "\(held.countedPulls) pulls for \(received.count) elements: one ignored after the completion, one more")
            withExtendedLifetime(held) {}
        }
    }

    // MARK: - The keep-alive window on a clock set back

    @Test("a keep-alive window on a clock set back while it is open closes when its sleep reaches the deadline")
    func keepAliveWindowOnAClockSetBack() async {
        await exploreSchedules("a keep-alive window and a clock set back") { run in
            let clock = ScriptedClock()
            let log = StagedLog()
            let shared = StagedBase(log: log).share(keepAlive: .seconds(10), clock: clock)
            do {
                var visitor = shared.makeAsyncIterator()
                run.check(await visitor.next() == 0, "iteration 0's first element")
            }  // the visitor leaves at 0: the window's deadline is 10
            let setBackOnWake = run.choose("the clock set back to -100 as the sleep returns (1)", 0...1) == 1
            // The timer task runs in between, wherever the schedule puts it.
            let moving = Task {
                log.enter("set back to -50")
                clock.jump(to: .seconds(-50))
                await Task.yield()
                log.enter("at 9")
                clock.jump(to: .seconds(9))
                await Task.yield()
                if setBackOnWake { clock.setBackOnNextWake(to: scriptedInstant(.seconds(-100))) }
                log.enter("at 10")
                clock.jump(to: .seconds(10))
            }
            await moving.value
            await run.until("iteration 0 to end") { log.end(of: 0) != nil }
            let end = log.end(of: 0)
            run.check(end?.stage == "at 10", "the window closed in stage \(String(describing: end?.stage))")
            run.check(end?.end == .cancelled, "iteration 0 ended \(String(describing: end?.end))")
            run.check(log.iterations == 1, "\(log.iterations) iterations")
            run.atEnd { run.check(clock.sleeperCount == 0, "a timer is left asleep") }
        }
    }

    // MARK: - A hosted run()'s end and the replay-expiry window

    @Test("run() ending while the replay-expiry window is open expires the replay; run() leaves no timer asleep")
    func hostedReplayExpiresWhenRunEnds() async {
        await exploreSchedules("replay expiry at a hosted run()'s end") { run in
            let clock = ManualClock()
            let source = FedSource()
            let (service, hosting) = source.hostedReplayService(clock: clock)
            let reader = SubscriberBox(service.makeAsyncIterator())
            let read = reader.startNext()
            _ = await source.control.started.nextUnguarded()
            source.control.yield(1)
            run.check(await read.value == 1, "the first element")
            let advances = run.choose("the clock reaches the window's end (1)", 0...1) == 1
            // Whether run() had stopped hosting (it took its cancellation) when the subscriber
            // left: read in the same step as the leave. The cancellation itself may come earlier:
            // run() takes it only where it waits.
            let stoppedBeforeTheLeave = Lock<Bool?>(nil)
            let leaving = Task {
                stoppedBeforeTheLeave.withLock { $0 = service.storage.state.withLock { $0.machine.terminal != nil } }
                reader.release()  // the last subscriber leaves: the upstream stops, the window opens
                run.note("left")
            }
            let cancelling = Task {
                hosting.cancel()
                run.note("run() cancelled")
            }
            let moving = Task {
                guard advances else { return }
                clock.advance(by: .seconds(10))
                run.note("the clock at the window's end")
            }
            await hosting.value
            run.check(clock.sleeperCount == 0, "run() returned with a timer asleep")
            await leaving.value
            await cancelling.value
            await moving.value
            // Left while run() hosted: the window was open (or the clock had closed it) when run()
            // ended, so the replay expired. Left after: the replay survives, as share()'s does.
            let kept = stoppedBeforeTheLeave.withLock { $0 } == true
            run.check(
                service.replayCache == (kept ? [1] : []),
                "left \(kept ? "after" : "before") run() stopped: the replay cache is \(service.replayCache)")
            var late = service.makeAsyncIterator()
            let first = await late.next()
            run.check(first == (kept ? 1 : nil), "a late subscriber got \(String(describing: first))")
        }
    }

    // MARK: - multicast(): cancel() and a parked producer

    @Test("multicast cancel() with the producer parked on a full .bounded(2) subscriber, or about to: it unparks")
    func multicastCancelReleasesAParkedProducer() async {
        await exploreSchedules("a multicast cancel and a parked producer") { run in
            let probe = Probe()
            let multicast = Instrumented((0..<10).async, probe: probe).multicast(buffering: .bounded(2))
            let holder = SubscriberBox(multicast.makeAsyncIterator())  // reads nothing before the cancel
            let reader = SubscriberBox(multicast.makeAsyncIterator())
            let cancelAfter = run.choose("elements the reader takes before cancel()", 0...2)
            let connection = multicast.connect()
            let (reading, cancelling) = reader.readAll(runningAfter: cancelAfter) {
                run.note("cancel()")
                connection.cancel()
            }
            await cancelling.value
            let read = await reading.value
            var kept: [Int] = []
            while let element = await holder.next() { kept.append(element) }
            // Every offered element reached both (lossless); the holder's bound parks the producer.
            run.check(kept == Array(0..<kept.count) && kept.count <= 2, "the holder kept \(kept)")
            run.check(read == kept, "the reader read \(read), the holder kept \(kept)")
            run.check(probe.pulls <= kept.count + 1, "\(probe.pulls) pulls for \(kept.count) elements offered")
            run.atEnd { run.check(probe.liveIterators == 0, "the cancelled iteration is left") }
        }
    }

    // MARK: - The upstream's priority

    @Test("a connect() from a background task raises the upstream to a waiting subscriber, not to one that left")
    func connectRaisesTheUpstreamToAWaitingSubscriber() async {
        await exploreSchedules("a connect() while a .high subscriber waits") { run in
            // The base records the priority of the task its `next()` returns in.
            let (gate, open) = AsyncStream.makeStream(of: Int.self)
            let seen = LockedLog<TaskPriority>()
            let multicast = HookedStream(gate, pulled: { _ in seen.append(Task.currentPriority) }).multicast()
            let leaves = run.choose("the .high subscriber leaves before connect()", 0...1) == 1
            let high = Task(priority: .high) { () -> Int? in
                var iterator = multicast.makeAsyncIterator()
                return await iterator.next(isolation: nil)
            }
            await run.until("the .high subscriber waits") { multicast.storage.waitingCount == 1 }
            if leaves {
                high.cancel()
                await run.until("the .high subscriber left") { multicast.storage.subscriberCount == 0 }
            }
            await Task(priority: .background) {
                run.note("connect()")
                _ = multicast.connect()
            }.value
            // connect() raised the new task before it returned: what the base sees from now on.
            open.yield(1)
            await run.until("the base was asked for an element") { seen.count == 1 }
            open.finish()
            let received = await high.value
            run.check(received == (leaves ? nil : 1), "the .high subscriber received \(received as Any)")
            let expected: TaskPriority = leaves ? .medium : .high
            run.check(seen.values == [expected], "the base ran at \(seen.values), expected \(expected)")
        }
    }
}

// MARK: - Helpers

extension Signal {
    /// The next value sent, with no hang guard: under the explorer, a wait that cannot end is a
    /// deadlock, which the scheduler reports.
    func nextUnguarded() async -> Value? {
        var iterator = self.stream.makeAsyncIterator()
        return await iterator.next()
    }
}

/// The iterations of a `StagedBase`, each an `AsyncStream` that first yields its index; records
/// the scenario's stage (`enter(_:)`) at which each one ended.
private final class StagedLog: Sendable {
    private struct State {
        var stage = "start"
        var iterations = 0
        var ends: [Int: (end: StreamEnd, stage: String)] = [:]
    }
    private let state = Lock(State())

    func enter(_ stage: String) { self.state.withLock { $0.stage = stage } }
    var iterations: Int { self.state.withLock { $0.iterations } }
    func end(of index: Int) -> (end: StreamEnd, stage: String)? { self.state.withLock { $0.ends[index] } }

    fileprivate func begin() -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let index = self.state.withLock { state in
            defer { state.iterations += 1 }
            return state.iterations
        }
        continuation.onTermination = { termination in
            self.state.withLock { $0.ends[index] = (StreamEnd(termination), $0.stage) }
        }
        continuation.yield(index)
        return stream
    }
}

private struct StagedBase: AsyncSequence, Sendable {
    let log: StagedLog
    func makeAsyncIterator() -> AsyncStream<Int>.Iterator { self.log.begin().makeAsyncIterator() }
}

/// A base whose pulls ignore cancellation: each waits for a permit (`allow(_:)`, or
/// `allowAll()`), first come, first served, and returns 1000 × its iteration's index + its number in that iteration (the
/// first iteration's first pull returns 1, the second's 1001), or `nil` once `end()` was called.
/// Sends `pulled` each time a pull starts waiting.
private final class PermitSource: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    private struct State {
        var permits = 0
        var unlimited = false
        var ended = false
        var waiting: [CheckedContinuation<Bool, Never>] = []
        var iterations = 0
    }
    private let state = Lock(State())
    let pulled = Signal<Void>()

    struct AsyncIterator: AsyncIteratorProtocol {
        let source: PermitSource
        let iteration: Int
        var pulls = 0

        mutating func next() async -> Int? {
            self.pulls += 1
            guard await self.source.permit() else { return nil }
            return self.iteration * 1000 + self.pulls
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        let iteration = self.state.withLock { state in
            defer { state.iterations += 1 }
            return state.iterations
        }
        return AsyncIterator(source: self, iteration: iteration)
    }

    /// Lets `count` more pulls return an element.
    func allow(_ count: Int) {
        self.resume(returning: true) { state in
            state.permits += count
            let resumed = Array(state.waiting.prefix(state.permits))
            state.waiting.removeFirst(resumed.count)
            state.permits -= resumed.count
            return resumed
        }
    }

    /// Lets every pull, waiting or to come, return an element.
    func allowAll() {
        self.resume(returning: true) { state in
            state.unlimited = true
            defer { state.waiting = [] }
            return state.waiting
        }
    }

    /// Every pull, waiting or to come, returns `nil`.
    func end() {
        self.resume(returning: false) { state in
            state.ended = true
            defer { state.waiting = [] }
            return state.waiting
        }
    }

    /// Resumes, after the lock, the waiting pulls that `change` takes under it.
    private func resume(
        returning permitted: Bool, _ change: (inout State) -> [CheckedContinuation<Bool, Never>]
    ) {
        let resumed = self.state.withLock { change(&$0) }
        for pull in resumed { pull.resume(returning: permitted) }
    }

    private func permit() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = self.state.withLock { state -> Bool? in
                if state.ended { return false }
                if state.unlimited { return true }
                if state.permits > 0 {
                    state.permits -= 1
                    return true
                }
                state.waiting.append(continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) } else { self.pulled.send(()) }
        }
    }
}
