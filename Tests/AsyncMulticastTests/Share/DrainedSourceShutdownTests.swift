// The drained shutdown of a source (`AsyncSharedSource.finish(drainingWithin:)`) and of a
// shared service (`waitUntilDrained(within:)` after its `run()` returned): the producer
// stops, every subscriber reads what was buffered for it and the end, and the wait returns
// then. Deadlines on a ManualClock that only the test moves; readers paced by the test.

import Testing

@testable import AsyncMulticast

@Suite("Share: drained shutdown", .timeLimit(.minutes(2)))
struct DrainedSourceShutdownTests {
    typealias Source = AsyncSharedSource<Int, Never>

    /// A source whose sessions report "start" and "stop" and keep their emitters.
    static func makeSource(
        clock: ManualClock, events: Signal<String>, emitters: LockedLog<Source.Emitter>, replay: Int = 0
    ) -> Source {
        Source(replay: replay, clock: clock) { emitter in
            emitters.append(emitter)
            events.send("start")
            return { events.send("stop") }
        }
    }

    /// A source on `clock` whose one paced reader started its session and read 1.
    static func startedAndRead(
        clock: ManualClock
    ) async throws -> (
        paths: Source, events: Signal<String>, emitters: LockedLog<Source.Emitter>, emitter: Source.Emitter,
        reader: PacedReader<Int>
    ) {
        let events = Signal<String>()
        let emitters = LockedLog<Source.Emitter>()
        let paths = Self.makeSource(clock: clock, events: events, emitters: emitters)
        let reader = PacedReader(paths.subscribe())
        reader.permits.send(())  // its first read starts the session
        #expect(await events.next("start") == "start")
        let emitter = try #require(emitters.values.first)
        emitter.send(1)
        #expect(await reader.reads.next() == .some(1))
        return (paths, events, emitters, emitter, reader)
    }

    @Test func finishingASourceStopsItsSessionAndReturnsOnceItsSubscribersReadToTheEnd() async throws {
        let (paths, events, emitters, emitter, reader) = try await Self.startedAndRead(clock: ManualClock())
        emitter.send(2)
        emitter.send(3)

        let shutdown = Watched { await paths.finish(drainingWithin: .seconds(60)) }
        #expect(await events.next("stop") == "stop", "the session is cancelled: stop is called")
        emitter.send(4)  // after the end: ignored
        #expect(await reader.read() == .some(2))
        #expect(await reader.read() == .some(3))
        #expect(!shutdown.returned.isSet, "returned before the reader read the end")
        #expect(await reader.read() == .some(nil))
        #expect(await shutdown.task.value == true)
        #expect(await reader.task.value == [1, 2, 3])

        // Ended for good: a later subscriber gets the end at once, and start is not called.
        var late = paths.makeAsyncIterator()
        #expect(await late.next() == nil)
        #expect(emitters.count == 1)
    }

    @Test func finishingASourceNobodyStartedReturnsAtOnceWithoutStartingIt() async throws {
        let events = Signal<String>()
        let emitters = LockedLog<Source.Emitter>()
        let paths = Self.makeSource(clock: ManualClock(), events: events, emitters: emitters, replay: 1)
        #expect(await paths.finish(drainingWithin: .seconds(60)))
        var late = paths.makeAsyncIterator()
        #expect(await late.next() == nil)
        #expect(emitters.count == 0, "start was never called")
    }

    @Test func aSourceWithAStalledSubscriberReturnsFalseAtTheDeadline() async throws {
        let clock = ManualClock()
        let (paths, events, _, emitter, reader) = try await Self.startedAndRead(clock: clock)
        emitter.send(2)  // never read

        let shutdown = Task { await paths.finish(drainingWithin: .seconds(5)) }
        #expect(await events.next("stop") == "stop")
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        #expect(await shutdown.value == false)
        #expect(paths.subscriberCount == 1)
        #expect(await reader.read() == .some(2))
        #expect(await reader.read() == .some(nil))
    }

    @Test func aSharedServiceDrainsAfterItsRunReturned() async throws {
        let clock = ManualClock()
        let (stream, input) = AsyncStream.makeStream(of: Int.self)
        let ticks = stream.sharedService(buffering: .unbounded, started: .eagerly, clock: clock)
        let subscription = ticks.subscribe()
        let reader = PacedReader(subscription)
        let hosting = Task { await ticks.run() }
        input.yield(1)
        #expect(await reader.read() == .some(1))
        input.yield(2)
        try await waitUntil("2 buffered for the reader") { subscription.backlog?.count == 1 }

        hosting.cancel()  // graceful shutdown: the upstream is cancelled
        await hosting.value
        let drained = Watched { await ticks.waitUntilDrained(within: .seconds(60)) }
        #expect(await reader.read() == .some(2))
        #expect(!drained.returned.isSet, "returned before the reader read the end")
        #expect(await reader.read() == .some(nil))
        #expect(await drained.task.value == true)
    }
}
