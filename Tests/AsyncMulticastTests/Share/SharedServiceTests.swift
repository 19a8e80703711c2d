// sharedService(...): the upstream runs inside run(), started as SharingStarted says; run()
// cancelled while subscribers wait, while the base is inside next(), while a stop-timeout
// window is open; the task-local values and priority the upstream runs with.

import Testing

@testable import AsyncMulticast

private enum Trace {
    @TaskLocal static var id: String?
}

@Suite("sharedService: structured sharing", .timeLimit(.minutes(3)))
struct SharedServiceTests {
    @Test("whileSubscribed: starts with the first subscriber, stops when the last leaves, restarts, inside run()")
    func whileSubscribedStartsAndStops() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded, started: .whileSubscribed())
        let hosting = Task { await service.run() }
        var first: SharedIterator<Int, Never>? = service.makeAsyncIterator()
        let reading = Task { [first] in
            var iterator = first!
            return await iterator.next()
        }
        first = nil
        await source.deliver(1, startingIteration: 0, to: reading)
        // The reading task's iterator was its last reference: the subscriber left.
        let end = await source.control.waitForEnd()
        #expect(end?.iteration == 0 && end?.end == .cancelled)
        var second = service.makeAsyncIterator()
        let next = Task { await second.next() }
        await source.deliver(2, startingIteration: 1, to: next)
        hosting.cancel()
        await hosting.value
        #expect(source.control.end(of: 1) == .cancelled)
        #expect(service.storage.upstreamState == .terminated(.finished))
        _ = second
    }

    @Test("eagerly: starts when run() starts, with no subscriber; what it produces then only reaches the replay")
    func eagerlyStartsWithRun() async throws {
        let source = FedSource()
        let service = source.sharedService(replay: 1, buffering: .unbounded, started: .eagerly)
        #expect(source.control.iteratorCount == 0, "nothing before run()")
        let hosting = Task { await service.run() }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        try await waitUntil("2 produced") { service.replayCache == [2] }
        var iterator = service.makeAsyncIterator()
        #expect(await iterator.next() == 2, "the replay")
        source.control.yield(3)
        #expect(await iterator.next() == 3)
        hosting.cancel()
        await hosting.value
        #expect(await iterator.next() == nil)
        #expect(source.control.iteratorCount == 1)
    }

    @Test("lazily: starts with the first subscriber and keeps running after the last one left")
    func lazilyNeverStops() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded, started: .lazily)
        let hosting = Task { await service.run() }
        await source.oneSubscriberReadsTheFirstElement(of: service)
        try await waitUntil("the subscriber left") { service.subscriberCount == 0 }
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "still running")
        var later = service.makeAsyncIterator()
        let next = Task { await later.next() }
        try await waitUntil("the later subscriber waits") { service.storage.waitingCount == 1 }
        source.control.yield(2)
        #expect(await next.value == 2)
        #expect(source.control.iteratorCount == 1, "the same iteration")
        hosting.cancel()
        await hosting.value
        #expect(source.control.end(of: 0) == .cancelled)
        _ = later
    }

    @Test("subscribers that join before run() wait for it; their demand starts the upstream once it runs")
    func subscribersBeforeRun() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded)
        var iterator = service.makeAsyncIterator()
        let next = Task { await iterator.next() }
        try await waitUntil("the subscriber waits") { service.storage.waitingCount == 1 }
        #expect(source.control.iteratorCount == 0, "nobody hosts the upstream yet")
        let hosting = Task { await service.run() }
        await source.deliver(1, startingIteration: 0, to: next)
        hosting.cancel()
        await hosting.value
    }

    @Test(
        "run() cancelled while subscribers wait: they get what was buffered for them, then nil; later ones nil at once")
    func cancelledWhileSubscribersWait() async throws {
        let source = FedSource()
        let service = source.sharedService(buffering: .unbounded)
        let hosting = Task { await service.run() }
        var behind = service.makeAsyncIterator()
        let waiters = (0..<3).map { _ in
            let iterator = service.makeAsyncIterator()
            return Task {
                var iterator = iterator
                return await iterator.next()
            }
        }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        for waiter in waiters { #expect(await waiter.value == 1) }
        try await waitUntil("behind holds two") { service.storage.bufferedCount >= 2 }
        hosting.cancel()
        await hosting.value
        #expect(await behind.next() == 1)
        #expect(await behind.next() == 2)
        #expect(await behind.next() == nil)
        var late = service.makeAsyncIterator()
        #expect(await late.next() == nil)
        #expect(source.control.end(of: 0) == .cancelled)
    }

    @Test("run() cancelled while the base is inside next(): returns only once that iteration ended")
    func cancelledWhileTheBaseIsInsideNext() async throws {
        let source = StubbornSource()
        let service = source.sharedService(buffering: .unbounded)
        let returned = LockedFlag()
        let hosting = Task {
            await service.run()
            returned.set()
        }
        var iterator = service.makeAsyncIterator()
        let next = Task { await iterator.next() }
        _ = await source.control.pulled.next("the base is inside next()")
        hosting.cancel()
        #expect(await next.value == nil, "the waiting subscriber ends at once")
        await letOthersRun()
        #expect(!returned.isSet, "run() waits for the base's next() to return")
        source.control.answer(1)
        await hosting.value
        #expect(returned.isSet)
    }

    @Test("run() cancelled while a stop-timeout window is open: the timer ends with it")
    func cancelledDuringTheStopTimeout() async throws {
        let clock = ManualClock()
        let source = FedSource()
        let (service, hosting) = await source.hostedServiceLingering(clock: clock)
        #expect(source.control.end(of: 0) == nil, "lingering for 60 s")
        hosting.cancel()
        await hosting.value
        #expect(source.control.end(of: 0) == .cancelled)
        #expect(service.storage.state.withLock { $0.timerTask } == nil)
        #expect(clock.sleeperCount == 0, "the timer task has ended")
    }

    @Test("the upstream ends: run() returns, or throws the upstream's error")
    func upstreamEnds() async throws {
        let finished = [1, 2].async.sharedService(replay: 2, buffering: .unbounded, started: .eagerly)
        await finished.run()
        var iterator = finished.makeAsyncIterator()
        #expect(await iterator.next() == 1)
        #expect(await iterator.next() == 2)
        #expect(await iterator.next() == nil)
        await finished.run()  // after the end: returns at once

        let source = PushSource()
        let failing = source.sharedService(started: .eagerly)
        let hosting = hostingRun(of: failing)
        source.yield(1)
        source.fail(TestError.other(7))
        #expect(await hosting.value == TestError.other(7))
    }

    @Test("the upstream runs with run()'s task-local values and priority, not the first subscriber's")
    func taskLocalsAndPriorityOfRun() async throws {
        let seen = LockedLog<(trace: String?, priority: TaskPriority)>()
        let source = AsyncStream<Int> { continuation in
            continuation.yield(1)
            continuation.finish()
        }
        let probe = source.map { element -> Int in
            seen.append((Trace.id, Task.currentPriority))
            return element
        }
        let service = probe.sharedService(buffering: .unbounded)
        // The test waits through signals, not `reader.value`: awaiting a task raises it to the
        // test's priority, and a waiting reader of higher priority raises the upstream, as
        // documented; this test is about run()'s own priority.
        let readerEnded = Signal<[Int]>()
        let hostEnded = Signal<Void>()
        _ = Trace.$id.withValue("service") {
            Task(priority: .utility) {
                await service.run()
                hostEnded.send(())
            }
        }
        _ = Trace.$id.withValue("request") {
            Task(priority: .utility) {
                var received: [Int] = []
                for await n in service { received.append(n) }
                readerEnded.send(received)
            }
        }
        #expect(await readerEnded.next("the reader") == [1])
        #expect(await hostEnded.next("run()") != nil)
        #expect(seen.values.map(\.trace) == ["service"])
        #expect(seen.values.map(\.priority) == [.utility])
    }

    @Test("the strategies print as they are written")
    func descriptions() {
        #expect("\(SharingStarted.eagerly)" == "eagerly")
        #expect("\(SharingStarted.lazily)" == "lazily")
        #expect(
            "\(SharingStarted.whileSubscribed(keepAlive: .seconds(5)))"
                == "whileSubscribed(keepAlive: 5.0 seconds, replayExpiration: 0.0 seconds)")
    }
}
