// The schedule explorer: runs a scenario under many schedules of its jobs, each chosen by a
// strategy and a seed (ControlledScheduler.swift), and reports a failing one with the command
// that replays it.
//
// The runtime hooks it relies on are process-wide, so its tests run only when
// ASYNC_MULTICAST_SCHEDULES is set, in a `swift test` process of their own (CI's step 3):
//
//   ASYNC_MULTICAST_SCHEDULES=1          the default number of schedules per scenario (CI's)
//   ASYNC_MULTICAST_SCHEDULES=20000      that many per scenario, seeds 1, 2, … per strategy
//   ASYNC_MULTICAST_SCHEDULES=20000@5001 the same from seed 5001: schedules CI never ran
//   ASYNC_MULTICAST_SCHEDULES=pct3:417   one schedule, printed step by step: a replay
//
// A schedule's order depends only on its strategy, its seed and what the scenario does, so a
// failing seed replays exactly in another process too, given SWIFT_DETERMINISTIC_HASHING=1
// (the library iterates dictionaries, whose order otherwise changes with each process). The
// explorer replays each strategy's first failure in the same process at once, and says whether
// it ran the same way.

import Foundation
import Testing

@testable import AsyncMulticast

enum ScheduleExploration {
    static let variable = "ASYNC_MULTICAST_SCHEDULES"

    /// Schedules per scenario when the variable is `1` (CI), shared among the strategies.
    static let defaultSchedules = 5000

    enum Mode: Sendable {
        case off
        case explore(schedules: Int, firstSeed: UInt64)
        case replay(ScheduleStrategy, seed: UInt64)
        case invalid(String)
    }

    static let mode = Self.mode(ProcessInfo.processInfo.environment[Self.variable])

    static var isEnabled: Bool {
        if case .off = self.mode { return false }
        return true
    }

    static let skipped: Comment = """
        The schedule explorer installs process-wide runtime hooks: it runs alone, when \
        ASYNC_MULTICAST_SCHEDULES is set (ASYNC_MULTICAST_SCHEDULES=1 SWIFT_DETERMINISTIC_HASHING=1 \
        swift test --skip-build --filter ScheduleExplorationTests; CONTRIBUTING.md, "Exploring schedules")
        """

    static func mode(_ text: String?) -> Mode {
        guard let text, !text.isEmpty, text != "0" else { return .off }
        if text == "1" { return .explore(schedules: Self.defaultSchedules, firstSeed: 1) }
        if let colon = text.firstIndex(of: ":") {
            guard let strategy = ScheduleStrategy(text[..<colon]), let seed = UInt64(text[text.index(after: colon)...])
            else { return .invalid(text) }
            return .replay(strategy, seed: seed)
        }
        let parts = text.split(separator: "@", maxSplits: 1)
        guard let count = Int(parts[0]), count > 0 else { return .invalid(text) }
        guard parts.count == 2 else { return .explore(schedules: count, firstSeed: 1) }
        guard let first = UInt64(parts[1]) else { return .invalid(text) }
        return .explore(schedules: count, firstSeed: first)
    }
}

/// What an exploration found.
struct ScheduleReport: Sendable {
    struct Failure: Sendable {
        let strategy: ScheduleStrategy
        let seed: UInt64
        let outcome: ScheduleOutcome
        /// The same schedule run again in this process: `nil` if not replayed.
        let replayedIdentically: Bool?
    }

    var schedules = 0
    var failed: [ScheduleStrategy: Int] = [:]
    var ran: [ScheduleStrategy: Int] = [:]
    /// Each strategy's first failing schedule, in the order they were found.
    var failures: [Failure] = []
    var distinctOrders = 0
    var fewestSteps = Int.max
    var mostSteps = 0
    var baselineSteps = 0
    var seconds = 0.0

    var failedCount: Int { self.failed.values.reduce(0, +) }
}

/// Runs `body` under many schedules (see the top of this file for how many, and for a replay)
/// and records an issue for each strategy's first failing schedule, with its replay command.
/// `body` runs in tasks of the schedule: it checks with `run.check`, and waits for other tasks
/// through continuations (signals, streams, task values) or `run.until`, never by sleeping.
/// `atMost` caps the number of schedules; `recordingIssues: false` leaves the report to the
/// caller (the explorer's own tests).
@discardableResult
func exploreSchedules(
    _ scenario: String,
    atMost schedules: Int = .max,
    strategies: [ScheduleStrategy] = [.randomWalk, .pct(depth: 2), .pct(depth: 3)],
    stepLimit: Int = 20_000,
    recordingIssues: Bool = true,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable (ScheduleRun) async -> Void
) async -> ScheduleReport {
    let filter = replayFilter()
    switch ScheduleExploration.mode {
    case .off:
        return ScheduleReport()
    case .invalid(let text):
        let expected = "1, a count (20000), a count from a seed (20000@5001) or a schedule (random:17, pct3:17)"
        Issue.record("\(ScheduleExploration.variable)=\(text): expected \(expected)", sourceLocation: sourceLocation)
        return ScheduleReport()
    case .replay(let strategy, let seed):
        let (baseline, outcome) = await onDrivingThread {
            ControlledScheduler.withHooks {
                let baseline = runSchedule(.fifo, seed: 0, expectedSteps: 1, stepLimit: stepLimit, body)
                return (
                    baseline,
                    runSchedule(strategy, seed: seed, expectedSteps: baseline.steps, stepLimit: stepLimit, body)
                )
            }
        }
        print(
            """
            Schedule \(strategy):\(seed) of "\(scenario)": \(outcome.failed ? "FAILED" : "passed"), \
            \(outcome.endDescription); \(outcome.steps) steps (baseline \(baseline.steps)), \(outcome.tasks) tasks, \
            fingerprint \(hex(outcome.fingerprint))
            \(outcome.failures.map { "  - " + $0 }.joined(separator: "\n"))
            \(outcome.story)
            """)
        var report = ScheduleReport()
        report.schedules = 1
        report.ran[strategy] = 1
        report.baselineSteps = baseline.steps
        if outcome.failed {
            report.failed[strategy] = 1
            report.failures.append(.init(strategy: strategy, seed: seed, outcome: outcome, replayedIdentically: nil))
            if recordingIssues {
                Issue.record(
                    Comment(rawValue: describe(report.failures[0], of: scenario, report: report, filter: filter)),
                    sourceLocation: sourceLocation)
            }
        }
        return report
    case .explore(let asked, let firstSeed):
        let perStrategy = max(1, min(asked, schedules) / max(strategies.count, 1))
        let report = await onDrivingThread {
            ControlledScheduler.withHooks {
                explore(
                    strategies: strategies, perStrategy: perStrategy, firstSeed: firstSeed, stepLimit: stepLimit, body)
            }
        }
        let rate = Double(report.schedules) / max(report.seconds, 1e-9)
        print(
            """
            Schedules of "\(scenario)": \(report.schedules) in \(String(format: "%.1f", report.seconds)) s \
            (\(Int(rate))/s), \(report.failedCount) failed; \(report.distinctOrders) distinct orders; \
            \(report.fewestSteps)–\(report.mostSteps) steps (baseline \(report.baselineSteps))
            """)
        if recordingIssues {
            for failure in report.failures {
                Issue.record(
                    Comment(rawValue: describe(failure, of: scenario, report: report, filter: filter)),
                    sourceLocation: sourceLocation)
            }
        }
        return report
    }
}

private func explore(
    strategies: [ScheduleStrategy], perStrategy: Int, firstSeed: UInt64, stepLimit: Int,
    _ body: @escaping @Sendable (ScheduleRun) async -> Void
) -> ScheduleReport {
    let started = ContinuousClock.now
    var report = ScheduleReport()
    var orders = Set<UInt64>()
    func record(_ strategy: ScheduleStrategy, _ seed: UInt64, _ outcome: ScheduleOutcome, expectedSteps: Int) {
        report.schedules += 1
        report.ran[strategy, default: 0] += 1
        orders.insert(outcome.fingerprint)
        report.fewestSteps = min(report.fewestSteps, outcome.steps)
        report.mostSteps = max(report.mostSteps, outcome.steps)
        guard outcome.failed else { return }
        report.failed[strategy, default: 0] += 1
        guard !report.failures.contains(where: { $0.strategy == strategy }) else { return }
        let again = runSchedule(strategy, seed: seed, expectedSteps: expectedSteps, stepLimit: stepLimit, body)
        let identical =
            again.fingerprint == outcome.fingerprint && again.end == outcome.end && again.failures == outcome.failures
        report.failures.append(.init(strategy: strategy, seed: seed, outcome: outcome, replayedIdentically: identical))
    }
    let baseline = runSchedule(.fifo, seed: 0, expectedSteps: 1, stepLimit: stepLimit, body)
    report.baselineSteps = baseline.steps
    record(.fifo, 0, baseline, expectedSteps: 1)
    for index in 0..<UInt64(perStrategy) {
        for strategy in strategies {
            let seed = firstSeed + index
            let outcome = runSchedule(strategy, seed: seed, expectedSteps: baseline.steps, stepLimit: stepLimit, body)
            record(strategy, seed, outcome, expectedSteps: baseline.steps)
        }
    }
    report.distinctOrders = orders.count
    let elapsed = ContinuousClock.now - started
    report.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    return report
}

private func runSchedule(
    _ strategy: ScheduleStrategy, seed: UInt64, expectedSteps: Int, stepLimit: Int,
    _ body: @escaping @Sendable (ScheduleRun) async -> Void
) -> ScheduleOutcome {
    ControlledScheduler(strategy: strategy, seed: seed, expectedSteps: expectedSteps, stepLimit: stepLimit)
        .drive(body)
}

private func describe(
    _ failure: ScheduleReport.Failure, of scenario: String, report: ScheduleReport, filter: String
) -> String {
    let outcome = failure.outcome
    let replayed =
        switch failure.replayedIdentically {
        case true?: "run again in this process, it ran the same way"
        case false?: "run again in this process, it ran differently: the scenario depends on something else"
        case nil: "a replay"
        }
    let counts = report.ran.keys.sorted { $0.description < $1.description }.map {
        "\($0) \(report.failed[$0] ?? 0)/\(report.ran[$0] ?? 0)"
    }
    return """
        Schedule \(failure.strategy):\(failure.seed) of "\(scenario)" failed: \(outcome.endDescription)
        \(outcome.failures.map { "  - " + $0 }.joined(separator: "\n"))
        \(outcome.steps) steps, \(outcome.tasks) tasks, fingerprint \(hex(outcome.fingerprint)); \(replayed).
        Failed in \(report.failedCount) of \(report.schedules) schedules (\(counts.joined(separator: ", "))).
        Replay it: \(ScheduleExploration.variable)=\(failure.strategy):\(failure.seed) SWIFT_DETERMINISTIC_HASHING=1 \
        swift test --skip-build --filter '\(filter)'
        The schedule (tN: a job of the scenario's task N, in the order they showed up; s: it had settled; \
        d: it was delayed), with the scenario's notes:
        \(outcome.story)
        """
}

/// The `--filter` that selects the running test alone.
private func replayFilter() -> String {
    guard let test = Test.current else { return "ScheduleExplorationTests" }
    let suite = test.id.nameComponents.dropLast().last.map { $0 + "/" } ?? ""
    let name = test.name.split(separator: "(").first.map(String.init) ?? test.name
    return suite + name
}

private func hex(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }

/// Runs `body` on a thread of its own (the driving thread) and returns its result; the calling
/// task waits without holding a thread of the pool.
private func onDrivingThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.stackSize = 16 << 20
        thread.start()
    }
}
