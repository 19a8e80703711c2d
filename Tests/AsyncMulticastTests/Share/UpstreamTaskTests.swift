// The task the upstream runs in: which task-local values it sees (none: it is detached, so
// it never takes those of whichever subscriber asked first), and its priority (a detached
// task's, raised to that of a subscriber of higher priority that waits for an element).

import Testing

@testable import AsyncMulticast

private enum Request {
    @TaskLocal static var id: String?
}

/// A base whose `next()` waits for the test's go-ahead, then records what the task it runs
/// in sees (its priority and `Request.id`) and returns the element it was given.
///
/// A go-ahead may name the priority the upstream is expected to have been raised to: a
/// subscriber raises the upstream just after it is registered as waiting, outside the lock,
/// so a test that saw it waiting may send before the raise. The probe then waits (under a
/// hang guard) for its task to reach that priority before it records; a raise that never
/// comes still fails the test.
private struct UpstreamProbe: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let gate = Signal<(element: Int, raisedTo: TaskPriority?)?>()
    let seen = LockedLog<(priority: TaskPriority, requestID: String?)>()

    /// Lets the base produce `element`, once its task runs at `raisedTo` or higher if given.
    func send(_ element: Int, raisedTo: TaskPriority? = nil) {
        self.gate.send((element, raisedTo))
    }

    /// Lets the base end.
    func finish() {
        self.gate.send(nil)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let probe: UpstreamProbe
        var elements: AsyncStream<(element: Int, raisedTo: TaskPriority?)?>.Iterator

        mutating func next() async -> Int? {
            guard let next = await self.elements.next() ?? nil else { return nil }
            if let floor = next.raisedTo {
                try? await waitUntil("the upstream raised to \(floor)") { Task.currentPriority >= floor }
            }
            self.probe.seen.append((Task.currentPriority, Request.id))
            return next.element
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(probe: self, elements: self.gate.stream.makeAsyncIterator())
    }
}

@Suite("The upstream task: task-local values and priority", .timeLimit(.minutes(3)))
struct UpstreamTaskTests {
    @Test("share(): the upstream sees none of the first subscriber's task-local values")
    func shareSeesNoTaskLocals() async throws {
        let probe = UpstreamProbe()
        let shared = probe.share()
        let reader = Request.$id.withValue("request-1") {
            Task { () -> [Int] in
                #expect(Request.id == "request-1")
                var received: [Int] = []
                for await n in shared { received.append(n) }
                return received
            }
        }
        probe.send(1)
        probe.finish()
        #expect(await reader.value == [1])
        #expect(probe.seen.values.map(\.requestID) == [nil])
    }

    @Test("multicast(): the upstream sees none of connect()'s caller's task-local values")
    func multicastSeesNoTaskLocals() async throws {
        let probe = UpstreamProbe()
        let multicast = probe.multicast()
        var iterator = multicast.makeAsyncIterator()
        _ = Request.$id.withValue("request-2") { multicast.connect() }
        probe.send(7)
        #expect(await iterator.next() == 7)
        #expect(probe.seen.values.map(\.requestID) == [nil])
        probe.finish()
        #expect(await iterator.next() == nil)
    }

    @Test("AsyncSharedSource: start runs without the first subscriber's task-local values")
    func sourceSeesNoTaskLocals() async throws {
        let seen = LockedLog<String?>()
        let source = AsyncSharedSource<Int, Never> { emitter in
            seen.append(Request.id)
            emitter.send(1)
            emitter.finish()
            return {}
        }
        let received = await Request.$id.withValue("request-3") { () async -> [Int] in
            var received: [Int] = []
            for await n in source { received.append(n) }
            return received
        }
        #expect(received == [1])
        #expect(seen.values == [nil])
    }

    @Test("a low-priority first subscriber does not lower the upstream; a high-priority one that waits raises it")
    func waitingSubscriberRaisesTheUpstream() async throws {
        let probe = UpstreamProbe()
        let shared = probe.share()
        let priorities = try await Self.prioritiesSeen(
            by: probe, through: shared, first: .background, waiting: { shared.storage.waitingCount })
        #expect(priorities == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority, .high])
    }

    @Test("multicast(): a high-priority subscriber that waits raises the connected upstream")
    func waitingSubscriberRaisesTheMulticastUpstream() async throws {
        let probe = UpstreamProbe()
        let multicast = probe.multicast()
        let priorities = try await Self.prioritiesSeen(
            by: probe, through: multicast, first: .background, waiting: { multicast.storage.waitingCount },
            whenTheFirstWaits: { _ = multicast.connect() })
        #expect(priorities == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority, .high])
    }

    // Guides/Share.md (sharedService): the upstream runs at run()'s priority, "a subscriber of
    // higher priority that waits still raises it, as for share()".
    @Test("sharedService: a high-priority subscriber that waits raises the upstream run() hosts")
    func waitingSubscriberRaisesTheHostedUpstream() async throws {
        let probe = UpstreamProbe()
        let service = probe.sharedService()
        let hosting = Task(priority: .utility) { await service.run() }
        let priorities = try await Self.prioritiesSeen(
            by: probe, through: service, first: .utility, waiting: { service.storage.waitingCount })
        await hosting.value
        #expect(priorities == [.utility, .high])
    }

    // The rule of MulticastStateMachine+Priority.swift: an upstream task that starts is raised
    // at once to the highest priority among the subscribers already waiting, whoever started it.

    @Test("multicast(): a connect() from a background task raises the upstream to a subscriber already waiting")
    func connectRaisesTheUpstreamToAWaitingSubscriber() async throws {
        let probe = UpstreamProbe()
        let multicast = probe.multicast()
        let high = Task(priority: .high) { () -> Int? in
            var iterator = multicast.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("the subscriber waiting") { multicast.storage.waitingCount == 1 }
        await connectFromABackgroundTask(multicast)
        probe.send(1, raisedTo: .high)
        #expect(await high.value == 1)
        probe.finish()
        #expect(probe.seen.values.map(\.priority) == [.high])
    }

    @Test("sharedService: a run() begun at background priority raises the upstream to a subscriber already waiting")
    func runRaisesTheUpstreamToAWaitingSubscriber() async throws {
        let probe = UpstreamProbe()
        let service = probe.sharedService(started: .lazily)
        let high = Task(priority: .high) { () -> Int? in
            var iterator = service.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("the subscriber waiting") { service.storage.waitingCount == 1 }
        let hosting = Task(priority: .background) { await service.run() }
        probe.send(1, raisedTo: .high)
        #expect(await high.value == 1)
        hosting.cancel()
        await hosting.value
        #expect(probe.seen.values.map(\.priority) == [.high])
    }

    /// How a face's restart is driven: `share()`, or a `sharedService` whose `run()` runs at
    /// background priority.
    enum RestartingFace: String, NamedTestCase {
        case share, sharedService
    }

    @Test(
        "a restarted upstream is raised to a subscriber that waited while the previous iteration was slow to stop",
        arguments: RestartingFace.allCases)
    func restartRaisesTheUpstreamToAWaitingSubscriber(_ face: RestartingFace) async throws {
        let probe = IterationsProbe()
        let sequence: any AsyncSequence<Int, Never> & Sendable
        var hosting: Task<Void, Never>? = nil
        switch face {
        case .share:
            sequence = probe.share()
        case .sharedService:
            let service = probe.sharedService(started: .whileSubscribed())
            hosting = Task(priority: .background) { await service.run() }
            sequence = service
        }
        // Iteration 0, for a background subscriber that reads one element and leaves: the
        // last subscriber leaving stops it, and it is slow to stop.
        let firstGot = Signal<Int?>()
        Task(priority: .background) {
            var iterator = sequence.makeAsyncIterator()
            firstGot.send(await iterator.next(isolation: nil))
        }
        try await probe.send(1, to: 0)
        #expect(await firstGot.next("the first subscriber read") == 1)
        try await waitUntil("iteration 0 stopping") { probe.stopping.values == [0] }
        // A high-priority subscriber waits while iteration 0 still runs: iteration 1 starts
        // once it ends, and must run at the waiting subscriber's priority.
        let high = Task(priority: .high) { () -> Int? in
            var iterator = sequence.makeAsyncIterator()
            return await iterator.next(isolation: nil)
        }
        try await waitUntil("the high-priority subscriber waiting") { probe.waitingCount(of: sequence) == 1 }
        probe.letStop.release()
        try await probe.send(2, to: 1, raisedTo: .high)
        #expect(await high.value == 2)
        hosting?.cancel()
        await hosting?.value
        #expect(probe.seen.values.map(\.iteration) == [0, 1])
        #expect(probe.seen.values.last?.priority == .high)
    }

    /// A subscriber at priority `first` waits (`whenTheFirstWaits` runs then) and reads 1;
    /// then a `.high` one joins and waits while the upstream is back in the base's `next()`;
    /// both read 2, and the base ends. Returns the priorities the upstream's task had when it
    /// produced 1 and 2.
    fileprivate static func prioritiesSeen(
        by probe: UpstreamProbe, through sequence: some AsyncSequence<Int, Never> & Sendable,
        first: TaskPriority, waiting: @escaping () -> Int, whenTheFirstWaits: () -> Void = {}
    ) async throws -> [TaskPriority] {
        let firstGot = Signal<Int>()
        let firstReader = Task(priority: first) {
            for await n in sequence { firstGot.send(n) }
        }
        try await waitUntil("the first subscriber waiting") { waiting() == 1 }
        whenTheFirstWaits()
        probe.send(1)
        #expect(await firstGot.next("the first subscriber got 1") == 1)
        let high = Task(priority: .high) { () -> Int? in
            var iterator = sequence.makeAsyncIterator()
            return await iterator.next(isolation: nil)
        }
        try await waitUntil("both subscribers waiting") { waiting() == 2 }
        probe.send(2, raisedTo: .high)
        #expect(await high.value == 2)
        #expect(await firstGot.next("the first subscriber got 2") == 2)
        probe.finish()
        await firstReader.value
        return probe.seen.values.map(\.priority)
    }
}
