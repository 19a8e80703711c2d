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
    /// reads the element the source then yields, 1, and leaves.
    func oneSubscriberReadsTheFirstElement(
        of service: AsyncSharedService<Int, Never>, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        var reader = service.makeAsyncIterator()
        let next = Task { await reader.next() }
        await self.control.waitForStart(of: 0)
        self.control.yield(1)
        #expect(await next.value == 1, sourceLocation: sourceLocation)
    }
}
