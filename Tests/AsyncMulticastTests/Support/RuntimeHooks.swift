// The Swift runtime's global-executor hooks, through which the schedule explorer
// (ControlledScheduler.swift) takes every job of a scenario's tasks.
//
// libswift_Concurrency keeps a hook variable in front of each way into the global concurrent
// executor: `swift_task_enqueueGlobal_hook` for a job to run now, and
// `swift_task_enqueueGlobalWithDelay_hook` and `swift_task_enqueueGlobalWithDeadline_hook` for a
// job to run later. A hook gets the job and the runtime's own function, which it calls for the
// jobs it does not take. swift-async-algorithms' AsyncSequenceValidation drives its diagrams
// through the first one. The variables are found with `dlsym`: the library knows nothing of
// them, and they are process-wide, so the explorer runs in a test process of its own.
//
// The runtime declares the hooks with Swift's calling convention; for these arguments (words
// and pointers, no context, no error) it uses the same registers as C's, so `@convention(c)`
// function pointers fit them (x86_64 and arm64).
//
// The hooks alone do not see every job since Swift 6.2: `Task.yield()` and `Task.sleep` hand
// their jobs to the current executor (the default one, on the generic executor), past the hooks.
// So the scheduler runs jobs on an executor of its own (ScheduleExecutor.swift), which they then
// come to.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A job as the runtime's hooks pass it: a `Job *`.
typealias RuntimeJob = UnsafeMutableRawPointer

enum RuntimeHooks {
    typealias EnqueueOriginal = @convention(c) (RuntimeJob) -> Void
    typealias Enqueue = @convention(c) (RuntimeJob, EnqueueOriginal) -> Void
    typealias DelayOriginal = @convention(c) (UInt64, RuntimeJob) -> Void
    typealias Delay = @convention(c) (UInt64, RuntimeJob, DelayOriginal) -> Void
    /// Seconds and nanoseconds of the deadline, of the tolerance, the clock (1 continuous,
    /// 2 suspending), the job.
    typealias DeadlineOriginal = @convention(c) (Int64, Int64, Int64, Int64, Int32, RuntimeJob) -> Void
    typealias Deadline = @convention(c) (Int64, Int64, Int64, Int64, Int32, RuntimeJob, DeadlineOriginal) -> Void

    /// The three hooks as they were before `install`, to put back.
    struct Previous {
        let enqueue: Enqueue?
        let delay: Delay?
        let deadline: Deadline?
    }

    /// Sets the three hook variables; returns what they held.
    static func install(enqueue: Enqueue, delay: Delay, deadline: Deadline) -> Previous {
        let previous = Previous(
            enqueue: self.enqueueVariable.pointee, delay: self.delayVariable.pointee,
            deadline: self.deadlineVariable.pointee)
        self.enqueueVariable.pointee = enqueue
        self.delayVariable.pointee = delay
        self.deadlineVariable.pointee = deadline
        return previous
    }

    /// Puts back the hooks `install` replaced.
    static func restore(_ previous: Previous) {
        self.enqueueVariable.pointee = previous.enqueue
        self.delayVariable.pointee = previous.delay
        self.deadlineVariable.pointee = previous.deadline
    }

    private static var enqueueVariable: UnsafeMutablePointer<Enqueue?> {
        self.variable("swift_task_enqueueGlobal_hook", of: Enqueue.self)
    }
    private static var delayVariable: UnsafeMutablePointer<Delay?> {
        self.variable("swift_task_enqueueGlobalWithDelay_hook", of: Delay.self)
    }
    private static var deadlineVariable: UnsafeMutablePointer<Deadline?> {
        self.variable("swift_task_enqueueGlobalWithDeadline_hook", of: Deadline.self)
    }

    /// Where the runtime keeps the hook variable `name`.
    private static func variable<Hook>(_ name: String, of _: Hook.Type) -> UnsafeMutablePointer<Hook?> {
        #if canImport(Darwin)
            let everywhere = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
        #else
            let everywhere: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
        #endif
        guard let address = dlsym(everywhere, name) else {
            preconditionFailure("the Swift runtime has no \(name) (dlsym: \(String(cString: dlerror())))")
        }
        return address.assumingMemoryBound(to: Hook?.self)
    }

    // MARK: - Jobs

    /// The ID of the task `job` resumes, or 0 for a job that is not a task (a `Task.yield()`'s
    /// continuation job, an actor's job). Task IDs are never reused in a process.
    static func taskID(of job: RuntimeJob) -> UInt64 {
        runtimeJobTaskID(unsafeBitCast(job, to: UnownedJob.self))
    }

    /// Runs `job` on the calling thread, on `ScheduleExecutor` (see there why not on the generic
    /// executor, as the global concurrent executor would).
    static func run(_ job: RuntimeJob) {
        unsafeBitCast(job, to: UnownedJob.self).runSynchronously(on: ScheduleExecutor.shared.asUnownedSerialExecutor())
    }

    /// Nanoseconds since an arbitrary point on the runtime's clock `clock` (1 continuous,
    /// 2 suspending), to turn a delayed job's deadline into a delay.
    static func nanoseconds(onClock clock: Int32) -> Int64 {
        #if canImport(Darwin)
            let id = clock == 1 ? CLOCK_MONOTONIC_RAW : CLOCK_UPTIME_RAW
        #else
            let id = clock == 1 ? CLOCK_BOOTTIME : CLOCK_MONOTONIC
        #endif
        var now = timespec()
        clock_gettime(id, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}

/// The runtime's own accessor (`swift_task_getJobTaskId`), which the standard library uses to
/// print a job's ID; exported since Swift 5.1.
@_silgen_name("swift_task_getJobTaskId")
private func runtimeJobTaskID(_ job: UnownedJob) -> UInt64
