// Shared services of a `FedSource`, as more than one suite sets them up.

import Testing

@testable import AsyncMulticast

extension FedSource {
    /// A `replay(1)` service of this source whose cache outlives a stopped upstream by 10 s
    /// on `clock`, hosted by a task: the service and the task running its `run()`.
    func hostedReplayService(
        clock: ManualClock
    ) -> (service: AsyncSharedService<Int, Never>, hosting: Task<Void, Never>) {
        let service = self.sharedService(
            replay: 1, buffering: .unbounded,
            started: .whileSubscribed(keepAlive: .zero, replayExpiration: .seconds(10)), clock: clock)
        return (service, Task { await service.run() })
    }

    /// A subscriber of the hosted `service` whose read starts iteration 0 of this source
    /// reads the element the source then yields, 1, and leaves (its iterator goes with the
    /// task that read, when this returns).
    func oneSubscriberReadsTheFirstElement(
        of service: AsyncSharedService<Int, Never>, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        var reader = service.makeAsyncIterator()
        let next = Task { await reader.next() }
        await self.control.waitForStart(of: 0, sourceLocation: sourceLocation)
        self.control.yield(1)
        #expect(await next.value == 1, sourceLocation: sourceLocation)
    }

    /// The pending `read` started iteration `iteration` of this source: waits for that
    /// iteration to start, yields `value`, and checks that the read receives it.
    func deliver(
        _ value: Int, startingIteration iteration: Int, to read: Task<Int?, Never>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await self.control.waitForStart(of: iteration, sourceLocation: sourceLocation)
        self.control.yield(value)
        #expect(await read.value == value, sourceLocation: sourceLocation)
    }

    /// A service of this source that lingers 60 s on `clock` once its last subscriber left,
    /// hosted by a task; a first subscriber joined, read 1 and left, and the stop timeout's
    /// timer sleeps.
    func hostedServiceLingering(
        clock: ManualClock, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (service: AsyncSharedService<Int, Never>, hosting: Task<Void, Never>) {
        let service = self.sharedService(
            buffering: .unbounded, started: .whileSubscribed(keepAlive: .seconds(60)), clock: clock)
        let hosting = Task { await service.run() }
        await self.oneSubscriberReadsTheFirstElement(of: service, sourceLocation: sourceLocation)
        await clock.waitForSleepers(count: 1)
        return (service, hosting)
    }
}

/// A task hosting `service`'s `run()`: its value is the error `run()` threw, or nil.
func hostingRun(of service: AsyncSharedService<Int, TestError>) -> Task<TestError?, Never> {
    Task { () -> TestError? in
        do throws(TestError) {
            try await service.run()
            return nil
        } catch {
            return error
        }
    }
}

extension FedSource {
    /// After its subscribers left: iteration 0 of this source still runs (`why`), and a new
    /// subscriber (`make`) receives what it yields next, `value`, from that same iteration.
    /// The subscriber stays joined.
    func expectANewSubscriberContinuesIterationZero(
        _ why: Comment, receiving value: Int, sourceLocation: SourceLocation = #_sourceLocation,
        _ make: @escaping @Sendable () -> SharedIterator<Int, Never>
    ) async -> SubscriberTask<Int, Never> {
        await letOthersRun()
        #expect(self.control.end(of: 0) == nil, why, sourceLocation: sourceLocation)
        let subscriber = await SubscriberTask.join(make, sourceLocation: sourceLocation)
        self.control.yield(value)
        #expect(await subscriber.next() == value, "the same iteration goes on", sourceLocation: sourceLocation)
        #expect(self.control.iteratorCount == 1, sourceLocation: sourceLocation)
        return subscriber
    }
}
