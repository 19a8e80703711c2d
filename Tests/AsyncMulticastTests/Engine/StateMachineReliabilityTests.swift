// Transition-level regression tests for what the engine must never do again: count elements a
// subscriber was already handed against its bound, let the subscribers of an ended multicast
// connection weigh on the next one, keep lanes of policies nobody uses, or ask a base that
// ignores cancellation for more than the element it was computing.

import Testing

@testable import AsyncMulticast

@Suite("State machine: bounds, connections and lanes")
struct StateMachineReliabilityTests {
    /// Reads like a `SharedIterator` does: from its batch first, refilling it when empty.
    struct BatchingReader {
        let id: SubscriberID
        var batch: [Int] = []

        mutating func next(_ machine: inout Machine) -> Int? {
            if !self.batch.isEmpty { return self.batch.removeFirst() }
            var lending: [Int]? = []
            defer { self.batch = lending ?? [] }
            var report = ReadReport()
            switch machine.nextRequested(self.id, batch: &lending, report: &report) {
            case .element(let element, _): return element
            // No gap: this reader does not report gaps.
            case .ended, .endedNoticed, .nothingReady, .nothingReadyStartingUpstream, .gap: return nil
            case .elementReleasingSenders: preconditionFailure("no sender waits for room in these tests")
            }
        }
    }

    // MARK: A batch counts as handed over

    @Test("a batch taken in one read no longer counts against the bound")
    func batchIsHandedOver() {
        var machine = Machine(policy: .bounded(8), replay: 0, mode: .push)
        var reader = BatchingReader(id: machine.subscriberJoined())
        for i in 0..<8 { _ = machine.produce(i, epoch: 0, respectingBounds: false) }
        #expect(!machine.hasRoom)
        #expect(reader.next(&machine) == 0)
        #expect(reader.batch.count == 4, "half the bound is taken at once")
        #expect(machine.tail - machine.lanes[0].minCursor == 3, "only the 3 not handed over are pending")
        #expect(machine.hasRoom)
    }

    @Test("after everything sent was read, a full bound of sends fits without waiting", arguments: [1, 2, 3, 4, 8, 64])
    func fullBoundFitsAfterReadingEverything(bound: Int) {
        var machine = Machine(policy: .bounded(bound), replay: 0, mode: .push)
        var reader = BatchingReader(id: machine.subscriberJoined())
        for i in 0..<bound { _ = machine.produce(i, epoch: 0, respectingBounds: false) }
        for i in 0..<bound { #expect(reader.next(&machine) == i) }
        for i in 0..<bound {
            guard case .proceed = machine.produceIfRoom(100 + i, epoch: 0) else {
                Issue.record("send \(i) of \(bound) had to wait with nothing unread")
                return
            }
        }
        #expect(machine.produceIfRoom(-1, epoch: 0) == nil, "the bound is full now")
    }

    @Test("a subscriber that echoes each element back never waits for room it holds itself", arguments: 1...64)
    func echoNeverWaitsForItself(bound: Int) {
        var machine = Machine(policy: .bounded(bound), replay: 0, mode: .push)
        var reader = BatchingReader(id: machine.subscriberJoined())
        let burst = max(1, bound - 1)
        for i in 0..<burst { _ = machine.produce(i, epoch: 0, respectingBounds: false) }
        var received: [Int] = []
        while received.count < 3 * bound + 5 {
            guard let element = reader.next(&machine) else {
                Issue.record("bound \(bound): nothing to read after \(received.count)")
                return
            }
            received.append(element)
            // The echo: the subscriber is the producer, so no one else could make room.
            guard case .proceed = machine.produceIfRoom(element + 1_000, epoch: 0) else {
                Issue.record("bound \(bound): the echo of \(element) would wait forever")
                return
            }
        }
        // The burst, then its echoes, then theirs: round r of the burst is shifted by 1000 r.
        #expect(received == received.indices.map { k in k % burst + 1_000 * (k / burst) })
    }

    // MARK: An ended connection's subscribers

    @Test("old subscribers of an ended connection do not hold back the next one")
    func oldSubscribersDoNotCountForTheNextConnection() {
        var machine = Machine(policy: .bounded(2), replay: 0, mode: .manual)
        let old = machine.subscriberJoined()
        let first = machine.connectRequested().epoch!
        #expect(machine.produce(1, epoch: first).isProceed)
        #expect(machine.produce(2, epoch: first).isPark, "old holds 2 of 2")
        _ = machine.connectionCancelled(epoch: first)
        #expect(machine.lanes.isEmpty, "old left its lane at once")

        let new = machine.subscriberJoined()
        let second = machine.connectRequested().epoch!
        for i in 10..<20 {
            let action = machine.produce(i, epoch: second)
            #expect(!action.isStop)
            #expect(machine.drain(new) == [i], "new reads each element while old reads nothing")
        }
        #expect(machine.drain(old) == [1, 2])
        #expect(machine.take(old) == .finished)
        #expect(!machine.isSubscribed(old))
    }

    @Test(
        "old subscribers keep exactly what was buffered for them and never see the next connection",
        arguments: [
            (SharedBufferingPolicy.bounded(2), [1, 2, 3]),  // a push that cannot wait buffers past the bound
            (.unbounded, [1, 2, 3]),
            (.bufferingNewest(2), [2, 3]),
            (.bufferingOldest(2), [1, 2]),
            (.bufferingNewest(0), []),
            (.bufferingOldest(0), []),
        ])
    func oldSubscribersKeepTheirBuffer(policy: SharedBufferingPolicy, expected: [Int]) {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let old = machine.subscriberJoined(policy: policy)
        let first = machine.connectRequested().epoch!
        for i in 1...3 { _ = machine.produce(i, epoch: first, respectingBounds: false) }
        _ = machine.connectionCancelled(epoch: first)

        let second = machine.connectRequested().epoch!
        for i in 10..<15 { _ = machine.produce(i, epoch: second, respectingBounds: false) }
        #expect(machine.drain(old) == expected)
        #expect(machine.take(old) == .finished)
        #expect(machine.bufferedCount == 0, "nobody reads the second connection: nothing kept")
    }

    @Test("a .bufferingOldest subscriber reading from its own queue at the end keeps that queue")
    func detachedSubscriberKeepsItsQueue() {
        var machine = Machine(policy: .bufferingOldest(2), replay: 0, mode: .manual)
        let old = machine.subscriberJoined()
        let first = machine.connectRequested().epoch!
        for i in 1...3 { _ = machine.produce(i, epoch: first) }  // keeps 1, 2; drops 3
        #expect(machine.take(old) == .element(1))  // now reads a private queue [2]
        _ = machine.produce(4, epoch: first)  // it has room again: [2, 4]
        _ = machine.connectionCancelled(epoch: first)
        let second = machine.connectRequested().epoch!
        _ = machine.produce(10, epoch: second)
        #expect(machine.drain(old) == [2, 4])
        #expect(machine.take(old) == .finished)
    }

    @Test("a subscriber that joins between connections belongs to the next one")
    func subscriberBetweenConnections() {
        var machine = Machine(policy: .bounded(4), replay: 1, mode: .manual)
        let first = machine.connectRequested().epoch!
        _ = machine.produce(1, epoch: first)
        _ = machine.connectionCancelled(epoch: first)
        let between = machine.subscriberJoined()
        #expect(machine.take(between) == .element(1), "the replay window survives the connection")
        let second = machine.connectRequested().epoch!
        _ = machine.produce(2, epoch: second)
        _ = machine.connectionCancelled(epoch: second)
        #expect(machine.drain(between) == [2])
        #expect(machine.take(between) == .finished)
    }

    // MARK: Lanes exist only while they have members

    @Test("distinct policies used once and dropped leave no lane behind")
    func lanesOfLeftPoliciesGo() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .push)
        let steady = machine.subscriberJoined()
        for k in 0..<70_000 {  // more than any 16-bit lane index could number
            // Seconds of work under a sanitizer: let the tests beside it run now and then.
            if k % 50 == 0 { await Task.yield() }
            let view = machine.subscriberJoined(policy: .bufferingNewest(k + 1))
            _ = machine.produce(k, epoch: 0, respectingBounds: false)
            #expect(machine.lanes.count == 2)
            #expect(machine.take(view) == .element(k))
            _ = machine.subscriberLeft(view)
            #expect(machine.take(steady) == .element(k))
        }
        #expect(machine.lanes.count == 1, "only the steady subscriber's lane is left")
        _ = machine.subscriberLeft(steady)
        #expect(machine.lanes.isEmpty)
    }

    @Test("removing a lane renumbers the subscribers of the lane that takes its place")
    func laneRemovalRenumbers() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .push)
        let a = machine.subscriberJoined(policy: .bounded(3))
        let b = machine.subscriberJoined(policy: .bufferingNewest(2))
        let c = machine.subscriberJoined(policy: .bufferingOldest(2))
        let c2 = machine.subscriberJoined(policy: .bufferingOldest(2))
        for i in 1...3 { _ = machine.produce(i, epoch: 0, respectingBounds: false) }
        _ = machine.subscriberLeft(a)  // the .bufferingOldest lane moves into index 0
        #expect(machine.lanes.count == 2)
        #expect(machine.lanes.map(\.members).reduce(0, +) == 3)
        _ = machine.produce(4, epoch: 0, respectingBounds: false)
        #expect(machine.drain(b) == [3, 4])
        #expect(machine.drain(c) == [1, 2])
        #expect(machine.hasRoom)
        _ = machine.subscriberLeft(b)
        #expect(machine.drain(c2) == [1, 2])
        #expect(machine.lanes.count == 1)
    }
}
