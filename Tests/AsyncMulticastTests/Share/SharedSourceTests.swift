// AsyncSharedSource: a callback-based producer (the `Monitor` case of the articles that
// motivated the project) started by the first subscriber and stopped when the last one leaves.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import AsyncMulticast

/// A fake callback-based monitor (think `NWPathMonitor`): `start(handler)` begins calling
/// `handler` with updates, `stop()` ends that. Lock-protected; it records every start and
/// stop in order, and notes a start while already running or still stopping (sessions must
/// never overlap).
///
/// `stopDuration` simulates a system whose stop call takes a while (it blocks the calling
/// thread, like a synchronous teardown would). It only widens the window in which a wrong
/// implementation would start the next session early; no ordering depends on it.
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
    /// "start N" / "stop N", in the order they happen.
    let events = Signal<String>()
    private let stopMicroseconds: UInt32

    init(stopDuration: Duration = .zero) {
        let (seconds, attoseconds) = stopDuration.components
        self.stopMicroseconds = UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
    }

    func start(_ handler: @escaping @Sendable (Int) -> Void) {
        let event = self.state.withLock { state -> String in
            if state.handler != nil || state.stopping { state.overlapped = true }
            state.handler = handler
            state.starts += 1
            state.log.append("start \(state.starts)")
            return "start \(state.starts)"
        }
        self.events.send(event)
    }

    func stop() {
        if self.stopMicroseconds > 0 {
            self.state.withLock { $0.stopping = true }
            usleep(self.stopMicroseconds)
        }
        let event = self.state.withLock { state -> String in
            state.handler = nil
            state.stopping = false
            state.stops += 1
            state.log.append("stop \(state.stops)")
            return "stop \(state.stops)"
        }
        self.events.send(event)
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

@Suite("AsyncSharedSource", .timeLimit(.minutes(2)))
struct SharedSourceTests {
    typealias Source = AsyncSharedSource<Int, TestError>

    /// The articles' shape: the start closure wires the monitor's callback to the emitter and
    /// returns the closure that stops the monitor. Each session's emitter is kept in `emitters`.
    private func makeSource(
        _ monitor: CallbackMonitor,
        emitters: LockedLog<Source.Emitter> = LockedLog(),
        replay: Int = 0
    ) -> Source {
        Source(replay: replay) { emitter in
            emitters.append(emitter)
            monitor.start { value in emitter.send(value) }
            return { monitor.stop() }
        }
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

    @Test("start is called once, on the first demand, not at creation or when joining")
    func startsOnFirstDemand() async {
        let monitor = CallbackMonitor()
        let source = self.makeSource(monitor)
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
        await a.leave()
        await b.leave()
        #expect(await monitor.events.next() == "stop 1")
    }

    @Test("stop is called when the last subscriber leaves; the next subscriber starts it again")
    func stopsWhenLastLeavesAndRestarts() async {
        let monitor = CallbackMonitor()
        let source = self.makeSource(monitor)
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

        let c = await SubscriberTask.join { source.makeAsyncIterator() }
        c.request()
        #expect(await monitor.events.next() == "start 2")
        monitor.emit(5)
        #expect(await c.answer() == 5)
        #expect(monitor.log == ["start 1", "stop 1", "start 2"])
        await c.leave()
        #expect(await monitor.events.next() == "stop 2")
    }

    @Test("stop of session 1 runs before start of session 2, even when the next subscriber arrives at once")
    func stopBeforeNextStart() async {
        let monitor = CallbackMonitor(stopDuration: .milliseconds(100))
        let source = self.makeSource(monitor)
        let a = await SubscriberTask.join { source.makeAsyncIterator() }
        a.request()
        #expect(await monitor.events.next() == "start 1")
        monitor.emit(1)
        #expect(await a.answer() == 1)
        await a.cancel()
        // The next subscriber demands right away, without waiting for the stop.
        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        b.request()
        #expect(await monitor.events.next() == "stop 1")
        #expect(await monitor.events.next() == "start 2")
        monitor.emit(2)
        #expect(await b.answer() == 2)
        await b.leave()
        #expect(await monitor.events.next() == "stop 2")
        #expect(monitor.log == ["start 1", "stop 1", "start 2", "stop 2"])
        #expect(!monitor.overlapped, "two sessions never overlap")
    }

    @Test("stop/start ordering under immediate re-subscription, repeated")
    func rapidResubscription() async {
        let monitor = CallbackMonitor(stopDuration: .milliseconds(2))
        let source = self.makeSource(monitor)
        for round in 1...30 {
            let subscriber = await SubscriberTask.join { source.makeAsyncIterator() }
            subscriber.request()
            if round > 1 {
                #expect(await monitor.events.next() == "stop \(round - 1)")
            }
            #expect(await monitor.events.next() == "start \(round)")
            monitor.emit(round)
            #expect(await subscriber.answer() == round)
            await subscriber.cancel()  // the next round subscribes without waiting for stop
        }
        #expect(await monitor.events.next() == "stop 30")
        var expected: [String] = []
        for round in 1...30 { expected += ["start \(round)", "stop \(round)"] }
        #expect(monitor.log == expected, "each stop before the next start")
        #expect(!monitor.overlapped)
    }

    @Test("emitter.finish() ends every subscriber after its buffered values; stop is called; the source stays ended")
    func finishEndsAllSubscribers() async {
        let monitor = CallbackMonitor()
        let emitters = LockedLog<Source.Emitter>()
        let source = self.makeSource(monitor, emitters: emitters)
        let (a, b) = await self.joinTwoAndStart(source, monitor)
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
        let monitor = CallbackMonitor()
        let emitters = LockedLog<Source.Emitter>()
        let source = self.makeSource(monitor, emitters: emitters)
        let (a, b) = await self.joinTwoAndStart(source, monitor)
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
        let source = self.makeSource(monitor, emitters: emitters)
        let a = await SubscriberTask.join { source.makeAsyncIterator() }
        a.request()
        #expect(await monitor.events.next() == "start 1")
        monitor.emit(1)
        #expect(await a.answer() == 1)
        await a.leave()
        #expect(await monitor.events.next() == "stop 1")
        let stale = emitters.values[0]
        stale.send(99)  // a late callback of session 1, nobody subscribed

        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        b.request()
        #expect(await monitor.events.next() == "start 2")
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
        let source = self.makeSource(monitor, replay: 1)
        let a = await SubscriberTask.join { source.makeAsyncIterator() }
        a.request()
        #expect(await monitor.events.next() == "start 1")
        monitor.emit(1)
        monitor.emit(2)
        #expect(await a.answer() == 1)
        #expect(await a.next() == 2)
        let b = await SubscriberTask.join { source.makeAsyncIterator() }
        #expect(await b.next() == 2)
        await a.leave()
        await b.leave()
        #expect(await monitor.events.next() == "stop 1")
    }
}
