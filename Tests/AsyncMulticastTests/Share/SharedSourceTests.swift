// AsyncSharedSource: a callback-based producer (the `Monitor` case of the articles that
// motivated the project) started by the first subscriber and stopped when the last one leaves.
// Its keep-alive and replay-expiry windows are timed on a ManualClock.

import Testing

@testable import AsyncMulticast

/// A fake callback-based monitor (think `NWPathMonitor`): `start(handler)` begins calling
/// `handler` with updates, `stop()` ends that. Lock-protected; it records every start and
/// stop in order, and notes a start while already running or still stopping (sessions must
/// never overlap).
///
/// With `holdsStop`, each `stop()` is a slow, synchronous teardown that the test controls: it
/// sends "stopping N", then blocks its thread until the test calls `releaseStop()`. The test
/// can then check that nothing starts while a stop is in progress. A blocked stop occupies a
/// thread of the cooperative pool, so only tests nested in `HeavyAndTimingSensitive` hold
/// stops (see `BlockingGate`).
private final class CallbackMonitor: Sendable {
    private struct State: Sendable {
        var handler: (@Sendable (Int) -> Void)?
        var stopping = false
        var starts = 0
        var stops = 0
        var log: [String] = []
        var overlapped = false
    }
    private let state = Lock(State())
    /// "start N" / "stopping N" (with `holdsStop`) / "stop N", in the order they happen.
    let events = Signal<String>()
    private let holdsStop: Bool
    /// Opened once per held stop by `releaseStop()`.
    private let stopGate = BlockingGate()

    init(holdsStop: Bool = false) {
        self.holdsStop = holdsStop
    }

    /// Applies `change` under the lock; logs and sends the event it names ("start N", "stop N").
    private func record(_ change: (inout State) -> String) {
        let event = self.state.withLock { state -> String in
            let event = change(&state)
            state.log.append(event)
            return event
        }
        self.events.send(event)
    }

    func start(_ handler: @escaping @Sendable (Int) -> Void) {
        self.record { state in
            if state.handler != nil || state.stopping { state.overlapped = true }
            state.handler = handler
            state.starts += 1
            return "start \(state.starts)"
        }
    }

    func stop() {
        if self.holdsStop {
            let number = self.state.withLock { state -> Int in
                state.stopping = true
                return state.stops + 1
            }
            self.events.send("stopping \(number)")
            // Blocks this thread (a synchronous teardown) until the test releases it.
            self.stopGate.wait("held stop \(number)")
        }
        self.record { state in
            state.handler = nil
            state.stopping = false
            state.stops += 1
            return "stop \(state.stops)"
        }
    }

    /// Lets the stop in progress (with `holdsStop`) finish.
    func releaseStop() {
        self.stopGate.open()
    }

    /// An update from the system: delivered to the handler if the monitor is running.
    func emit(_ value: Int) {
        let handler = self.state.withLock { $0.handler }
        handler?(value)
    }

    var starts: Int { self.state.withLock { $0.starts } }
    var stops: Int { self.state.withLock { $0.stops } }
    var log: [String] { self.state.withLock { $0.log } }
    var overlapped: Bool { self.state.withLock { $0.overlapped } }
    var isRunning: Bool { self.state.withLock { $0.handler != nil } }
}

/// Joins a subscriber whose demand starts session `session` (checked): its `next()` is
/// outstanding, to be read with `answer()`.
private func joinAndStart(
    _ source: AsyncSharedSource<Int, TestError>, _ monitor: CallbackMonitor, session: Int = 1,
    _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> SubscriberTask<Int, TestError> {
    let subscriber = await SubscriberTask.join({ source.makeAsyncIterator() }, sourceLocation: sourceLocation)
    subscriber.request()
    #expect(await monitor.events.next() == "start \(session)", comment, sourceLocation: sourceLocation)
    return subscriber
}

@Suite("AsyncSharedSource", .timeLimit(.minutes(2)))
struct SharedSourceTests {
    typealias Source = AsyncSharedSource<Int, TestError>

    /// The articles' shape: the start closure wires the monitor's callback to the emitter and
    /// returns the closure that stops the monitor. Each session's emitter is kept in `emitters`.
    /// Its windows are timed on `clock` if one is given.
    fileprivate static func makeSource(
        _ monitor: CallbackMonitor,
        emitters: LockedLog<Source.Emitter> = LockedLog(),
        replay: Int = 0,
        keepAlive: Duration = .zero,
        replayExpiration: Duration = .zero,
        clock: ManualClock? = nil
    ) -> Source {
        let start: @Sendable (Source.Emitter) -> () -> Void = { emitter in
            emitters.append(emitter)
            monitor.start { value in emitter.send(value) }
            return { monitor.stop() }
        }
        guard let clock else {
            return Source(replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, start: start)
        }
        return Source(
            replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock, start: start)
    }

    /// Joins two subscribers, then lets the first one demand: session 1 has started (checked)
    /// and `a` has a `next()` outstanding, to be read with `answer()`.
    private func joinTwoAndStart(
        _ source: Source, _ monitor: CallbackMonitor, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (a: SubscriberTask<Int, TestError>, b: SubscriberTask<Int, TestError>) {
        let a = await SubscriberTask.join({ source.makeAsyncIterator() }, sourceLocation: sourceLocation)
        let b = await SubscriberTask.join({ source.makeAsyncIterator() }, sourceLocation: sourceLocation)
        a.request()
        #expect(await monitor.events.next() == "start 1", sourceLocation: sourceLocation)
        return (a, b)
    }

    /// A source whose emitters are logged, started by the first of its two subscribers.
    private func twoSubscribersOfAStartedSourceWithItsEmitters(
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (
        Source, CallbackMonitor, emitters: LockedLog<Source.Emitter>, a: SubscriberTask<Int, TestError>,
        b: SubscriberTask<Int, TestError>
    ) {
        let monitor = CallbackMonitor()
        let emitters = LockedLog<Source.Emitter>()
        let source = Self.makeSource(monitor, emitters: emitters)
        let (a, b) = await self.joinTwoAndStart(source, monitor, sourceLocation: sourceLocation)
        return (source, monitor, emitters, a, b)
    }

    @Test("start is called once, on the first demand, not at creation or when joining")
    func startsOnFirstDemand() async {
        let monitor = CallbackMonitor()
        let source = Self.makeSource(monitor)
        await letOthersRun()
        #expect(monitor.starts == 0, "not at creation")
        let a = await SubscriberTask.join { source.makeAsyncIterator() }
        await letOthersRun()
        #expect(monitor.starts == 0, "joining is not demand")

        a.request()
        #expect(await monitor.events.next() == "start 1")
        monitor.emit(1)
        #expect(await a.answer() == 1)

        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        b.request()
        monitor.emit(2)
        #expect(await b.answer() == 2)
        #expect(await a.next() == 2)
        #expect(monitor.starts == 1, "the second subscriber shares the running session")
        await leaveAll(a, b)
        #expect(await monitor.events.next() == "stop 1")
    }

    @Test("stop is called when the last subscriber leaves; the next subscriber starts it again")
    func stopsWhenLastLeavesAndRestarts() async {
        let monitor = CallbackMonitor()
        let source = Self.makeSource(monitor)
        let (a, b) = await self.joinTwoAndStart(source, monitor)
        monitor.emit(1)
        #expect(await a.answer() == 1)
        #expect(await b.next() == 1)

        await a.leave()
        await letOthersRun()
        #expect(monitor.stops == 0, "one subscriber is left")
        #expect(monitor.isRunning)
        b.request()
        await b.cancel()
        #expect(await monitor.events.next() == "stop 1", "the last one left")
        #expect(!monitor.isRunning)
        #expect(source.subscriberCount == 0)

        let c = await joinAndStart(source, monitor, session: 2)
        monitor.emit(5)
        #expect(await c.answer() == 5)
        #expect(monitor.log == ["start 1", "stop 1", "start 2"])
        await c.leave()
        #expect(await monitor.events.next() == "stop 2")
    }

    @Test("emitter.finish() ends every subscriber after its buffered values; stop is called; the source stays ended")
    func finishEndsAllSubscribers() async {
        let (source, monitor, emitters, a, b) = await self.twoSubscribersOfAStartedSourceWithItsEmitters()
        monitor.emit(1)
        monitor.emit(2)
        emitters.values.last?.finish()
        #expect(await a.answer() == 1)
        #expect(await a.drain().elements == [2])
        let drainedB = await b.drain()
        #expect(drainedB.elements == [1, 2])
        #expect(drainedB.failure == nil)
        #expect(await monitor.events.next() == "stop 1")

        emitters.values.last?.send(3)  // ignored: the source ended
        let late = await SubscriberTask.join { source.makeAsyncIterator() }
        let drainedLate = await late.drain()
        #expect(drainedLate.elements.isEmpty)
        #expect(drainedLate.failure == nil)
        await letOthersRun()
        #expect(monitor.starts == 1, "an ended source does not start again")
    }

    @Test("emitter.fail(_:) ends every subscriber with the error")
    func failEndsAllSubscribers() async {
        let (source, monitor, emitters, a, b) = await self.twoSubscribersOfAStartedSourceWithItsEmitters()
        monitor.emit(1)
        emitters.values.last?.fail(TestError.other(5))
        #expect(await a.answer() == 1)
        #expect(await a.drain().failure == TestError.other(5))
        let drainedB = await b.drain()
        #expect(drainedB.elements == [1])
        #expect(drainedB.failure == TestError.other(5))
        #expect(await monitor.events.next() == "stop 1")
        let late = await SubscriberTask.join { source.makeAsyncIterator() }
        #expect(await late.drain().failure == TestError.other(5))
    }

    @Test("a late emitter.send after stop is ignored, also while a newer session runs")
    func lateSendAfterStopIsIgnored() async {
        let monitor = CallbackMonitor()
        let emitters = LockedLog<Source.Emitter>()
        let source = Self.makeSource(monitor, emitters: emitters)
        let a = await joinAndStart(source, monitor)
        monitor.emit(1)
        #expect(await a.answer() == 1)
        await a.leave()
        #expect(await monitor.events.next() == "stop 1")
        let stale = emitters.values[0]
        stale.send(99)  // a late callback of session 1, nobody subscribed

        let b = await joinAndStart(source, monitor, session: 2)
        stale.send(98)  // a late callback of session 1 while session 2 runs
        stale.finish()  // must not end session 2 either
        monitor.emit(5)
        #expect(await b.answer() == 5, "session 1's late values never arrive")
        monitor.emit(6)
        #expect(await b.next() == 6, "session 2 is unaffected by the stale finish")
        await b.leave()
        #expect(await monitor.events.next() == "stop 2")
    }

    @Test("replay: a subscriber joining a running session first gets the latest value")
    func replayLatestValue() async {
        let monitor = CallbackMonitor()
        let source = Self.makeSource(monitor, replay: 1)
        let a = await joinAndStart(source, monitor)
        monitor.emit(1)
        monitor.emit(2)
        #expect(await a.answer() == 1)
        #expect(await a.next() == 2)
        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        #expect(await b.next() == 2)
        await leaveAll(a, b)
        #expect(await monitor.events.next() == "stop 1")
    }

    // MARK: keepAlive and replayExpiration, timed on a manual clock

    @Test(
        "keepAlive: a subscriber arriving before the deadline continues the same session; stop is called when the window ends"
    )
    func keepAliveContinuesSession() async {
        let clock = ManualClock()
        let monitor = CallbackMonitor()
        let source = Self.makeSource(monitor, keepAlive: .seconds(5), clock: clock)
        let a = await joinAndStart(source, monitor)
        monitor.emit(1)
        #expect(await a.answer() == 1)
        await a.leave()
        #expect(await clock.waitForSleepers(count: 1), "the keep-alive window")
        clock.advance(by: .seconds(5) - .nanoseconds(1))
        #expect(clock.sleeperCount == 1, "one nanosecond early: the timer still sleeps")
        #expect(monitor.stops == 0, "still inside the window")
        #expect(monitor.isRunning)

        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        monitor.emit(2)
        #expect(await b.next() == 2, "the running session's values")
        #expect(monitor.starts == 1, "the same session continues")
        await b.leave()  // a new window: 5 s from now

        clock.advance(by: .nanoseconds(1))  // the first deadline
        #expect(await clock.waitForSleepers(count: 1), "the timer sleeps again, until the new deadline")
        #expect(clock.sleeperDeadlines == [ManualClock.Instant(offset: .seconds(10) - .nanoseconds(1))])
        #expect(monitor.stops == 0)
        clock.advance(to: ManualClock.Instant(offset: .seconds(10) - .nanoseconds(1)))
        #expect(await monitor.events.next() == "stop 1", "stopped when the second window ended")

        let c = await joinAndStart(source, monitor, session: 2, "after the window, a new session")
        monitor.emit(3)
        #expect(await c.answer() == 3)
        await c.leave()
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(5))
        #expect(await monitor.events.next() == "stop 2")
        #expect(monitor.log == ["start 1", "stop 1", "start 2", "stop 2"])
        #expect(!monitor.overlapped)
    }

    @Test(
        "replayExpiration: the latest value outlives the stopped session until keepAlive + replayExpiration, then a new session starts afresh"
    )
    func replayExpiresAfterStop() async {
        let clock = ManualClock()
        let monitor = CallbackMonitor()
        let source = Self.makeSource(
            monitor, replay: 1, keepAlive: .seconds(5), replayExpiration: .seconds(30), clock: clock)
        let a = await joinAndStart(source, monitor)
        monitor.emit(1)
        monitor.emit(2)
        #expect(await a.answer() == 1)
        #expect(await a.next() == 2)
        await a.leave()
        #expect(await clock.waitForSleepers(count: 1), "the keep-alive window")
        clock.advance(by: .seconds(5))
        #expect(await monitor.events.next() == "stop 1")
        #expect(await clock.waitForSleepers(count: 1), "the expiry window")
        #expect(clock.sleeperDeadlines == [ManualClock.Instant(offset: .seconds(35))])
        #expect(source.replayCache == [2])

        clock.advance(to: ManualClock.Instant(offset: .seconds(35) - .nanoseconds(1)))
        #expect(clock.sleeperCount == 1)
        #expect(source.replayCache == [2], "one nanosecond early: still there")
        let timer = source.storage.state.withLock { $0.timerTask }
        clock.advance(by: .nanoseconds(1))
        if let timer {
            _ = await withTimeoutOrNil("the timer task") { await timer.value }
        }
        #expect(source.replayCache.isEmpty, "expired")

        let c = await joinAndStart(source, monitor, session: 2)
        monitor.emit(9)
        #expect(await c.answer() == 9, "nothing of session 1 replayed")
        await c.leave()
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(5))
        #expect(await monitor.events.next() == "stop 2")
    }
}

extension HeavyAndTimingSensitive {
    /// The tests whose `stop` blocks its thread until the test releases it: serialized with
    /// the heavy tests, so that two held stops never occupy both threads of a two-core
    /// machine, and a held stop never leaves a loaded machine a single thread.
    @Suite("AsyncSharedSource: a slow stop", .timeLimit(.minutes(2)))
    struct SharedSourceSlowStopTests {
        /// What begins a session's stop: its last subscriber's task cancelled (no keep-alive),
        /// or the keep-alive timer after the last subscriber left.
        enum StopCause: String, CaseIterable, Sendable {
            case lastSubscriberCancelled, keepAliveDeadline
        }

        /// Ends `subscriber`'s session the way `cause` says; the stop then begins.
        private func endSession(
            of subscriber: SubscriberTask<Int, TestError>, by cause: StopCause, clock: ManualClock
        ) async {
            switch cause {
            case .lastSubscriberCancelled:
                await subscriber.cancel()
            case .keepAliveDeadline:
                await subscriber.leave()
                #expect(await clock.waitForSleepers(count: 1), "the keep-alive window")
                clock.advance(by: .seconds(10))
            }
        }

        @Test(
            "stop of session 1 runs before start of session 2, even when the next subscriber arrives during the stop",
            arguments: StopCause.allCases)
        func stopBeforeNextStart(_ cause: StopCause) async throws {
            let clock = ManualClock()
            let monitor = CallbackMonitor(holdsStop: true)
            let keepAlive: Duration = cause == .keepAliveDeadline ? .seconds(10) : .zero
            let source = SharedSourceTests.makeSource(monitor, keepAlive: keepAlive, clock: clock)
            let a = await joinAndStart(source, monitor)
            monitor.emit(1)
            #expect(await a.answer() == 1)
            await self.endSession(of: a, by: cause, clock: clock)
            #expect(await monitor.events.next() == "stopping 1")
            // The next subscriber demands while stop 1 is still running.
            let b = await SubscriberTask.join { source.makeAsyncIterator() }
            b.request()
            try await waitUntil("the new subscriber waits") { source.storage.waitingCount == 1 }
            await letOthersRun()
            #expect(monitor.starts == 1, "no start while stop 1 runs")
            monitor.releaseStop()
            #expect(await monitor.events.next() == "stop 1")
            #expect(await monitor.events.next() == "start 2")
            monitor.emit(2)
            #expect(await b.answer() == 2)
            await self.endSession(of: b, by: cause, clock: clock)
            #expect(await monitor.events.next() == "stopping 2")
            monitor.releaseStop()
            #expect(await monitor.events.next() == "stop 2")
            #expect(monitor.log == ["start 1", "stop 1", "start 2", "stop 2"])
            #expect(!monitor.overlapped, "two sessions never overlap")
        }

        @Test("stop/start ordering under immediate re-subscription, repeated")
        func rapidResubscription() async throws {
            let monitor = CallbackMonitor(holdsStop: true)
            let source = SharedSourceTests.makeSource(monitor)
            for round in 1...30 {
                let subscriber = await SubscriberTask.join { source.makeAsyncIterator() }
                subscriber.request()
                if round > 1 {
                    // The previous session's stop is still running: the demand waits for it.
                    try await waitUntil("round \(round)'s subscriber waits") { source.storage.waitingCount == 1 }
                    #expect(monitor.starts == round - 1, "round \(round): no start while the stop runs")
                    monitor.releaseStop()
                    #expect(await monitor.events.next() == "stop \(round - 1)")
                }
                #expect(await monitor.events.next() == "start \(round)")
                monitor.emit(round)
                #expect(await subscriber.answer() == round)
                await subscriber.cancel()  // the next round subscribes during the stop
                #expect(await monitor.events.next() == "stopping \(round)")
            }
            monitor.releaseStop()
            #expect(await monitor.events.next() == "stop 30")
            var expected: [String] = []
            for round in 1...30 { expected += ["start \(round)", "stop \(round)"] }
            #expect(monitor.log == expected, "each stop before the next start")
            #expect(!monitor.overlapped)
        }

    }
}
