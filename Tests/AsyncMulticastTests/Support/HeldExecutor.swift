// A task executor that a test can hold, to make "this task cannot run yet" a fact instead of
// a likelihood: a task that prefers it (`Task(executorPreference:)`) runs its nonisolated code
// on it, so while it is held, a continuation resumed in that task does not run on.

import Dispatch

@testable import AsyncMulticast

/// Runs its jobs on the global dispatch queue while open; while held, keeps them until
/// ``release()``. A task created with `Task(executorPreference: executor)` runs every
/// nonisolated step on it, so holding it freezes that task wherever it next resumes.
final class HeldExecutor: TaskExecutor, Sendable {
    private struct State: Sendable {
        var isHeld = false
        var jobs: [UnownedJob] = []
    }
    private let state = Lock(State())

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let runNow = self.state.withLock { state -> Bool in
            guard state.isHeld else { return true }
            state.jobs.append(job)
            return false
        }
        if runNow { self.run(job) }
    }

    /// From now on, jobs wait until ``release()``.
    func hold() {
        self.state.withLock { $0.isHeld = true }
    }

    /// Runs the jobs that waited, and the later ones at once. Releasing twice is harmless.
    func release() {
        let jobs = self.state.withLock { state -> [UnownedJob] in
            state.isHeld = false
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in jobs { self.run(job) }
    }

    private func run(_ job: UnownedJob) {
        // Captures `self`: the executor lives at least until its job ran.
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
