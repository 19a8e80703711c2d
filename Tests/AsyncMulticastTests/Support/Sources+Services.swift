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
}
