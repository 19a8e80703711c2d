// A bounded exhaustive explorer of `MulticastStateMachine`: from a fresh machine, every sequence
// of up to `depth` steps of a scope's alphabet, breadth first, each step applied to the machine
// and to the model test's reference model (`ModelRun`: one queue per subscriber) and checked
// as the model test checks it (what each read returns and reports, what each transition
// resumes, starts, cancels and times, then `compare()`: the invariants, what each subscriber
// may still receive, the room, the parked producers, the upstream, the timer).
//
// States are deduplicated by a canonical encoding of the machine and the model together
// (`ModelRun.canonicalEncoding()`, in StateMachineExplorer+Encoding.swift), so each distinct
// state is expanded once, at the depth it is first reached: the search is exhaustive up to
// `depth`, and its first failure comes from a shortest failing sequence (breadth first). Subscribers are named by what they hold, never
// by the machine's slot numbers or the order they joined: runs that differ only in the order
// of their subscribers are one state.
//
// A run copies machines, which hold continuations: every continuation the explorer hands over
// is a token of a `ContinuationPool`, suspended for the whole exploration and resumed exactly
// once at its end; `ModelRun.expect` tells them apart by identity and resumes nothing.

import Foundation  // ProcessInfo

@testable import AsyncMulticast

// MARK: - Scopes

/// What the explorer explores: a face (the configuration of the machine), the steps it may
/// take, and the bounds that keep the state space finite.
struct ExplorationScope: Sendable, CustomStringConvertible {
    let name: String
    let config: ModelConfig
    /// The joins of the alphabet (`ModelStep.join`): one per policy and way of reading.
    let joins: [ModelStep]
    /// At most this many subscribers at once.
    var subscribers = 3
    /// At most this many values produced or sent, in all.
    var elements = 4
    /// Whether the alphabet has `send(waitingForRoom:)` (a subject's, with a bounded policy).
    var sendsWaitingForRoom = false
    /// Whether the alphabet has `hostStops` (an `AsyncSharedService`'s `run()` ending).
    var hostStops = false
    /// The priorities a subscriber waits at (`read-or-wait`; a subject's waiters pass 0
    /// whatever this says): not all the same, so that waiters raise the upstream task.
    var waitPriorities: [UInt8] = [25]
    /// Whether time passes: the timer tasks wake (the machine's, its sleep returned; stale
    /// ones of an older generation or cancelled, their sleep returned or failed; the
    /// machine's failing is `keepAliveExpires`) and the clock moves a second forward or back,
    /// within `0...clockLimit` seconds.
    var timers = false
    var clockLimit: Int64 = 2
    /// Whether the alphabet has a hosted `run()`'s steps (`config.hosted`): it starts, asks
    /// for an iteration (cancelled or not), is cancelled while it waits or while an
    /// iteration runs, returns.
    var hostSteps = false
    /// Whether the alphabet has an observer of the subscriber count, registering and leaving,
    /// one at a time; and, a subject's, an observer of its completion.
    var observesCount = false
    var observesCompletion = false

    var description: String {
        "\(self.name) [\(self.config); joins: \(self.joins.map(\.description).joined(separator: ", "))]"
    }

    /// A join step with `policy`, as a plain or a lag-reporting reader.
    static func join(_ policy: SharedBufferingPolicy, events: Bool = false) -> ModelStep {
        guard let index = ModelRun.policies.firstIndex(of: policy) else {
            preconditionFailure("\(policy) is not one of ModelRun.policies")
        }
        return .join(policy: index, reportsGaps: events)
    }

    /// Every step that can change `run` or check something in it, with its subscribers,
    /// producers and senders picked by their index (each pick once).
    func steps(from run: ModelRun) -> [ModelStep] {
        var steps: [ModelStep] = []
        if run.subscribers.count < self.subscribers { steps += self.joins }
        for (k, sub) in run.subscribers.enumerated() {
            if sub.waiting == nil {
                steps.append(.read(pick: k, wait: false))
                // Read-or-wait differs from a read only when nothing is ready.
                if sub.batch.isEmpty && sub.pending.isEmpty {
                    for priority in self.waitPriorities { steps.append(.read(pick: k, wait: true, priority: priority)) }
                }
            }
            steps.append(.leave(pick: k))  // a waiting one's task is cancelled
        }
        let ended = run.terminal != nil
        if run.value < self.elements {
            if self.config.mode == .push {
                steps.append(.produce)
                if self.sendsWaitingForRoom { steps.append(.sendWaitingForRoom) }
            } else if run.currentEpoch != nil
                && run.producers.contains(where: { if case .free = $0 { true } else { false } })
            {
                steps.append(.produce)
            }
        }
        var waiting = 0
        var parked = 0
        for producer in run.producers {
            switch producer {
            case .mustWait: waiting += 1
            case .parked: parked += 1
            case .free: break
            }
        }
        for pick in 0..<waiting {
            steps += [.waitForRoom(pick: pick, park: true), .waitForRoom(pick: pick, park: false)]
        }
        if self.config.mode == .push {
            for pick in 0..<parked { steps.append(.cancelSender(pick: pick)) }
        } else if !run.staleEpochs.isEmpty || ended {
            steps.append(.produceStale)
        }
        if self.config.mode == .manual && !ended {
            steps.append(.connect)
            if run.currentEpoch != nil { steps.append(.disconnect(stale: false)) }
            if !run.staleEpochs.isEmpty { steps.append(.disconnect(stale: true)) }
        }
        if run.timerRunning { steps.append(.keepAliveExpires) }
        if !ended && run.currentEpoch != nil { steps += [.finish(fail: false), .finish(fail: true)] }
        if self.hostStops && !ended { steps.append(.hostStops) }
        if self.timers { steps += self.timerSteps(from: run) }
        if self.hostSteps { steps += Self.hostSteps(from: run) }
        if self.observesCount {
            steps.append(run.countObservers.isEmpty ? .observe(.count) : .observe(.stopCount(pick: 0)))
        }
        if self.observesCompletion {
            steps.append(run.completionObservers.isEmpty ? .observe(.completion) : .observe(.stopCompletion(pick: 0)))
        }
        return steps
    }

    /// Time passing: every timer task not yet returned wakes, its sleep returned or failed;
    /// the clock moves a second, within `0...clockLimit`.
    func timerSteps(from run: ModelRun) -> [ModelStep] {
        var steps: [ModelStep] = []
        for (pick, task) in run.timerTasks.enumerated() {
            steps.append(.timerWakes(pick: pick, returned: true))
            if task.generation != run.timerGeneration || !run.timerRunning {
                steps.append(.timerWakes(pick: pick, returned: false))
            }
        }
        if run.time < .seconds(self.clockLimit) { steps.append(.clockMoves(seconds: 1)) }
        if run.time > .zero { steps.append(.clockMoves(seconds: -1)) }
        return steps
    }

    /// A hosted `run()`'s steps that do something where it is.
    static func hostSteps(from run: ModelRun) -> [ModelStep] {
        switch run.host {
        case .notStarted, .ended: return [.host(.starts)]
        case .waiting: return [.host(.waitCancelled)]
        case .running:
            if run.hostRunsAnIteration { return [.host(.cancelled)] }
            return [.host(.asks), .host(.asksCancelled), .host(.ends)]
        case .notHosted: return []
        }
    }

    /// Every step the alphabet may ever take (picks up to the bounds): what a printed
    /// sequence is parsed against.
    var alphabet: [ModelStep] {
        var steps = self.joins + [.produce, .sendWaitingForRoom, .connect, .produceStale, .hostStops]
        steps += [.keepAliveExpires, .disconnect(stale: false), .disconnect(stale: true)]
        steps += [.finish(fail: false), .finish(fail: true)]
        steps += [.clockMoves(seconds: 1), .clockMoves(seconds: -1)]
        steps += [.starts, .asks, .asksCancelled, .waitCancelled, .cancelled, .ends].map { ModelStep.host($0) }
        steps += [.count, .stopCount(pick: 0), .completion, .stopCompletion(pick: 0)].map { ModelStep.observe($0) }
        for pick in 0..<Swift.max(self.subscribers, self.elements) {
            steps += [.read(pick: pick, wait: false), .leave(pick: pick)]
            steps += self.waitPriorities.map { .read(pick: pick, wait: true, priority: $0) }
            steps += [.timerWakes(pick: pick, returned: true), .timerWakes(pick: pick, returned: false)]
            steps += [.waitForRoom(pick: pick, park: true), .waitForRoom(pick: pick, park: false)]
            steps.append(.cancelSender(pick: pick))
        }
        return steps
    }

    /// The steps of `text`, as a failure prints them (descriptions separated by `;`).
    func parse(_ text: String) -> [ModelStep]? {
        let alphabet = self.alphabet
        var steps: [ModelStep] = []
        for part in text.split(separator: ";") {
            let description = part.trimmingCharacters(in: .whitespaces)
            guard let step = alphabet.first(where: { $0.description == description }) else { return nil }
            steps.append(step)
        }
        return steps
    }
}

// MARK: - The search

/// What an exploration found.
struct ExplorationReport: Sendable, CustomStringConvertible {
    let scope: String
    let depth: Int
    /// Distinct states reached (the initial one included).
    var states = 1
    /// Steps applied (each from a distinct state).
    var transitions = 0
    /// New states per depth: `[1, …]`; ends early when no step leads anywhere new.
    var statesByDepth = [1]
    var seconds = 0.0
    var failure: ExplorationFailure?

    var description: String {
        let levels = self.statesByDepth.map(String.init).joined(separator: " ")
        let outcome = self.failure.map { "FAILED: \($0)" } ?? "no failure"
        return
            "\(self.scope): \(self.states) distinct states, \(self.transitions) transitions, depth \(self.depth) (new states by depth: \(levels)), \(String(format: "%.1f", self.seconds)) s, \(outcome)"
    }
}

/// A failing sequence, shortest: what a failure prints, replayable (`replayHint`).
struct ExplorationFailure: Sendable, CustomStringConvertible {
    let scopeName: String
    let steps: [ModelStep]
    let failure: ModelFailure

    /// The steps as `ExplorationScope.parse(_:)` reads them back.
    var sequence: String { self.steps.map(\.description).joined(separator: "; ") }

    var replayHint: String {
        "EXPLORATION_REPLAY='\(self.scopeName) | \(self.sequence)' swift test --filter replaysAPrintedSequence"
    }

    var description: String {
        """
        after \(self.steps.count) steps: \(self.failure.message)
        \(self.steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
        replay: \(self.replayHint)
        """
    }
}

/// A transition of the explorer: applies one step to a run (the model and the machine), and
/// throws what the model test would report. A test can break one on purpose (see the
/// mutation check) to see that the explorer catches it.
typealias ExplorationTransition = @Sendable (inout ModelRun, ModelStep) async throws(ModelFailure) -> Void

enum StateMachineExplorer {
    /// The bound on the length of the sequences explored: `EXPLORATION_DEPTH` in the
    /// environment raises (or lowers) `defaultDepth`.
    static func depth(default defaultDepth: Int) -> Int {
        guard let text = ProcessInfo.processInfo.environment["EXPLORATION_DEPTH"], let depth = Int(text) else {
            return defaultDepth
        }
        return Swift.max(1, depth)
    }

    /// The transition of the reference model: `ModelRun.apply`.
    static let apply: ExplorationTransition = { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
        try await run.apply(step)
    }

    /// Explores `scope` breadth first up to `depth` steps; stops at the first failure (a
    /// shortest one). `pool` provides the continuations; `progress` is ticked whenever the
    /// search yields, every few milliseconds.
    static func explore(
        _ scope: ExplorationScope, depth: Int, pool: ContinuationPool, progress: WatchdogProgress? = nil,
        transition: ExplorationTransition = apply
    ) async -> ExplorationReport {
        let clock = ContinuousClock()
        let start = clock.now
        var lastYield = start
        var report = ExplorationReport(scope: scope.name, depth: depth)
        let root = ModelRun(config: scope.config, pool: pool)
        var visited: Set<StateKey> = [StateKey(root.canonicalEncoding())]
        // How each state was first reached: its parent's index and the step.
        var reachedBy: [(parent: Int, step: ModelStep)] = [(-1, .produce)]
        var frontier: [(index: Int, run: ModelRun)] = [(0, root)]
        func path(to index: Int) -> [ModelStep] {
            var steps: [ModelStep] = []
            var index = index
            while index > 0 {
                steps.append(reachedBy[index].step)
                index = reachedBy[index].parent
            }
            return steps.reversed()
        }
        for level in 0..<depth {
            var next: [(index: Int, run: ModelRun)] = []
            var newStates = 0
            for (index, run) in frontier {
                for step in scope.steps(from: run) {
                    var child = run
                    child.step = level
                    report.transitions += 1
                    do {
                        // What the step returns and resumes is checked every time; the state
                        // it leads to only when new (`compare()` reads nothing the encoding
                        // leaves out: a state seen before was checked then).
                        try await transition(&child, step)
                        try child.checkNotices()
                        if visited.insert(StateKey(child.canonicalEncoding())).inserted {
                            try child.compare()
                            reachedBy.append((index, step))
                            // The last level is not expanded: only counted.
                            if level < depth - 1 { next.append((reachedBy.count - 1, child)) }
                            newStates += 1
                        }
                    } catch {
                        report.failure = ExplorationFailure(
                            scopeName: scope.name, steps: path(to: index) + [step], failure: error)
                        report.seconds = (clock.now - start).seconds
                        return report
                    }
                    // A step never suspends: let the tests beside this one run every few ms.
                    if report.transitions % 16 == 0, clock.now - lastYield > .milliseconds(2) {
                        await Task.yield()
                        progress?.tick()
                        lastYield = clock.now
                    }
                }
            }
            if newStates == 0 { break }
            report.statesByDepth.append(newStates)
            report.states += newStates
            frontier = next
        }
        report.seconds = (clock.now - start).seconds
        return report
    }
}

extension Duration {
    /// In seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
