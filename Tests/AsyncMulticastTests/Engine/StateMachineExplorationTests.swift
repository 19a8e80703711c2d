// Every sequence of up to `depth` steps (10; EXPLORATION_DEPTH=<n> in the environment for
// more) of a small scope's alphabet, applied to `MulticastStateMachine` and to the model test's
// reference model, each distinct state once (see Support/StateMachineExplorer.swift). A scope
// is one face (share() and replay() with keep-alive and a hosting run(), multicast() with
// connect / cancel and autoconnect, subjects with senders waiting for room, a hosted run()'s
// own steps), a few buffering policies to join with, waiters at a few priorities, time passing
// and observers where the face has them, at most 3 subscribers and 4 values. Each test prints how many
// distinct states it explored; CONTRIBUTING.md keeps the figures.
//
// A failure prints the shortest failing sequence and how to replay it:
// EXPLORATION_REPLAY='<scope> | <step>; <step>; …' runs it again, on real continuations.

import Foundation  // ProcessInfo, for EXPLORATION_REPLAY
import Testing

@testable import AsyncMulticast

extension ExplorationScope {
    /// Plain readers' joins with each of `policies`.
    static func joins(_ policies: SharedBufferingPolicy...) -> [ModelStep] {
        policies.map { ExplorationScope.join($0) }
    }

    /// The scopes CI explores: every face, every kind of buffering policy, two policies in a
    /// scope where their lanes meet. Sized together to about a million steps (see
    /// CONTRIBUTING.md): a scope with two policies and waiting producers grows fast.
    static let all: [ExplorationScope] = [
        ExplorationScope(
            name: "share(), keep-alive window, hosted",
            config: ModelConfig(mode: .automatic, replay: 0, keepAlive: .window, defaultPolicy: .unbounded)
                .with { $0.keepAliveWindow = .seconds(2) },
            joins: joins(.unbounded, .bounded(2)), subscribers: 2, hostStops: true, timers: true),
        ExplorationScope(
            name: "share(), no keep-alive, hosted",
            config: ModelConfig(mode: .automatic, replay: 0, keepAlive: .off, defaultPolicy: .unbounded),
            joins: joins(.unbounded, .bounded(1)), elements: 3, hostStops: true, waitPriorities: [17, 25]),
        ExplorationScope(
            name: "share(), kept alive forever",
            config: ModelConfig(mode: .automatic, replay: 0, keepAlive: .forever, defaultPolicy: .unbounded),
            joins: joins(.unbounded)),
        ExplorationScope(
            name: "replay(1), keep-alive window, dropping, expiring",
            config: ModelConfig(mode: .automatic, replay: 1, keepAlive: .window, defaultPolicy: .bufferingNewest(1))
                .with {
                    $0.keepAliveWindow = .seconds(1)
                    $0.replayExpiry = .afterWindow
                    $0.replayExpiryWindow = .seconds(2)
                },
            joins: [join(.bufferingNewest(1), events: true), join(.bufferingOldest(1))], subscribers: 2,
            hostStops: true, timers: true),
        ExplorationScope(
            name: "replay(3), kept alive forever, evicting",
            config: ModelConfig(mode: .automatic, replay: 3, keepAlive: .forever, defaultPolicy: .evicting(1)),
            joins: [join(.evicting(1), events: true), join(.unbounded)]),
        ExplorationScope(
            name: "multicast(replay: 1)",
            config: ModelConfig(mode: .manual, replay: 1, defaultPolicy: .bounded(1)),
            joins: joins(.bounded(1), .bufferingOldest(3)), elements: 3, waitPriorities: [17, 25]),
        ExplorationScope(
            name: "multicast().autoconnect(), evicting",
            config: ModelConfig(mode: .manual, replay: 0, autoconnect: true, defaultPolicy: .evicting(1)),
            joins: joins(.evicting(1))),
        ExplorationScope(
            name: "subject(replay: 1), senders waiting for room, observed",
            config: ModelConfig(mode: .push, replay: 1, defaultPolicy: .bounded(1)),
            joins: joins(.bounded(1), .bufferingOldest(0)), subscribers: 2, elements: 3, sendsWaitingForRoom: true,
            waitPriorities: [0], observesCompletion: true),
        ExplorationScope(
            name: "share() hosted by run(), observed",
            config: ModelConfig(mode: .automatic, replay: 0, keepAlive: .off, defaultPolicy: .unbounded)
                .with { $0.hosted = true },
            joins: joins(.unbounded), waitPriorities: [17, 25], hostSteps: true, observesCount: true),
    ]

    /// The scopes to explore: all of them, or those whose name contains `EXPLORATION_SCOPE`.
    static var selected: [ExplorationScope] {
        guard let part = ProcessInfo.processInfo.environment["EXPLORATION_SCOPE"] else { return self.all }
        return self.all.filter { $0.name.contains(part) }
    }

    static func named(_ name: String) -> ExplorationScope? {
        self.all.first { $0.name == name }
    }
}

/// A transition broken on purpose: the explorer must catch it, with a shortest sequence.
enum BrokenTransition: String, CaseIterable, Sendable {
    /// A produce hands its element to every waiting subscriber but the last: the machine
    /// forgets that one waits (it stays at the tail, not resumed). Caught by what the
    /// transition resumes.
    case skipsAWaiter
    /// A produce leaves the element out of the first subscriber that holds it: its cursor
    /// moves past it. Caught by what the subscriber may still receive.
    case dropsADelivery
    /// An upstream task started by `connect()` is not raised to the subscribers already
    /// waiting (`upstreamTaskStarted` raising nothing: the defect of issue 35's first item).
    /// Caught by the upstream's priority, and the invariant that no waiter is above it.
    case startsWithoutRaise
    /// A timer task that is no longer the machine's (the upstream ended, which cancelled
    /// it) acts when it wakes, as if the generation check were gone. Caught by its step.
    case staleTimerActs
    /// The iteration a hosted machine starts is not handed to the `run()` waiting for it
    /// (the machine forgot that it waits). Caught by the hand-over.
    case hostNotWoken

    /// The scope whose shortest failing sequence shows it.
    var scopeName: String {
        switch self {
        case .skipsAWaiter, .dropsADelivery, .staleTimerActs: return "share(), keep-alive window, hosted"
        case .startsWithoutRaise: return "multicast(replay: 1)"
        case .hostNotWoken: return "share() hosted by run(), observed"
        }
    }

    /// The shortest sequence that shows it, in the share() scope.
    var shortest: [ModelStep] {
        switch self {
        // The first read starts the upstream (share()), whether or not it waits.
        case .skipsAWaiter:
            return [ExplorationScope.join(.unbounded), .read(pick: 0, wait: true, priority: 25), .produce]
        case .dropsADelivery: return [ExplorationScope.join(.unbounded), .read(pick: 0, wait: false), .produce]
        case .startsWithoutRaise:
            return [ExplorationScope.join(.bounded(1)), .read(pick: 0, wait: true, priority: 25), .connect]
        case .staleTimerActs:
            return [
                ExplorationScope.join(.unbounded), .read(pick: 0, wait: false), .leave(pick: 0),
                .finish(fail: false), .timerWakes(pick: 0, returned: true),
            ]
        case .hostNotWoken:
            return [ExplorationScope.join(.unbounded), .host(.starts), .host(.asks), .read(pick: 0, wait: false)]
        }
    }

    var transition: ExplorationTransition {
        switch self {
        case .skipsAWaiter:
            return { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
                if case .produce = step { run.machine.forgetLastWaiter() }
                try await run.apply(step)
            }
        case .dropsADelivery:
            return { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
                try await run.apply(step)
                if case .produce = step { run.machine.dropOneDelivery() }
            }
        case .startsWithoutRaise:
            return { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
                try await run.apply(step)
                if case .connect = step { run.machine.upstreamPriority = Machine.detachedUpstreamPriority }
            }
        case .staleTimerActs:
            return { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
                if case .timerWakes(let pick, _) = step, !run.timerTasks.isEmpty {
                    // The machine takes any task that wakes for its own.
                    run.machine.timer.isRunning = true
                    run.machine.timer.generation = run.timerTasks[pick % run.timerTasks.count].generation
                }
                try await run.apply(step)
            }
        case .hostNotWoken:
            return { (run: inout ModelRun, step: ModelStep) async throws(ModelFailure) in
                if case .read = step, case .waiting = run.machine.host, run.machine.upstream == .idle {
                    run.machine.host = .running(pending: nil)
                }
                try await run.apply(step)
            }
        }
    }
}

extension Machine {
    /// The last waiting subscriber stops waiting, its continuation dropped (a broken hand-over).
    mutating func forgetLastWaiter() {
        guard let waiter = self.waiters.popLast() else { return }
        self.slots[Int(waiter.slot)].waiterIndex = -1
        self.lanes[Int(self.slots[Int(waiter.slot)].lane)].waiting -= 1
    }

    /// The first subscriber holding an element in the shared buffer skips it (a lost delivery).
    mutating func dropOneDelivery() {
        for slotIndex in self.slots.indices where self.slots[slotIndex].isLive {
            let slot = self.slots[slotIndex]
            guard slot.lane != Slot.noLane, !slot.readsPrivateQueue, slot.cursor < self.tail,
                slot.cursor >= self.lanes[Int(slot.lane)].minCursor
            else { continue }
            self.commit(1, slot: slotIndex, lane: Int(slot.lane))
            return
        }
    }
}

// CPU-bound for a minute or so: beside the other tests, one scope at a time.
extension HeavyAndTimingSensitive {
    @Suite("State machine: every sequence of a small scope's steps, explored")
    struct StateMachineExplorationTests {
        static let depth = StateMachineExplorer.depth(default: 10)

        /// Explores `scope` on a pool of continuations it releases at the end, under a
        /// watchdog (the search ticks whenever it yields).
        static func explore(
            _ scope: ExplorationScope, depth: Int,
            transition: @escaping ExplorationTransition = StateMachineExplorer.apply
        ) async -> ExplorationReport? {
            let pool = await ContinuationPool.make(subscribers: scope.subscribers + 1, producers: scope.elements + 1)
            let report = try? await withProgressWatchdog("exploring \(scope.name)") { progress in
                await StateMachineExplorer.explore(
                    scope, depth: depth, pool: pool, progress: progress, transition: transition)
            }
            #expect(await pool.release(), "every continuation of the pool resumed once, at the end")
            return report
        }

        @Test("every state within reach agrees with the reference model", arguments: ExplorationScope.selected)
        func exploresEveryState(scope: ExplorationScope) async {
            guard let report = await Self.explore(scope, depth: Self.depth) else { return }
            print("Exploration: \(report)")
            if let failure = report.failure {
                Issue.record("\(scope): \(failure)")
            }
        }

        @Test(
            "a transition broken on purpose is caught, with a shortest failing sequence",
            arguments: BrokenTransition.allCases)
        func catchesABrokenTransition(broken: BrokenTransition) async throws {
            let scope = try #require(ExplorationScope.named(broken.scopeName))
            let report = try #require(await Self.explore(scope, depth: 6, transition: broken.transition))
            let failure = try #require(report.failure, "\(broken) was not caught")
            print("Exploration with \(broken) (expected to fail): \(failure)")
            #expect(failure.steps.map(\.description) == broken.shortest.map(\.description))
        }

        @Test(
            "replays a printed sequence (EXPLORATION_REPLAY)",
            .enabled(if: ProcessInfo.processInfo.environment["EXPLORATION_REPLAY"] != nil))
        func replaysAPrintedSequence() async throws {
            let text = try #require(ProcessInfo.processInfo.environment["EXPLORATION_REPLAY"])
            let bar = try #require(text.firstIndex(of: "|"), "EXPLORATION_REPLAY is '<scope> | <step>; <step>; …'")
            let name = text[..<bar].trimmingCharacters(in: .whitespaces)
            let scope = try #require(ExplorationScope.named(name), "no scope named \(name)")
            let steps = try #require(scope.parse(String(text[text.index(after: bar)...])), "a step not understood")
            print(
                "Replaying \(scope):\n\(steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))"
            )
            if let failure = await ModelRun.run(steps, config: scope.config) {
                Issue.record("\(failure)")
            } else {
                print("Replayed \(steps.count) steps: the machine agrees with the reference model.")
            }
        }
    }
}
