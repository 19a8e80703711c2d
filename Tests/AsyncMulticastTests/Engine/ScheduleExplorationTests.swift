// The library's real code under thousands of schedules of its tasks (Support/ScheduleExplorer.swift):
// each test is a small scenario through the public API, run under random walks and PCT schedules,
// every one of which must pass. The first tests check the explorer itself on planted bugs.
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
}
