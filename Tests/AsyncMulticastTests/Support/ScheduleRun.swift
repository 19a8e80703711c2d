// What a scenario's body gets from the schedule that runs it (ControlledScheduler.swift): checks
// that fail the schedule, notes for its report, the seed's own choices, and the two waits the
// scheduler knows of.

import Testing

@testable import AsyncMulticast

/// What a scenario's body gets from the schedule that runs it: checks, notes, and the
/// scheduler's waits. A scenario runs in tasks of the schedule, not in the test's, so it reports
/// through `check(_:_:)`, never `#expect` (which would not know the test).
final class ScheduleRun: Sendable {
    private struct State {
        var failures: [String] = []
        var notes: [(step: Int, text: String)] = []
        var waitingFor: [Int: String] = [:]
        var nextWait = 0
        var finished = false
        var endChecks: [@Sendable () -> Void] = []
    }

    private let state = Lock(State())
    private let scheduler: ControlledScheduler

    init(scheduler: ControlledScheduler) {
        self.scheduler = scheduler
    }

    /// Fails the schedule with `message` unless `condition` holds.
    func check(
        _ condition: Bool, _ message: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if !condition { self.fail(message(), sourceLocation: sourceLocation) }
    }

    /// Fails the schedule with `message`.
    func fail(_ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = "\(message) (\(sourceLocation.fileName):\(sourceLocation.line))"
        self.state.withLock { $0.failures.append(text) }
        self.note("FAILED: " + message)
    }

    /// A number in `range` drawn from the schedule's seed (and noted), for a scenario whose shape
    /// varies: how many elements before a completion, which policy. A replay draws the same.
    func choose(_ what: String, _ range: ClosedRange<Int>) -> Int {
        let choice = self.scheduler.choose(range)
        self.note("\(what): \(choice)")
        return choice
    }

    /// Records `text` at the current step, for the schedule's story in a report.
    func note(_ text: String) {
        let step = self.scheduler.step
        self.state.withLock { $0.notes.append((step, text)) }
    }

    /// Suspends until every other job that can run has run (and again, while they make more).
    /// For a scenario that must wait for a state it cannot be told of, and for nothing else: it
    /// takes the interleavings past that point away from the exploration.
    func settle() async {
        self.scheduler.settleNextEnqueue()
        await Task.yield()
    }

    /// Settles until `condition` holds. If it never can (nothing else runs), the schedule ends
    /// as stuck, naming `what`.
    func until(_ what: String, _ condition: () -> Bool) async {
        guard !condition() else { return }
        let token = self.state.withLock { state in
            defer { state.nextWait += 1 }
            state.waitingFor[state.nextWait] = what
            return state.nextWait
        }
        self.scheduler.runningTaskWaits(true)
        while !condition() { await self.settle() }
        self.scheduler.runningTaskWaits(false)
        _ = self.state.withLock { $0.waitingFor.removeValue(forKey: token) }
    }

    /// Runs `check` once the scenario has finished and every job it left has run: for what must
    /// hold when everything is over (no iteration left running, no task waiting).
    func atEnd(_ check: @escaping @Sendable () -> Void) {
        self.state.withLock { $0.endChecks.append(check) }
    }

    func bodyFinished() { self.state.withLock { $0.finished = true } }
    var hasFinished: Bool { self.state.withLock { $0.finished } }
    var failures: [String] { self.state.withLock { $0.failures } }
    var notes: [(step: Int, text: String)] { self.state.withLock { $0.notes } }
    var waitingFor: [String] {
        self.state.withLock { $0.waitingFor.sorted { $0.key < $1.key }.map(\.value) }
    }

    func runEndChecks() {
        let checks = self.state.withLock { state in
            defer { state.endChecks = [] }
            return state.endChecks
        }
        for check in checks { check() }
    }
}
