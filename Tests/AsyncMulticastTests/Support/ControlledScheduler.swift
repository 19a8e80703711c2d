// One thread runs a scenario's jobs one at a time, in an order a strategy draws from a seed: the
// core of the schedule explorer (ScheduleExplorer.swift).
//
// While a schedule runs, the runtime hooks (RuntimeHooks.swift) and the executor every job runs
// on (ScheduleExecutor.swift) hand this scheduler, instead of the global executor, every job
// enqueued on the driving thread (the scenario's first task, every task it creates, every
// continuation it resumes, every yield and sleep: all of it runs there), and any later job of a
// task first seen there, whatever thread enqueues it. Such a foreign wake-up (a continuation
// resumed on a thread or a Dispatch queue of its own) makes the schedule depend on timing, so it
// fails the schedule. Other jobs (the test runner's) go to the runtime as usual.
//
// The driving thread then runs one job at a time:
// - a runnable job, as the strategy chooses;
// - only when none is runnable, a job of a task that waits for the others to be done
//   (`ScheduleRun.settle()`), first come, first served;
// - only when neither is left, or when only tasks waiting in `ScheduleRun.until` have run for a
//   while, the delayed job due first: virtual time, which jumps to its deadline.
// When nothing is left while the scenario has not finished, it deadlocked.

import Testing

@testable import AsyncMulticast

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a schedule chooses the next job among the runnable ones.
enum ScheduleStrategy: Sendable, Hashable, CustomStringConvertible {
    /// First come, first served: the baseline run, which also measures how many steps the
    /// scenario takes.
    case fifo
    /// At every step, a runnable job drawn uniformly.
    case randomWalk
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010), as AWS shuttle does it:
    /// every task gets a random priority when it first shows up, the runnable task of highest
    /// priority runs, and at `depth - 1` steps drawn from the baseline's length the task about to
    /// run drops below all others. A bug that needs `depth` orderings to line up is found with
    /// probability at least 1/(n·k^(depth-1)) per schedule (n tasks, k steps).
    case pct(depth: Int)

    var description: String {
        switch self {
        case .fifo: "fifo"
        case .randomWalk: "random"
        case .pct(let depth): "pct\(depth)"
        }
    }

    /// Reads `description`'s spelling: "fifo", "random", "pct3".
    init?(_ text: some StringProtocol) {
        if text == "fifo" {
            self = .fifo
        } else if text == "random" {
            self = .randomWalk
        } else if text.hasPrefix("pct"), let depth = Int(text.dropFirst(3)), depth >= 1 {
            self = .pct(depth: depth)
        } else {
            return nil
        }
    }
}

/// How one schedule went.
struct ScheduleOutcome: Sendable {
    enum End: Sendable, Equatable {
        case finished
        /// The scenario had not finished and no job could run.
        case deadlock
        /// Only tasks waiting for a condition (`ScheduleRun.until`) were left, and it never held.
        case stuck(waitingFor: [String])
        case stepLimit(Int)
    }

    var end: End
    /// What the scenario's checks found, and the scheduler's own findings.
    var failures: [String]
    var steps: Int
    var tasks: Int
    /// A hash of the order the jobs ran in: equal for two runs of the same schedule.
    var fingerprint: UInt64
    /// The order the jobs ran in, with the scenario's notes, for a report.
    var story: String

    var failed: Bool { self.end != .finished || !self.failures.isEmpty }

    var endDescription: String {
        switch self.end {
        case .finished: "finished"
        case .deadlock: "deadlock: the scenario had not finished and no job could run"
        case .stuck(let waiting):
            "stuck: only tasks waiting for a condition were left (\(waiting.joined(separator: "; ")))"
        case .stepLimit(let limit): "no end after \(limit) steps (a livelock?)"
        }
    }
}

/// Runs schedules: one per instance, on the thread that calls `drive(_:)`.
final class ControlledScheduler: @unchecked Sendable {
    // @unchecked Sendable: `queues` is only touched under its lock; every other stored property
    // only by the driving thread.

    private struct Entry {
        let job: RuntimeJob
        /// The scenario's task it belongs to, numbered as they showed up (0 is the scenario's own).
        let task: Int
    }

    private struct Queues {
        var runnable: [Entry] = []
        var settling: [Entry] = []
        var delayed: [(due: UInt64, order: Int, entry: Entry)] = []
        /// Runtime task ID → the scenario's number for it.
        var tasks: [UInt64: Int] = [:]
        var taskCount = 0
        /// The task whose job runs now: a job that is not a task's (a `Task.yield()`
        /// continuation) belongs to the task that enqueued it.
        var running: Int?
        /// `ScheduleRun.settle()` is about to yield: the next job enqueued settles.
        var settleNext = false
        /// The tasks waiting in `ScheduleRun.until`.
        var waiting: Set<Int> = []
        var foreignWakeUps = 0
        var delayedCount = 0
        /// Virtual time, in nanoseconds.
        var now: UInt64 = 0

        mutating func newTask() -> Int {
            defer { self.taskCount += 1 }
            return self.taskCount
        }
    }

    private let queues = Lock(Queues())
    private let driver = DrivingThread.current
    let strategy: ScheduleStrategy
    let seed: UInt64
    private let stepLimit: Int
    /// How many steps in a row taken only by tasks waiting in `ScheduleRun.until` count as stuck.
    private let settleLimit = 400

    // The driving thread's own.
    private var random: LCG
    private(set) var step = 0
    private var fingerprint: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
    private var trace: [(task: Int, kind: Character)] = []
    /// PCT: task numbers, highest priority first; the tasks that have a place; the demoted ones.
    private var ranking: [Int] = []
    private var ranked = 0
    private var demoted: Set<Int> = []
    private var changePoints: Set<Int> = []

    /// `expectedSteps`: the baseline's length, over which PCT draws its change points.
    init(strategy: ScheduleStrategy, seed: UInt64, expectedSteps: Int, stepLimit: Int) {
        self.strategy = strategy
        self.seed = seed
        self.stepLimit = stepLimit
        self.random = LCG(seed: seed)
        if case .pct(let depth) = strategy {
            for _ in 1..<max(depth, 1) {
                self.changePoints.insert(1 + Int(self.random.next() % UInt64(max(expectedSteps, 1))))
            }
        }
    }

    // MARK: - Taking jobs (the hooks, from any thread)

    /// The scheduler running a schedule now.
    private static let active = Lock<ControlledScheduler?>(nil)

    /// Installs the runtime hooks around `body`; schedules driven inside take their jobs.
    static func withHooks<T>(_ body: () -> T) -> T {
        let previous = RuntimeHooks.install(enqueue: enqueueHook, delay: delayHook, deadline: deadlineHook)
        defer { RuntimeHooks.restore(previous) }
        return body()
    }

    /// A hook's or `ScheduleExecutor`'s question: does the schedule running now take `job`?
    /// `delay`: it is to run that many nanoseconds from now.
    static func take(_ job: RuntimeJob, delay: UInt64?) -> Bool {
        guard let scheduler = self.active.withLock({ $0 }) else { return false }
        return scheduler.take(job, delay: delay)
    }

    private func take(_ job: RuntimeJob, delay: UInt64?) -> Bool {
        let onDriver = self.driver.isCurrent
        let id = RuntimeHooks.taskID(of: job)
        return self.queues.withLock { queues in
            let task: Int
            if id != 0, let known = queues.tasks[id] {
                task = known
                if !onDriver { queues.foreignWakeUps += 1 }
            } else if onDriver {
                task = id == 0 ? queues.running ?? queues.newTask() : queues.newTask()
                if id != 0 { queues.tasks[id] = task }
            } else {
                return false
            }
            let entry = Entry(job: job, task: task)
            if let delay {
                queues.delayed.append((queues.now &+ delay, queues.delayedCount, entry))
                queues.delayedCount += 1
            } else if onDriver && queues.settleNext {
                queues.settleNext = false
                queues.settling.append(entry)
            } else {
                queues.runnable.append(entry)
            }
            return true
        }
    }

    /// The next job the calling task enqueues (its `Task.yield()`) waits until nothing else
    /// can run.
    func settleNextEnqueue() {
        self.queues.withLock { $0.settleNext = true }
    }

    // MARK: - Driving

    /// Runs one schedule of `body` on the calling thread, which must be the one that created
    /// this scheduler, and returns how it went.
    func drive(_ body: @escaping @Sendable (ScheduleRun) async -> Void) -> ScheduleOutcome {
        precondition(self.driver.isCurrent, "a schedule is driven by the thread that created its scheduler")
        let run = ScheduleRun(scheduler: self)
        Self.active.withLock { active in
            precondition(
                active == nil, "two schedules at once: the explorer's tests run serialized, alone in their process")
            active = self
        }
        defer { Self.active.withLock { $0 = nil } }
        // Enqueued here, on the driving thread: the scheduler takes it as task 0.
        Task {
            await body(run)
            run.bodyFinished()
        }
        var end = self.runJobs(run)
        if end == .finished {
            run.runEndChecks()
            end = self.runJobs(run)
        }
        var failures = run.failures
        let foreign = self.queues.withLock { $0.foreignWakeUps }
        if foreign > 0 {
            failures.append(
                "a scenario task was woken from another thread \(foreign) times (a continuation resumed on a "
                    + "thread or queue of its own): such a schedule depends on timing, not on its seed alone")
        }
        return ScheduleOutcome(
            end: end, failures: failures, steps: self.step, tasks: self.queues.withLock { $0.taskCount },
            fingerprint: self.fingerprint, story: self.story(notes: run.notes))
    }

    /// Runs jobs until none is left: `.finished` if the body has finished by then.
    private func runJobs(_ run: ScheduleRun) -> ScheduleOutcome.End {
        // Steps in a row that only tasks waiting in `ScheduleRun.until` took.
        var waitingStreak = 0
        while true {
            if self.step >= self.stepLimit { return .stepLimit(self.stepLimit) }
            let next = self.queues.withLock { queues -> (Entry, Character)? in
                let picked: (Entry, Character)
                if waitingStreak < self.settleLimit && !queues.runnable.isEmpty {
                    let index = self.pick(queues.runnable, taskCount: queues.taskCount)
                    picked = (queues.runnable.remove(at: index), "r")
                } else if waitingStreak < self.settleLimit && !queues.settling.isEmpty {
                    picked = (queues.settling.removeFirst(), "s")
                } else if let first = queues.delayed.indices.min(by: {
                    (queues.delayed[$0].due, queues.delayed[$0].order) < (
                        queues.delayed[$1].due, queues.delayed[$1].order
                    )
                }) {
                    // Nothing else can run, or only tasks that wait for a condition: time passes.
                    let delayed = queues.delayed.remove(at: first)
                    queues.now = max(queues.now, delayed.due)
                    picked = (delayed.entry, "d")
                } else {
                    return nil
                }
                queues.running = picked.0.task
                let waiting = picked.1 != "d" && queues.waiting.contains(picked.0.task)
                waitingStreak = waiting ? waitingStreak + 1 : 0
                return picked
            }
            guard let (entry, kind) = next else {
                if waitingStreak >= self.settleLimit { return .stuck(waitingFor: run.waitingFor) }
                if run.hasFinished { return .finished }
                if self.waitForAForeignWakeUp() { continue }
                return .deadlock
            }
            self.step += 1
            self.trace.append((entry.task, kind))
            for byte in [
                UInt8(truncatingIfNeeded: entry.task), UInt8(truncatingIfNeeded: entry.task >> 8), kind.asciiValue!,
            ] {
                self.fingerprint = (self.fingerprint ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            RuntimeHooks.run(entry.job)
            self.queues.withLock { $0.running = nil }
        }
    }

    /// Nothing can run and the scenario has not finished: waits a few milliseconds for a job
    /// from another thread (a continuation resumed on a thread of its own) before calling it a
    /// deadlock.
    private func waitForAForeignWakeUp() -> Bool {
        for _ in 0..<5 {
            usleep(1000)
            if self.queues.withLock({ !$0.runnable.isEmpty || !$0.delayed.isEmpty }) { return true }
        }
        return false
    }

    /// A number in `range`, drawn from the schedule's seed: a scenario's own choice, which the
    /// seed replays too. Only jobs call it, on the driving thread.
    func choose(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(self.random.next() % UInt64(range.count))
    }

    /// The running task waits in `ScheduleRun.until` (`true`) or no longer does: the steps its
    /// jobs take do not count as progress meanwhile.
    func runningTaskWaits(_ waits: Bool) {
        self.queues.withLock { queues in
            guard let task = queues.running else { return }
            if waits { queues.waiting.insert(task) } else { queues.waiting.remove(task) }
        }
    }

    /// The index in `runnable` of the job to run next.
    private func pick(_ runnable: [Entry], taskCount: Int) -> Int {
        switch self.strategy {
        case .fifo:
            return 0
        case .randomWalk:
            return Int(self.random.next() % UInt64(runnable.count))
        case .pct:
            // Tasks that showed up since the last step get a random place among those not
            // demoted, in the order they showed up.
            while self.ranked < taskCount {
                let places = self.ranking.count - self.demoted.count + 1
                self.ranking.insert(self.ranked, at: Int(self.random.next() % UInt64(places)))
                self.ranked += 1
            }
            var index = self.highest(in: runnable)
            if self.changePoints.contains(self.step + 1) {
                let task = runnable[index].task
                self.ranking.removeAll { $0 == task }
                self.ranking.append(task)
                self.demoted.insert(task)
                index = self.highest(in: runnable)
            }
            return index
        }
    }

    private func highest(in runnable: [Entry]) -> Int {
        runnable.indices.min { self.rank(of: runnable[$0].task) < self.rank(of: runnable[$1].task) }!
    }

    private func rank(of task: Int) -> Int {
        self.ranking.firstIndex(of: task) ?? self.ranking.count
    }

    /// The last `limit` steps, one word each (`t3`: a job of task 3; `t3s`: it had settled;
    /// `t3d`: it was delayed), with the scenario's notes where they were made.
    private func story(notes: [(step: Int, text: String)], limit: Int = 400) -> String {
        let first = max(0, self.trace.count - limit)
        var lines: [String] = first > 0 ? ["(\(first) steps before)"] : []
        var line = ""
        var pending = notes.filter { $0.step > first }[...]
        for index in first..<self.trace.count {
            let (task, kind) = self.trace[index]
            line += (line.isEmpty ? "" : " ") + "t\(task)" + (kind == "r" ? "" : String(kind))
            while let note = pending.first, note.step == index + 1 {
                lines.append("\(index + 1): " + line + "  — " + note.text)
                line = ""
                pending = pending.dropFirst()
            }
            if line.count > 100 {
                lines.append("\(index + 1): " + line)
                line = ""
            }
        }
        if !line.isEmpty { lines.append("\(self.trace.count): " + line) }
        for note in pending { lines.append("   — " + note.text) }
        return lines.joined(separator: "\n")
    }
}

/// The thread a scheduler was created on.
private struct DrivingThread: @unchecked Sendable {
    // @unchecked Sendable: a pthread_t is only compared, never dereferenced.
    let thread: pthread_t

    static var current: DrivingThread { DrivingThread(thread: pthread_self()) }
    var isCurrent: Bool { pthread_equal(self.thread, pthread_self()) != 0 }
}

// MARK: - The hooks

private let enqueueHook: RuntimeHooks.Enqueue = { job, original in
    if !ControlledScheduler.take(job, delay: nil) { original(job) }
}

private let delayHook: RuntimeHooks.Delay = { delay, job, original in
    if !ControlledScheduler.take(job, delay: delay) { original(delay, job) }
}

private let deadlineHook: RuntimeHooks.Deadline = {
    seconds, nanoseconds, toleranceSeconds, toleranceNanoseconds, clock, job, original in
    // The deadline on the runtime's clock, as a delay from now: past Int64's range, as far as can be.
    let (whole, tooFar) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    let (deadline, pastTheEnd) = whole.addingReportingOverflow(nanoseconds)
    let (delay, wrapped) = deadline.subtractingReportingOverflow(RuntimeHooks.nanoseconds(onClock: clock))
    let inRange = !tooFar && !pastTheEnd && !wrapped
    if !ControlledScheduler.take(job, delay: inRange ? UInt64(max(0, delay)) : seconds > 0 ? .max : 0) {
        original(seconds, nanoseconds, toleranceSeconds, toleranceNanoseconds, clock, job)
    }
}
