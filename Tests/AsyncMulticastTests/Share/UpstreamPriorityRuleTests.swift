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

// Every test needs a platform that raises a running task: the trait is the suite's.
@Suite(
    "The upstream's priority: every waiting subscriber's, whoever starts it", .enabled(if: canEscalate),
    .timeLimit(.minutes(3)))
struct UpstreamPriorityRuleTests {
    /// Where each test's readers send what they read (`readOne`): the test's own, since Swift
    /// Testing makes a suite value for every test.
    let got = Signal<Int?>()

    @Test(
        "multicast().autoconnect(): a background subscriber's demand raises the upstream it connects to the highest waiting priority"
    )
    func autoconnectDemandRaisesToEveryWaitingPriority() async throws {
        let probe = IterationsProbe()
        let multicast = probe.multicast()
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
        "multicast().autoconnect(minimumSubscribers:): a background join that connects raises the upstream to a subscriber already waiting"
    )
    func autoconnectJoinRaisesToAWaitingSubscriber() async throws {
        let probe = IterationsProbe()
        let feed = probe.multicast().autoconnect(minimumSubscribers: 2)
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
        "multicast(): a high-priority subscriber that left before connect() does not raise the upstream")
    func cancelledWaiterDoesNotRaiseTheUpstream() async throws {
        let probe = IterationsProbe()
        let multicast = probe.multicast()
        let high = readOne(multicast, at: .high, into: got)
        try await waitUntil("the high-priority subscriber waiting") { multicast.storage.waitingCount == 1 }
        high.cancel()
        #expect(await got.next("the cancelled subscriber ended") == .some(nil))
        try await waitUntil("the high-priority subscriber gone") { multicast.subscriberCount == 0 }
        // A background subscriber waits, and a background task connects.
        _ = readOne(multicast, at: .background, into: got)
        try await waitUntil("the background subscriber waiting") { multicast.storage.waitingCount == 1 }
        await connectFromABackgroundTask(multicast)
        try await probe.send(1, to: 0)
        #expect(await got.next("the background subscriber got 1") == 1)
        #expect(
            probe.seen.values.map(\.priority) == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority])
    }

    // Restart while the stale iteration still runs: the cancelled iteration ends after the
    // next one started, and its end (`finish(epoch:)` of the old epoch) must not make the
    // storage forget the new task, which a high-priority subscriber then still raises.
    @Test(
        "share(): the previous iteration ending after the restart does not stop a waiting subscriber raising the new one"
    )
    func staleIterationEndingKeepsTheNewTaskRaisable() async throws {
        let probe = IterationsProbe()
        let shared = probe.share()
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
    enum Face: String, NamedTestCase {
        case share, sharedService

        /// This face of `probe` (a service `started` so, hosted by a background task): the
        /// sequence, its count of waiting subscribers, and the hosting task if any.
        func make(
            _ probe: IterationsProbe, started: SharingStarted
        ) -> (any AsyncSequence<Int, Never> & Sendable, () -> Int, Task<Void, Never>?) {
            switch self {
            case .share:
                let shared = probe.share()
                return (shared, { shared.storage.waitingCount }, nil)
            case .sharedService:
                let service = probe.sharedService(started: started)
                return (service, { service.storage.waitingCount }, Task(priority: .background) { await service.run() })
            }
        }
    }

    // A KNOWN LIMITATION (Guides/Share.md): a subscriber's priority is read when it starts
    // waiting. A subscriber whose task is escalated while it waits (`await readerTask.value`
    // from a .high task, or `escalatePriority(to:)`) raises the upstream only the next time it
    // waits: the library does not learn of the escalation. Telling it would take an
    // escalation handler (`withTaskPriorityEscalationHandler`) registered around every wait,
    // a second status record beside the cancellation handler's on the hottest path. Disabled
    // until that is measured and decided; it fails today (after its 10 s raise guard).
    @Test(
        "a subscriber escalated while it waits raises the upstream to its new priority",
        .disabled("a known limitation: an escalation while waiting is not observed (see above)"),
        arguments: Face.allCases)
    func subscriberEscalatedWhileWaitingRaisesTheUpstream(_ face: Face) async throws {
        #if compiler(>=6.2)
            guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else { return }
            let probe = IterationsProbe()
            let (sequence, waiting, hosting) = face.make(probe, started: .lazily)
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

    // A restart waits for the previous iteration to end: with share() the new task awaits the
    // previous one, so creating it at the waiting subscriber's priority raises the stopping one
    // too; a hosted run() finishes the stopping task before it creates the new one, so the
    // storage raises the stopping task itself (`upstreamTaskWaitedBehind`, and a waiter's own
    // raise applied to the retiring task).
    @Test(
        "a subscriber waiting for a restart raises the previous iteration that is still stopping",
        arguments: Face.allCases)
    func waitingSubscriberRaisesTheStoppingIteration(_ face: Face) async throws {
        let probe = IterationsProbe(stopFloor: .high)
        let (sequence, waiting, hosting) = face.make(probe, started: .whileSubscribed())
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

    // "From its first step": the task is created at the waiting subscribers' priority, under
    // the lock where the machine knows it (`upstreamTaskStarted`), not raised after the lock,
    // by when another thread had often run its first step at the start priority (29 of 50
    // rounds with connect() on 2 cores, before). Many rounds: one below the priority fails.
    @Test(
        "the first step of an upstream started while a high-priority subscriber waits runs at that priority",
        arguments: ["connect()", "run()"])
    func firstStepRunsAtTheWaitingPriority(_ starter: String) async throws {
        let firstSteps = LockedLog<TaskPriority>()
        for round in 0..<100 {
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
