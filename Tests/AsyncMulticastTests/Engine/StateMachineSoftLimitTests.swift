// The soft limit of `.evicting(hard, softLimit:)` and the backlog, on the machine alone: a
// member that holds more than the soft limit is evicted once the element that took it past
// the limit has been there for the duration, checked when an element is appended; the clock is
// the test's (`now`), read only while someone is past the soft limit.

import Synchronization
import Testing

@testable import AsyncMulticast

/// A clock the test sets, that counts its readings.
private final class TestTime: Sendable {
    private let state = Mutex((now: Duration.zero, readings: 0))

    var readings: Int { self.state.withLock { $0.readings } }

    func set(_ now: Duration) { self.state.withLock { $0.now = now } }

    var now: @Sendable () -> Duration {
        {
            self.state.withLock { state in
                state.readings += 1
                return state.now
            }
        }
    }
}

/// A push-fed machine whose members follow `policy`, timed by `time`.
private func pushMachine(_ policy: SharedBufferingPolicy, time: TestTime, replay: Int = 0) -> Machine {
    Machine(policy: policy, replay: replay, mode: .push, now: time.now)
}

/// Whether `id`'s next read ends it as evicted.
private func readsEvicted(_ machine: inout Machine, _ id: SubscriberID) -> Bool {
    var batch: [Int]? = nil
    var report = ReadReport()
    guard case .terminal(.success(nil)) = machine.nextRequested(id, batch: &batch, report: &report) else {
        return false
    }
    return report.evicted
}

@Suite("MulticastStateMachine: soft limits and backlogs")
struct StateMachineSoftLimitTests {
    let soft = SharedBufferingPolicy.evicting(10, softLimit: .above(3, for: .seconds(5)))

    @Test("a stalled member goes when the element that took it past the soft limit has been there for the duration")
    func stalledMemberIsEvictedAfterTheDuration() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let stalled = machine.subscriberJoined()
        let reader = machine.subscriberJoined()
        for n in 0..<4 { _ = machine.push(n, epoch: Machine.pushEpoch) }  // past 3 at t = 0
        #expect(machine.drain(reader) == [0, 1, 2, 3])
        time.set(.milliseconds(4999))
        _ = machine.push(4, epoch: Machine.pushEpoch)
        #expect(machine.backlog(of: stalled)?.count == 5)
        time.set(.seconds(5))
        _ = machine.push(5, epoch: Machine.pushEpoch)
        #expect(machine.backlog(of: stalled) == nil, "evicted: it holds nothing any more")
        #expect(readsEvicted(&machine, stalled))
        #expect(machine.drain(reader) == [4, 5], "the other member lost nothing")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("reading moves the measure to a later element; one that keeps up is never timed")
    func readingMovesTheMeasure() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let slow = machine.subscriberJoined()
        let fast = machine.subscriberJoined()
        for n in 0..<4 { _ = machine.push(n, epoch: Machine.pushEpoch) }  // element 3 at t = 0
        time.set(.seconds(3))
        _ = machine.push(4, epoch: Machine.pushEpoch)  // element 4 at t = 3
        #expect(machine.take(slow) == .element(0))  // now measured from element 4: until t = 8
        _ = machine.drain(fast)
        time.set(.seconds(6))
        _ = machine.push(5, epoch: Machine.pushEpoch)
        #expect(machine.backlog(of: slow)?.count == 5)
        time.set(.seconds(8))
        _ = machine.push(6, epoch: Machine.pushEpoch)
        #expect(readsEvicted(&machine, slow))
        #expect(machine.drain(fast) == [5, 6])
        #expect(machine.invariantViolation() == nil)
    }

    @Test("below the soft limit the clock is not read; the hard limit still evicts at once")
    func hardLimitAndNoReadingsBelowTheSoftLimit() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let reader = machine.subscriberJoined()
        for n in 0..<100 {
            _ = machine.push(n, epoch: Machine.pushEpoch)
            _ = machine.drain(reader)
        }
        #expect(time.readings == 0)
        let stalled = machine.subscriberJoined()
        for n in 0..<10 { _ = machine.push(n, epoch: Machine.pushEpoch) }
        #expect(machine.backlog(of: stalled)?.count == 10, "at the hard limit, within the duration")
        _ = machine.push(10, epoch: Machine.pushEpoch)
        #expect(readsEvicted(&machine, stalled), "an 11th element passes the hard limit: evicted at once")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("a clock set back brings the deadlines taken before it down to its reading plus the duration")
    func clockSetBack() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let stalled = machine.subscriberJoined()
        time.set(.seconds(100))
        for n in 0..<4 { _ = machine.push(n, epoch: Machine.pushEpoch) }  // deadline 105
        time.set(.seconds(1))
        _ = machine.push(4, epoch: Machine.pushEpoch)  // set back: no deadline after 1 + 5
        #expect(machine.invariantViolation() == nil)
        time.set(.milliseconds(5999))
        _ = machine.push(5, epoch: Machine.pushEpoch)
        #expect(machine.backlog(of: stalled) != nil)
        time.set(.seconds(6))
        _ = machine.push(6, epoch: Machine.pushEpoch)
        #expect(readsEvicted(&machine, stalled), "not kept until the clock reads 105 again")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("the backlog counts what a member holds; the high-water mark the most it held")
    func backlogAndHighWaterMark() {
        let time = TestTime()
        var machine = pushMachine(.bounded(100), time: time)
        let member = machine.subscriberJoined()
        #expect(machine.backlog(of: member)! == (0, 0))
        for n in 0..<7 { _ = machine.push(n, epoch: Machine.pushEpoch) }
        #expect(machine.backlog(of: member)! == (7, 7))
        _ = machine.drain(member)
        #expect(machine.backlog(of: member)! == (0, 7))
        for n in 0..<3 { _ = machine.push(n, epoch: Machine.pushEpoch) }
        #expect(machine.backlog(of: member)! == (3, 7))
        _ = machine.subscriberLeft(member)
        #expect(machine.backlog(of: member) == nil)
    }

    @Test("dropping policies: the backlog is capped by the policy")
    func backlogOfDroppingPolicies() {
        let time = TestTime()
        for policy in [SharedBufferingPolicy.bufferingNewest(3), .bufferingOldest(3)] {
            var machine = pushMachine(policy, time: time)
            let member = machine.subscriberJoined()
            for n in 0..<10 { _ = machine.push(n, epoch: Machine.pushEpoch) }
            #expect(machine.backlog(of: member)?.count == 3, "\(policy)")
            _ = machine.take(member)
            #expect(machine.backlog(of: member)?.count == 2, "\(policy)")
            #expect(machine.backlog(of: member)?.highWaterMark == 3, "\(policy)")
        }
    }

    @Test("a greeting is not held: a replaying evicting member holds only what came after it joined")
    func greetingIsNotHeld() {
        let time = TestTime()
        var machine = pushMachine(.evicting(5), time: time, replay: 8)
        let early = machine.subscriberJoined()
        for n in 0..<8 {
            _ = machine.push(n, epoch: Machine.pushEpoch)
            _ = machine.drain(early)
        }
        let late = machine.subscriberJoined()
        #expect(machine.backlog(of: late)! == (0, 0))
        _ = machine.push(8, epoch: Machine.pushEpoch)
        #expect(machine.backlog(of: late)! == (1, 1))
    }
}

@Suite("MulticastStateMachine: a subscriber's slot")
struct SlotLayoutTests {
    @Test("a slot stays 24 bytes with its high-water mark (an idle subscriber's memory is mostly its slot)")
    func slotIsTwentyFourBytes() {
        #expect(MemoryLayout<Machine.Slot>.stride == 24)
        var slot = Machine.Slot()
        slot.highWaterMark = Int(UInt32.max) + 5
        #expect(slot.highWaterMark == Int(UInt32.max), "saturates")
        slot.lane = Machine.Slot.noLane
        slot.readsPrivateQueue = true
        slot.connectsOnDemand = false
        #expect(slot.lane == Machine.Slot.noLane && slot.readsPrivateQueue && !slot.connectsOnDemand)
        slot.connectsOnDemand = true
        slot.readsPrivateQueue = false
        #expect(!slot.readsPrivateQueue && slot.connectsOnDemand)
    }
}
