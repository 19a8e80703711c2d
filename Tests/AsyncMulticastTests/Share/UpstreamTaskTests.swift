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
private struct UpstreamProbe: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let gate = Signal<Int?>()
    let seen = LockedLog<(priority: TaskPriority, requestID: String?)>()

    struct AsyncIterator: AsyncIteratorProtocol {
        let probe: UpstreamProbe
        var elements: AsyncStream<Int?>.Iterator

        mutating func next() async -> Int? {
            guard let element = await self.elements.next() ?? nil else { return nil }
            self.probe.seen.append((Task.currentPriority, Request.id))
            return element
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
        probe.gate.send(1)
        probe.gate.send(nil)
        #expect(await reader.value == [1])
        #expect(probe.seen.values.map(\.requestID) == [nil])
    }

    @Test("multicast(): the upstream sees none of connect()'s caller's task-local values")
    func multicastSeesNoTaskLocals() async throws {
        let probe = UpstreamProbe()
        let multicast = probe.multicast()
        var iterator = multicast.makeAsyncIterator()
        _ = Request.$id.withValue("request-2") { multicast.connect() }
        probe.gate.send(7)
        #expect(await iterator.next() == 7)
        #expect(probe.seen.values.map(\.requestID) == [nil])
        probe.gate.send(nil)
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
        let lowGot = Signal<Int>()
        let low = Task(priority: .background) {
            for await n in shared { lowGot.send(n) }
        }
        probe.gate.send(1)
        #expect(await lowGot.next("the low-priority subscriber got 1") == 1)
        // The upstream is back in the base's `next()`, waiting for the gate; the
        // high-priority subscriber joins and waits for an element.
        let high = Task(priority: .high) { () -> Int? in
            var iterator = shared.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("both subscribers waiting") { shared.storage.waitingCount == 2 }
        probe.gate.send(2)
        #expect(await high.value == 2)
        #expect(await lowGot.next("the low-priority subscriber got 2") == 2)
        probe.gate.send(nil)
        await low.value
        let priorities = probe.seen.values.map(\.priority)
        #expect(priorities == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority, .high])
    }

    @Test("multicast(): a high-priority subscriber that waits raises the connected upstream")
    func waitingSubscriberRaisesTheMulticastUpstream() async throws {
        let probe = UpstreamProbe()
        let multicast = probe.multicast()
        let lowGot = Signal<Int>()
        let low = Task(priority: .background) {
            for await n in multicast { lowGot.send(n) }
        }
        try await waitUntil("the low-priority subscriber waiting") { multicast.storage.waitingCount == 1 }
        _ = multicast.connect()
        probe.gate.send(1)
        #expect(await lowGot.next("the low-priority subscriber got 1") == 1)
        let high = Task(priority: .high) { () -> Int? in
            var iterator = multicast.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("both subscribers waiting") { multicast.storage.waitingCount == 2 }
        probe.gate.send(2)
        #expect(await high.value == 2)
        #expect(await lowGot.next("the low-priority subscriber got 2") == 2)
        probe.gate.send(nil)
        await low.value
        let priorities = probe.seen.values.map(\.priority)
        #expect(priorities == [AsyncMulticast.MulticastStorage<Int, Never>.upstreamStartPriority, .high])
    }

    // Guides/Share.md (sharedService): the upstream runs at run()'s priority, "a subscriber of
    // higher priority that waits still raises it, as for share()".
    @Test("sharedService: a high-priority subscriber that waits raises the upstream run() hosts")
    func waitingSubscriberRaisesTheHostedUpstream() async throws {
        let probe = UpstreamProbe()
        let service = probe.sharedService()
        let hosting = Task(priority: .utility) { await service.run() }
        let lowGot = Signal<Int>()
        let low = Task(priority: .utility) {
            for await n in service { lowGot.send(n) }
        }
        probe.gate.send(1)
        #expect(await lowGot.next("the run()-priority subscriber got 1") == 1)
        // The upstream is back in the base's `next()`, waiting for the gate; the
        // high-priority subscriber joins and waits for an element.
        let high = Task(priority: .high) { () -> Int? in
            var iterator = service.makeAsyncIterator()
            return await iterator.next()
        }
        try await waitUntil("both subscribers waiting") { service.storage.waitingCount == 2 }
        probe.gate.send(2)
        #expect(await high.value == 2)
        #expect(await lowGot.next("the run()-priority subscriber got 2") == 2)
        probe.gate.send(nil)
        await low.value
        await hosting.value
        let priorities = probe.seen.values.map(\.priority)
        #expect(priorities == [.utility, .high])
    }
}
