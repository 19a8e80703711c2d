// keepAlive — share(buffering:keepAlive:) and replay(_:buffering:keepAlive:).
//
// "Arrives inside the window" uses a 60 s window so it cannot flake; "cancelled when the
// window ends" uses 50 ms and just awaits the onTermination signal under a hang guard. The
// transitions behind the window are checked in Engine/StateMachineKeepAliveTests.swift.

import Testing
@testable import AsyncMulticast

@Suite("keepAlive", .timeLimit(.minutes(2)))
struct KeepAliveTests {
    /// One subscriber starts the upstream, reads `values`, and leaves.
    private func startReadAndLeave(
        _ shared: AsyncShareSequence<FedSource>, _ source: FedSource, _ values: Int...,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let a = await SubscriberTask.join({ shared.makeAsyncIterator() }, sourceLocation: sourceLocation)
        var read: [Int] = []
        if let first = await a.startIteration(of: source, yielding: values, sourceLocation: sourceLocation) {
            read.append(first)
        }
        read += await a.take(values.count - 1, sourceLocation: sourceLocation)
        #expect(read == values, sourceLocation: sourceLocation)
        await a.leave(sourceLocation: sourceLocation)
        #expect(shared.subscriberCount == 0, sourceLocation: sourceLocation)
    }

    @Test("share(keepAlive:): a subscriber arriving inside the window continues the same iteration")
    func shareArrivalInsideWindowContinues() async {
        let source = FedSource()
        let shared = source.share(keepAlive: .seconds(60))
        await self.startReadAndLeave(shared, source, 1, 2)
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "still running inside the window")

        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        source.control.yield(3)
        #expect(await b.next() == 3, "elements continue from the same base iterator")
        #expect(source.control.iteratorCount == 1, "no restart")
        await b.leave()
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "leaving again opens a new window")
    }

    @Test("share(buffering:keepAlive:): the upstream is cancelled when the window ends; the next subscriber restarts it")
    func shareCancelledWhenWindowEnds() async {
        let source = FedSource()
        let shared = source.share(buffering: .unbounded, keepAlive: .milliseconds(50))
        await self.startReadAndLeave(shared, source, 1)
        let ended = await source.control.waitForEnd()
        #expect(ended?.iteration == 0)
        #expect(ended?.end == .cancelled, "onTermination(.cancelled) after the window")

        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        b.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(7)
        #expect(await b.answer() == 7)
        #expect(source.control.iteratorCount == 2)
        await b.leave()
        let endedAgain = await source.control.waitForEnd()
        #expect(endedAgain?.iteration == 1)
        #expect(endedAgain?.end == .cancelled)
    }

    @Test("replay(_:buffering:keepAlive:): inside the window, the replay then the same iteration's elements")
    func replayArrivalInsideWindowContinues() async {
        let source = FedSource()
        let replayed = source.replay(1, keepAlive: .seconds(60))
        await self.startReadAndLeave(replayed, source, 1, 2)
        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 2, "the replayed element")
        source.control.yield(3)
        #expect(await b.next() == 3)
        #expect(source.control.iteratorCount == 1, "no restart")
        #expect(source.control.end(of: 0) == nil)
        await b.leave()
    }

    @Test("replay(_:buffering:keepAlive:): cancelled when the window ends; the cache survives")
    func replayCancelledWhenWindowEnds() async {
        let source = FedSource()
        let replayed = source.replay(1, buffering: .unbounded, keepAlive: .milliseconds(50), replayExpiration: .seconds(Int64.max))
        await self.startReadAndLeave(replayed, source, 1, 2)
        let ended = await source.control.waitForEnd()
        #expect(ended?.end == .cancelled)

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 2, "the cache survives the window's end")
        b.request()
        await source.control.waitForStart(of: 1)
        source.control.yield(5)
        #expect(await b.answer() == 5)
        await b.leave()
    }

    @Test("the upstream keeps running inside the window: what it produces meanwhile is replayed to the next subscriber")
    func upstreamKeepsRunningInsideWindow() async throws {
        let source = FedSource()
        let replayed = source.replay(1, keepAlive: .seconds(60))
        await self.startReadAndLeave(replayed, source, 1, 2)
        // Nobody is subscribed; the upstream is waiting in its next() call.
        let pulls = source.control.nextCalls
        source.control.yield(3)
        // Once the upstream asks for the element after 3, 3 has been produced.
        try await waitUntil("the upstream produced 3 and pulled again") { source.control.nextCalls > pulls }

        let b = await SubscriberTask.join { replayed.makeAsyncIterator() }
        #expect(await b.next() == 3, "produced inside the window by the same iteration")
        source.control.yield(4)
        #expect(await b.next() == 4)
        #expect(source.control.iteratorCount == 1)
        await b.leave()
    }

    @Test("leaving and coming back 2,000 times inside the window re-arms one timer task")
    func oneTimerTaskForManyDepartures() async {
        let source = FedSource()
        let shared = source.share(keepAlive: .seconds(3_600))
        await self.startReadAndLeave(shared, source, 1)
        let timer = shared.storage.state.withLock { $0.timerTask }
        #expect(timer != nil, "the first departure started the timer")
        for _ in 0..<2_000 {
            var iterator: SharedIterator<Int, Never>? = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 1)
            iterator = nil  // leaves: a new window opens
            _ = iterator
        }
        #expect(shared.storage.state.withLock { $0.timerTask } == timer, "still the first timer task")
        #expect(source.control.iteratorCount == 1, "the same iteration throughout")
        #expect(source.control.end(of: 0) == nil)
    }

    @Test("a keep-alive too long for any clock is accepted and never ends the iteration", arguments: [
        Duration.seconds(Int64.max),
        Duration(secondsComponent: .max, attosecondsComponent: 999_999_999_999_999_999),
        Duration.seconds(1e19),
    ])
    func keepAliveBeyondAnyClock(keepAlive: Duration) async throws {
        let source = FedSource()
        let shared = source.share(keepAlive: keepAlive)
        #expect(shared.storage.keepAlive == MulticastStorage<Int, Never>.longestKeepAlive)
        await self.startReadAndLeave(shared, source, 1)
        // The timer task starts, computes its deadline and sleeps (a day at most per sleep):
        // wait until it has run once and is asleep, the step that used to trap.
        try await waitUntil("the timer task to start") { shared.storage.state.withLock { $0.timerTask != nil } }
        await letOthersRun()
        let b = await SubscriberTask.join { shared.makeAsyncIterator() }
        source.control.yield(2)
        #expect(await b.next() == 2, "the same iteration continues")
        #expect(source.control.iteratorCount == 1)
        await b.leave()
    }
}
