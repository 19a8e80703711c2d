// Operating-system helpers for the latency and slow-producer scenarios: a dedicated
// thread (outside Swift's cooperative pool) that sleeps until precise deadlines, the
// scheduling class of threads, and the process's and a thread's CPU time.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Dedicated threads

private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Runs `body` on a new, detached OS thread (not a thread of the cooperative pool), so
/// that a producer or driver can sleep and block without taking a pool thread.
public func startThread(_ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    #if canImport(Darwin)
        var thread: pthread_t?
        let status = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        pthread_detach(thread!)
    #else
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        pthread_detach(thread)
    #endif
}

// MARK: - Clocks and sleeping

/// CLOCK_MONOTONIC in nanoseconds: the clock that `sleep(untilMonotonic:)` sleeps on.
public func monotonicClockNanos() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Sleeps the calling OS thread until `deadline` (CLOCK_MONOTONIC nanoseconds). An
/// absolute deadline, so a late wake-up does not shift the deadlines after it. Under a
/// real-time class Linux applies no timer slack; otherwise it may wake up to 50 µs late.
public func sleep(untilMonotonic deadline: UInt64) {
    #if os(Linux)
        var target = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &target, nil) == EINTR {}
    #else
        while true {
            let now = monotonicClockNanos()
            guard now < deadline else { return }
            let left = deadline - now
            var interval = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
            nanosleep(&interval, nil)
        }
    #endif
}

/// Sleeps the calling OS thread for `nanoseconds`.
public func sleepThread(nanoseconds: UInt64) {
    sleep(untilMonotonic: monotonicClockNanos() &+ nanoseconds)
}

// MARK: - CPU time

/// CPU time (user + system) of the whole process so far, with its context switches.
public struct ProcessUsage: Sendable {
    public var cpuNanos: UInt64
    public var userNanos: UInt64
    public var systemNanos: UInt64
    /// Voluntary context switches (a thread blocked: sleeping, waiting on a futex).
    public var voluntarySwitches: Int
    /// Involuntary ones (a thread was preempted).
    public var involuntarySwitches: Int

    public static func now() -> ProcessUsage {
        var usage = rusage()
        #if os(Linux)
            getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
            getrusage(RUSAGE_SELF, &usage)
        #endif
        func nanos(_ time: timeval) -> UInt64 {
            UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_usec) &* 1_000
        }
        let user = nanos(usage.ru_utime)
        let system = nanos(usage.ru_stime)
        return ProcessUsage(
            cpuNanos: user + system, userNanos: user, systemNanos: system,
            voluntarySwitches: Int(usage.ru_nvcsw), involuntarySwitches: Int(usage.ru_nivcsw))
    }

    public static func - (after: ProcessUsage, before: ProcessUsage) -> ProcessUsage {
        ProcessUsage(
            cpuNanos: after.cpuNanos &- before.cpuNanos,
            userNanos: after.userNanos &- before.userNanos,
            systemNanos: after.systemNanos &- before.systemNanos,
            voluntarySwitches: after.voluntarySwitches - before.voluntarySwitches,
            involuntarySwitches: after.involuntarySwitches - before.involuntarySwitches)
    }
}

/// CPU time of the calling OS thread so far, in nanoseconds.
public func threadCPUNanos() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

// MARK: - Scheduling class

/// The scheduling class of threads (Linux). Latency measurements are only meaningful
/// when the machine's other load cannot delay the measured threads: a real-time class
/// (SCHED_FIFO) does that, e.g. `chrt -f 10 compare …`, or ``setForAllThreads(realtimePriority:)``.
public enum Scheduling {
    /// The calling thread's class, e.g. "SCHED_FIFO 10" or "SCHED_OTHER".
    public static func currentThread() -> String {
        #if os(Linux)
            describe(tid: 0)
        #else
            "default (not Linux)"
        #endif
    }

    /// Whether the calling thread runs under a real-time class.
    public static var currentThreadIsRealtime: Bool {
        #if os(Linux)
            let policy = sched_getscheduler(0) & ~resetOnFork
            return policy == SCHED_FIFO || policy == SCHED_RR
        #else
            return false
        #endif
    }

    /// Sets the class of every thread the process has now (threads created later inherit
    /// the class of the thread that creates them): SCHED_FIFO at `realtimePriority`, or
    /// SCHED_OTHER when it is nil. Returns nil on success, else why it failed (e.g. EPERM
    /// without CAP_SYS_NICE).
    public static func setForAllThreads(realtimePriority: Int32?) -> String? {
        #if os(Linux)
            var failure: String?
            // Twice: a thread created while the first pass ran is caught by the second.
            for _ in 0..<2 {
                for tid in threadIDs() {
                    var parameters = sched_param()
                    parameters.sched_priority = realtimePriority ?? 0
                    let policy = realtimePriority == nil ? SCHED_OTHER : SCHED_FIFO
                    if sched_setscheduler(tid, policy, &parameters) != 0 {
                        let code = errno
                        // A thread that exited meanwhile is not a failure.
                        if code != ESRCH { failure = String(cString: strerror(code)) }
                    }
                }
            }
            return failure
        #else
            return "not supported on this platform"
        #endif
    }

    #if os(Linux)
        /// SCHED_RESET_ON_FORK, which sched_getscheduler may OR into the policy.
        static let resetOnFork: Int32 = 0x4000_0000

        static func describe(tid: pid_t) -> String {
            let policy = sched_getscheduler(tid) & ~resetOnFork
            var parameters = sched_param()
            sched_getparam(tid, &parameters)
            switch policy {
            case SCHED_FIFO: return "SCHED_FIFO \(parameters.sched_priority)"
            case SCHED_RR: return "SCHED_RR \(parameters.sched_priority)"
            case SCHED_OTHER: return "SCHED_OTHER"
            case 3: return "SCHED_BATCH"  // not exported by the Glibc module
            case 5: return "SCHED_IDLE"
            default: return "policy \(policy)"
            }
        }

        /// The thread IDs of this process (/proc/self/task).
        static func threadIDs() -> [pid_t] {
            guard let directory = opendir("/proc/self/task") else { return [] }
            defer { closedir(directory) }
            var ids: [pid_t] = []
            while let entry = readdir(directory) {
                let name = withUnsafePointer(to: &entry.pointee.d_name) {
                    String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
                }
                if let id = pid_t(name) { ids.append(id) }
            }
            return ids
        }
    #endif
}
