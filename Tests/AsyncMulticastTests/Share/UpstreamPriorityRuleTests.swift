// The rule of MulticastStateMachine+Priority.swift (Guides/Share.md): the upstream task runs
// at least at the priority of every subscriber waiting for an element. These tests drive it
// from outside, with real tasks, in the cases UpstreamTaskTests does not: autoconnect, a
// waiter that left before the upstream started, several priorities at once, a stale
// iteration that ends after the restart, a subscriber escalated while it waits, and the
// previous iteration a restart waits behind.
//
// Priorities are read by the upstream's task itself (the probe); the tests wait for tasks
// through signals, never `task.value` before asserting a priority (awaiting a task raises it).

import Testing

@testable import AsyncMulticast

/// A base each of whose iterations (`makeAsyncIterator()`) has its own go-ahead and records
/// the priority its task runs at when it produces. A go-ahead may name a priority the task is
/// expected to reach: the iteration waits for it under a short hang guard (a raise happens
/// just after a subscriber is registered, outside the lock), then records what it has.
///
/// An iteration that sees its cancellation is slow to stop: it records that it is stopping,
/// waits for `letStop`, then (if `stopFloor` is set) waits for its task to reach that
/// priority under the same short guard, and records the priority it stops at.
private final class PriorityProbe: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    typealias Gate = Signal<(element: Int, raisedTo: TaskPriority?)?>
    let gates = LockedLog<Gate>()
    let seen = LockedLog<(iteration: Int, priority: TaskPriority)>()
    let stopping = LockedLog<Int>()
    let stoppedAt = LockedLog<(iteration: Int, priority: TaskPriority)>()
    let letStop = Latch()
    let stopFloor: TaskPriority?

    /// How long a raise may take to show, once the test has seen what should cause it. A
    /// raise is a synchronous call made just after a critical section: seconds are a hang
    /// guard, not an ordering.
    static let raiseGuard: Double = 10

    init(stopFloor: TaskPriority? = nil) {
        self.stopFloor = stopFloor
    }

    /// Lets iteration `iteration` produce `element` (once it has started), once its task runs
    /// at `raisedTo` or higher if given.
    func send(_ element: Int, to iteration: Int, raisedTo: TaskPriority? = nil) async throws {
        try await waitUntil("iteration \(iteration) started") { self.gates.count > iteration }
        self.gates.values[iteration].send((element, raisedTo))
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let probe: PriorityProbe
        let iteration: Int
        var elements: AsyncStream<(element: Int, raisedTo: TaskPriority?)?>.Iterator

        mutating func next() async -> Int? {
            guard let next = await self.elements.next() ?? nil else {
                if Task.isCancelled {
                    self.probe.stopping.append(self.iteration)
                    await self.probe.letStop.wait()
                    if let floor = self.probe.stopFloor {
                        try? await waitUntil(
                            "iteration \(self.iteration), stopping, raised to \(floor)",
                            seconds: PriorityProbe.raiseGuard
                        ) { Task.currentPriority >= floor }
                    }
                    self.probe.stoppedAt.append((self.iteration, Task.currentPriority))
                }
                return nil
            }
            if let floor = next.raisedTo {
                try? await waitUntil("the upstream raised to \(floor)", seconds: PriorityProbe.raiseGuard) {
                    Task.currentPriority >= floor
                }
            }
            self.probe.seen.append((self.iteration, Task.currentPriority))
            return next.element
        }
    }

    /// Iterations never overlap (the library's promise), so counting, then appending, names
    /// each one.
    func makeAsyncIterator() -> AsyncIterator {
        let gate = Gate()
        let iteration = self.gates.count
        self.gates.append(gate)
        return AsyncIterator(probe: self, iteration: iteration, elements: gate.stream.makeAsyncIterator())
    }
}

/// A base of one element whose first `next()` records, before anything else, the priority
/// its task runs at: the upstream's first step, where a base (or an `AsyncSharedSource`'s
/// `start`) does its set-up work.
private struct FirstStepProbe: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let firstSteps: LockedLog<TaskPriority>

    struct AsyncIterator: AsyncIteratorProtocol {
        let firstSteps: LockedLog<TaskPriority>
        var produced = false

        mutating func next() async -> Int? {
            if self.produced { return nil }
            self.produced = true
            self.firstSteps.append(Task.currentPriority)
            return 1
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(firstSteps: self.firstSteps) }
}

/// Reads one element in a task of `priority`; the result arrives on `got`, so that the test
/// never awaits the task (which would raise it).
private func readOne(
    _ sequence: some AsyncSequence<Int, Never> & Sendable, at priority: TaskPriority, into got: Signal<Int?>
) -> Task<Void, Never> {
    Task(priority: priority) {
        var iterator = sequence.makeAsyncIterator()
        got.send(await iterator.next(isolation: nil))
    }
}

/// Whether this platform can raise a running task (SE-0462): elsewhere the library raises
/// nothing, and nothing here applies.
private var canEscalate: Bool {
    #if compiler(>=6.2)
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) { return true }
    #endif
    return false
}

@Suite("The upstream's priority: every waiting subscriber's, whoever starts it", .timeLimit(.minutes(3)))
struct UpstreamPriorityRuleTests {
    @Test(
        "multicast().autoconnect(): a background subscriber's demand raises the upstream it connects to the highest waiting priority",
        .enabled(if: canEscalate))
    func autoconnectDemandRaisesToEveryWaitingPriority() async throws {
        let probe = PriorityProbe()
        let multicast = probe.multicast()
        let got = Signal<Int?>()
        // Subscribers of the plain multicast wait for a connection, at several priorities.
        for priority in [TaskPriority.background, .utility, .high, .low] {
            _ = readOne(multicast, at: priority, into: got)
        }
        try await waitUntil("four subscribers waiting") { multicast.storage.waitingCount == 4 }
        // A background subscriber of the autoconnecting view waits: its demand connects.
        _ = readOne(multicast.autoconnect(), at: .background, into: got)
        try await probe.send(1, to: 0)
        for _ in 0..<5 { #expect(await got.next("a subscriber got 1") == 1) }
        #expect(probe.seen.values.map(\.priority) == [.high])
    }

    @Test(
        "multicast().autoconnect(minimumSubscribers:): a background join that connects raises the upstream to a subscriber already waiting",
        .enabled(if: canEscalate))
    func autoconnectJoinRaisesToAWaitingSubscriber() async throws {
        let probe = PriorityProbe()
        let feed = probe.multicast().autoconnect(minimumSubscribers: 2)
        let got = Signal<Int?>()
        _ = readOne(feed, at: .high, into: got)
        try await waitUntil("the high-priority subscriber waiting") { feed.storage.waitingCount == 1 }
        // The second subscriber's join (its iterator, from a background task) connects.
        let joined = Signal<Void>()
        Task(priority: .background) {
            var iterator = feed.makeAsyncIterator()
            joined.send(())
            got.send(await iterator.next(isolation: nil))
        }
        _ = await joined.next("the background subscriber joined")
        try await probe.send(1, to: 0)
        for _ in 0..<2 { #expect(await got.next("a subscriber got 1") == 1) }
        #expect(probe.seen.values.map(\.priority) == [.high])
    }

    @Test(
        "multicast(): a high-priority subscriber that left before connect() does not raise the upstream",
        .enabled(if: canEscalate))
    func cancelledWaiterDoesNotRaiseTheUpstream() async throws {
        let probe = PriorityProbe()
        let multicast = probe.multicast()
        let got = Signal<Int?>()
        let high = readOne(multicast, at: .high, into: got)
        try await waitUntil("the high-priority subscriber waiting") { multicast.storage.waitingCount == 1 }
        high.cancel()
        #expect(await got.next("the cancelled subscriber ended") == .some(nil))
        try await waitUntil("the high-priority subscriber gone") { multicast.subscriberCount == 0 }
        // A background subscriber waits, and a background task connects.
        _ = readOne(multicast, at: .background, into: got)
        try await waitUntil("the background subscriber waiting") { multicast.storage.waitingCount == 1 }
        let connected = Signal<Void>()
        Task(priority: .background) {
            _ = multicast.connect()
            connected.send(())
        }
        // connect() raises the new task before it returns, if it raises it at all.
        _ = await connected.next("connect() returned")
        try await probe.send(1, to: 0)
        #expect(await got.next("the background subscriber got 1") == 1)
        #expect(
            probe.seen.values.map(\.priority) == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority])
    }

    // Restart while the stale iteration still runs: the cancelled iteration ends after the
    // next one started, and its end (`finish(epoch:)` of the old epoch) must not make the
    // storage forget the new task, which a high-priority subscriber then still raises.
    @Test(
        "share(): the previous iteration ending after the restart does not stop a waiting subscriber raising the new one",
        .enabled(if: canEscalate))
    func staleIterationEndingKeepsTheNewTaskRaisable() async throws {
        let probe = PriorityProbe()
        let shared = probe.share()
        let got = Signal<Int?>()
        _ = readOne(shared, at: .background, into: got)
        try await probe.send(1, to: 0)
        #expect(await got.next("the first subscriber read") == 1)
        try await waitUntil("iteration 0 stopping") { probe.stopping.values == [0] }
        // A background subscriber restarts the upstream; iteration 1 waits for iteration 0.
        _ = readOne(shared, at: .background, into: got)
        try await waitUntil("the background subscriber waiting") { shared.storage.waitingCount == 1 }
        probe.letStop.release()
        // Iteration 1 began iterating: iteration 0's task, its stale `finish` included, ended.
        try await waitUntil("iteration 1 started") { probe.gates.count == 2 }
        _ = readOne(shared, at: .high, into: got)
        try await waitUntil("both subscribers waiting") { shared.storage.waitingCount == 2 }
        try await probe.send(2, to: 1, raisedTo: .high)
        for _ in 0..<2 { #expect(await got.next("a subscriber got 2") == 2) }
        #expect(probe.seen.values.map(\.iteration) == [0, 1])
        #expect(probe.seen.values.last?.priority == .high)
    }

    /// The faces whose upstream a subscriber raises: `share()`, and a `sharedService` whose
    /// `run()` runs at background priority.
    enum Face: String, CaseIterable, CustomTestStringConvertible {
        case share, sharedService
        var testDescription: String { self.rawValue }
    }

    // DEFECT. "Runs at least at the priority of every subscriber waiting": a subscriber's
    // priority is read once, when it starts waiting. A subscriber whose task is escalated
    // while it waits (what `await readerTask.value` from a .high task does, or an explicit
    // `escalatePriority(to:)`) is a waiting subscriber of higher priority, and nothing raises
    // the upstream for it: the library never learns of the escalation
    // (`withTaskPriorityEscalationHandler` around the suspension would tell it).
    @Test(
        "a subscriber escalated while it waits raises the upstream to its new priority",
        .enabled(if: canEscalate), arguments: Face.allCases)
    func subscriberEscalatedWhileWaitingRaisesTheUpstream(_ face: Face) async throws {
        #if compiler(>=6.2)
            guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else { return }
            let probe = PriorityProbe()
            let sequence: any AsyncSequence<Int, Never> & Sendable
            let waiting: () -> Int
            var hosting: Task<Void, Never>? = nil
            switch face {
            case .share:
                let shared = probe.share()
                (sequence, waiting) = (shared, { shared.storage.waitingCount })
            case .sharedService:
                let service = probe.sharedService(started: .lazily)
                hosting = Task(priority: .background) { await service.run() }
                (sequence, waiting) = (service, { service.storage.waitingCount })
            }
            let got = Signal<Int?>()
            let reader = readOne(sequence, at: .background, into: got)
            try await waitUntil("the background subscriber waiting") { waiting() == 1 }
            try await waitUntil("iteration 0 started") { probe.gates.count == 1 }
            reader.escalatePriority(to: .high)
            try await probe.send(1, to: 0, raisedTo: .high)
            #expect(await got.next("the subscriber got 1") == 1)
            #expect(probe.seen.values.map(\.priority) == [.high])
            hosting?.cancel()
            await hosting?.value
        #endif
    }

    // DEFECT (sharedService only). A restart waits for the previous iteration to end. With
    // share(), the new task awaits the previous one, so raising the new task for the waiting
    // subscriber raises the stopping one too. A hosted run() creates the new task only after
    // the previous one ended, and the stopping task, which the storage already released, is
    // raised by nobody: a .high subscriber waits behind an iteration stopping at run()'s
    // background priority. CHANGELOG: "while a .whileSubscribed service's previous iteration
    // was slow to stop left the upstream at ... run()'s priority".
    @Test(
        "a subscriber waiting for a restart raises the previous iteration that is still stopping",
        .enabled(if: canEscalate), arguments: Face.allCases)
    func waitingSubscriberRaisesTheStoppingIteration(_ face: Face) async throws {
        let probe = PriorityProbe(stopFloor: .high)
        let sequence: any AsyncSequence<Int, Never> & Sendable
        let waiting: () -> Int
        var hosting: Task<Void, Never>? = nil
        switch face {
        case .share:
            let shared = probe.share()
            (sequence, waiting) = (shared, { shared.storage.waitingCount })
        case .sharedService:
            let service = probe.sharedService(started: .whileSubscribed())
            hosting = Task(priority: .background) { await service.run() }
            (sequence, waiting) = (service, { service.storage.waitingCount })
        }
        let got = Signal<Int?>()
        _ = readOne(sequence, at: .background, into: got)
        try await probe.send(1, to: 0)
        #expect(await got.next("the first subscriber read") == 1)
        try await waitUntil("iteration 0 stopping") { probe.stopping.values == [0] }
        _ = readOne(sequence, at: .high, into: got)
        try await waitUntil("the high-priority subscriber waiting") { waiting() == 1 }
        probe.letStop.release()
        try await waitUntil("iteration 0 stopped") { probe.stoppedAt.count == 1 }
        try await probe.send(2, to: 1, raisedTo: .high)
        #expect(await got.next("the high-priority subscriber got 2") == 2)
        // Iteration 1 stops too, once the subscriber leaves: only iteration 0's stop is asserted.
        #expect(probe.stoppedAt.values.first?.priority == .high)
        #expect(probe.seen.values.map(\.iteration) == [0, 1])
        #expect(probe.seen.values.last?.priority == .high)
        hosting?.cancel()
        await hosting?.value
    }

    // DEFECT. "Raised at once": the new task is created under the lock at its start priority
    // (`Task.detached` at .medium; a hosted `Task {}` at run()'s base priority), and raised only
    // after the lock, by the thread that started it (`OutsideLock.raise`, or `host()` after
    // `startHostedUpstream`). Meanwhile the task is already enqueued, and another thread often
    // runs its first step at the start priority while the subscribers wait: on 2 cores, 29 of
    // 50 and 13 of 100 rounds with connect(); with run(), 7 of 50 alone, but sometimes none of
    // 100 beside other tests (its window is shorter). The priority is known under the lock,
    // before the task is created (`upstreamTaskStarted`), so the task could be created at it:
    // then no round can fail. Many rounds, because one round at the start priority is the bug.
    @Test(
        "the first step of an upstream started while a high-priority subscriber waits runs at that priority",
        .enabled(if: canEscalate), arguments: ["connect()", "run()"])
    func firstStepRunsAtTheWaitingPriority(_ starter: String) async throws {
        let firstSteps = LockedLog<TaskPriority>()
        for round in 0..<100 {
            let got = Signal<Int?>()
            let started = Signal<Void>()
            switch starter {
            case "connect()":
                let multicast = FirstStepProbe(firstSteps: firstSteps).multicast()
                _ = readOne(multicast, at: .high, into: got)
                try await waitUntil("the high-priority subscriber waiting") { multicast.storage.waitingCount == 1 }
                Task(priority: .background) {
                    _ = multicast.connect()
                    started.send(())
                }
            default:
                let service = FirstStepProbe(firstSteps: firstSteps).sharedService(started: .lazily)
                _ = readOne(service, at: .high, into: got)
                try await waitUntil("the high-priority subscriber waiting") { service.storage.waitingCount == 1 }
                // run() ends once the base has: the one element, then nil.
                Task(priority: .background) {
                    started.send(())
                    await service.run()
                }
            }
            _ = await started.next("\(starter) called")
            #expect(await got.next("the high-priority subscriber got 1") == 1)
            try await waitUntil("round \(round)'s first step") { firstSteps.count == round + 1 }
            await Task.yield()
        }
        let below = firstSteps.values.filter { $0 < .high }.count
        #expect(below == 0, "\(below) of \(firstSteps.count) upstreams took their first step below .high")
    }
}
