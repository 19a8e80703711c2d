// The executor the schedule explorer runs every job on (ControlledScheduler.swift).
//
// Why not the generic executor, as the global concurrent executor runs jobs: since Swift 6.2,
// `Task.yield()` enqueues its job on `Task.currentExecutor` and `Task.sleep` on the current
// scheduling executor, which on the generic executor are the default executor itself, past the
// runtime hooks (RuntimeHooks.swift): the task would go on in the thread pool. A job run on a
// serial executor of ours makes that executor the current one, so a yield comes back here, and
// so does a continuation resumed later (a task resumes on the executor it suspended on).
// AsyncSequenceValidation runs its jobs on an executor of its own too.
//
// The price: the runtime takes the job for isolated to this executor, so each nonisolated async
// call hops off it, through the global enqueue hook, and back: a schedule has more steps, and
// more places where other tasks can interleave. Every such interleaving can happen on a real pool
// of several threads, where other tasks run meanwhile anyway.
//
// A sleep (`Task.sleep`) comes here through the executor's scheduling side, which the standard
// library offers as experimental SPI since Swift 6.3: its job becomes a delayed job of the
// schedule, which runs in virtual time. Without it, a sleeping scenario task is woken from
// another thread, which fails the schedule (ControlledScheduler).

#if compiler(>=6.3) && os(Linux)
    @_spi(ExperimentalScheduling) import _Concurrency
#endif

final class ScheduleExecutor: SerialExecutor {
    static let shared = ScheduleExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // Not the running schedule's (a task left over by an earlier one): the thread pool runs it.
        if !ControlledScheduler.take(unsafeBitCast(job, to: RuntimeJob.self), delay: nil) {
            globalConcurrentExecutor.enqueue(job)
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}

#if compiler(>=6.3) && os(Linux)
    extension ScheduleExecutor: SchedulingExecutor {
        func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C)
        {
            self.enqueueDelayed(UnownedJob(job), by: delay as? Duration)
        }

        func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
        ) {
            self.enqueueDelayed(UnownedJob(job), by: clock.now.duration(to: instant) as? Duration)
        }

        /// A clock whose durations are not `Duration` counts as no delay at all. A job the
        /// running schedule does not take runs at once: a sleep of a left-over task ends early.
        private func enqueueDelayed(_ job: UnownedJob, by delay: Duration?) {
            var nanoseconds: UInt64 = 0
            if let delay, delay > .zero {
                let (whole, overflow) = delay.components.seconds.multipliedReportingOverflow(by: 1_000_000_000)
                nanoseconds = overflow ? .max : UInt64(whole) &+ UInt64(delay.components.attoseconds / 1_000_000_000)
            }
            if !ControlledScheduler.take(unsafeBitCast(job, to: RuntimeJob.self), delay: nanoseconds) {
                globalConcurrentExecutor.enqueue(job)
            }
        }
    }
#endif
