// `AsyncSharedSource`'s async `stop`: the next `start` waits for it; subscribers arriving or
// leaving while it is held; a late emitter of a stopping session; a source that fails inside
// `start` or later. Sessions are recorded by `SourceSessions` (Support/SourceSessions.swift),
// whose stops can be held. Order comes from held stops and `waitUntil` on public state;
// deadlines are hang guards only. Races are looped.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedSource: an async stop, a late emitter, a failed source", .serialized, .timeLimit(.minutes(5)))
struct SharedSourceStopTests {
    /// A source whose first session was visited and is now stopping, its stop held; then a
    /// reader joins and asks for an element (it waits for the next session).
    private static func joinWhileAStopIsHeld(
        replay: Int, round: Int
    ) async throws -> (SourceSessions, AsyncSharedSource<Int, Never>, SubscriberTask<Int, Never>) {
        let sessions = SourceSessions()
        let source = sessions.makeSource(replay: replay)
        sessions.hold(true)
        #expect(try await visitScripted(source) == 0)
        try await waitUntil("round \(round): stop held") { sessions.heldCount == 1 }
        sessions.hold(false)
        let reader = await SubscriberTask.join { source.makeAsyncIterator() }
        reader.request()
        return (sessions, source, reader)
    }

    @Test("AsyncSharedSource: a subscriber joins while stop is held and leaves before it returns, 100 rounds")
    func joinAndLeaveDuringAHeldStop() async throws {
        for round in 0..<100 {
            let (sessions, source, reader) = try await Self.joinWhileAStopIsHeld(replay: round % 2, round: round)
            await letOthersRun(round % 5 * 10)
            await reader.cancel()  // its next() waits for the new session: cancelling its task leaves
            await letOthersRun(round % 7 * 10)
            #expect(sessions.starts == 1, "round \(round): started before the held stop returned")
            sessions.releaseStops()
            try await waitUntil("round \(round): every started session stopped") {
                sessions.stops.count == sessions.starts && !sessions.isRunning
            }
            sessions.expectOrderly(running: false)
            // A later subscriber gets a fresh session.
            let value = try await visitScripted(source)
            #expect(value == sessions.starts - 1, "round \(round)")
            try await waitUntil("round \(round): stopped again") { sessions.stops.count == sessions.starts }
            sessions.expectOrderly(running: false)
        }
    }

    @Test("AsyncSharedSource: a subscriber arriving while stop is held waits; start comes only after stop returned")
    func startWaitsForAHeldStop() async throws {
        for round in 0..<50 {
            let (sessions, _, reader) = try await Self.joinWhileAStopIsHeld(replay: round % 2, round: round)
            await letOthersRun()
            #expect(sessions.starts == 1, "round \(round): started before the previous stop returned")
            sessions.releaseStops()
            let first = await reader.response()
            // With replay 1 the cache of session 0 expired at once (replayExpiration zero).
            #expect(first == .success(1), "round \(round): \(String(describing: first))")
            #expect(sessions.overlaps == 0)
            await reader.leave()
            try await sessions.waitForStops(2)
            sessions.expectOrderly(running: false)
        }
    }

    @Test("AsyncSharedSource: a keep-alive window closing into a held stop; joiners wait, start follows the stop")
    func keepAliveIntoAHeldStop() async throws {
        let clock = ScriptedClock()
        let sessions = SourceSessions()
        let source = sessions.makeSource(
            replay: 1, keepAlive: .seconds(5), replayExpiration: .seconds(50), clock: clock)
        for round in 0..<30 {
            let offset = clock.reading
            #expect(try await visitScripted(source) != nil, "round \(round)")
            try await clock.waitForWakes([offset.advanced(by: .seconds(5))])
            sessions.hold(true)
            clock.jump(to: offset.advanced(by: .seconds(5)))
            try await waitUntil("round \(round): stop held") { sessions.heldCount == 1 }
            sessions.hold(false)
            // Joiners while stop is held: greeted with the cache, then they wait for the new session.
            let readers = [
                await SubscriberTask.join { source.makeAsyncIterator() },
                await SubscriberTask.join { source.makeAsyncIterator() },
            ]
            for reader in readers {
                #expect(await reader.next() == round, "round \(round): the replayed value")
                reader.request()
            }
            await letOthersRun()
            #expect(sessions.starts == round + 1, "round \(round): start before stop returned")
            sessions.releaseStops()
            for reader in readers {
                #expect(await reader.response() == .success(round + 1), "round \(round)")
                await reader.leave()
            }
            try await sessions.waitForStops(round + 1)
            #expect(sessions.overlaps == 0 && sessions.doubleStops == 0)
        }
    }

    @Test("AsyncSharedSource: rapid concurrent join/leave with a slow async stop, 200 rounds: never overlapping")
    func churnWithSlowStops() async throws {
        try await withTimeout(seconds: 150) {
            var generator = LCG(seed: 4_004)
            let clock = ScriptedClock()
            let sessions = SourceSessions()
            sessions.setYieldsInStop(50)
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(2), replayExpiration: .seconds(3), clock: clock)
            for round in 0..<200 {
                let visitors = Int.random(in: 1...4, using: &generator)
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors { group.addTask { try await visitScripted(source) } }
                    clock.advance(by: .seconds(Int.random(in: 0...4, using: &generator)))
                    for try await value in group { #expect(value != nil, "round \(round)") }
                }
                #expect(sessions.overlaps == 0 && sessions.doubleStops == 0, "round \(round)")
            }
            try await waitUntil("the last session stopped") {
                if sessions.stops.count != sessions.starts { clock.advance(by: .seconds(10)) }
                return sessions.stops.count == sessions.starts
            }
            #expect(sessions.starts >= 10)
            sessions.expectOrderly(running: false)
        }
    }

    @Test("AsyncSharedSource: a late emitter of a stopping session (send, fail) is ignored; the next session is fresh")
    func lateEmitterDuringStop() async throws {
        for round in 0..<50 {
            let sessions = SourceSessions(keepsStoppedEmitters: true)
            let source = sessions.makeSource()
            sessions.setDuringStop { emitter in
                emitter.send(-1)
                emitter.finish()
            }
            #expect(try await visitScripted(source) == 0)
            try await sessions.waitForStops(1)
            sessions.setDuringStop(nil)
            let reader = await SubscriberTask.join { source.makeAsyncIterator() }
            #expect(await reader.next() == 1, "round \(round): the source ended by a stopped session's emitter")
            // The old emitter, after another session started: ignored too.
            sessions.emitter(0).send(-2)
            sessions.emitter(0).finish()
            sessions.emitter(1).send(5)
            #expect(await reader.next() == 5, "round \(round)")
            await reader.leave()
            try await sessions.waitForStops(2)
            sessions.expectOrderly(running: false)
        }
    }

    @Test("AsyncSharedSource: failing inside start, or later: stop once, later subscribers get the error, no restart")
    func failedSource() async throws {
        for round in 0..<50 {
            let starts = Lock(0)
            let stops = Lock(0)
            let inside = round % 2 == 0
            let keepEmitter = Lock<AsyncSharedSource<Int, TestError>.Emitter?>(nil)
            let source = AsyncSharedSource<Int, TestError>(replay: round % 3, keepAlive: .seconds(round % 2 * 100)) {
                emitter in
                starts.withLock { $0 += 1 }
                emitter.send(1)
                if inside { emitter.fail(.other(round)) } else { keepEmitter.withLock { $0 = emitter } }
                return { stops.withLock { $0 += 1 } }
            }
            let first = await SubscriberTask.join { source.makeAsyncIterator() }
            #expect(await first.next() == 1, "round \(round)")
            if !inside {
                try await waitUntil("round \(round): the emitter") { keepEmitter.withLock { $0 } != nil }
                keepEmitter.withLock { $0 }!.fail(.other(round))
            }
            first.request()
            #expect(await first.response() == .failure(.other(round)), "round \(round)")
            try await waitUntil("round \(round): stop called") { stops.withLock { $0 } == 1 }
            for _ in 0..<3 {
                var late = source.makeAsyncIterator()
                var result: Result<Int?, TestError>
                repeat {
                    do throws(TestError) { result = .success(try await late.next()) } catch { result = .failure(error) }
                } while (try? result.get()) != nil
                #expect(result == .failure(.other(round)), "round \(round): a later subscriber")
            }
            await letOthersRun()
            #expect(starts.withLock { $0 } == 1, "round \(round): start called again")
            #expect(stops.withLock { $0 } == 1, "round \(round): stop count")
            await first.leave()
        }
    }
}
