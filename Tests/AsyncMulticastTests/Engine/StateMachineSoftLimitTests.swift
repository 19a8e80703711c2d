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
    Machine(policy: policy, replay: replay, mode: .push)
}

/// Whether `id`'s next read ends it as evicted.
private func readsEvicted(_ machine: inout Machine, _ id: SubscriberID) -> Bool {
    var batch: [Int]? = nil
    var report = ReadReport()
    guard case .ended(.success(nil)) = machine.nextRequested(id, batch: &batch, report: &report) else {
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
        for n in 0..<4 { machine.push(n, clock: time.now) }  // past 3 at t = 0
        #expect(machine.drain(reader) == [0, 1, 2, 3])
        time.set(.milliseconds(4999))
        machine.push(4, clock: time.now)
        #expect(machine.backlog(of: stalled)?.count == 5)
        time.set(.seconds(5))
        machine.push(5, clock: time.now)
        #expect(machine.backlog(of: stalled) == nil, "evicted: it holds nothing any more")
        #expect(readsEvicted(&machine, stalled))
        #expect(machine.drain(reader) == [4, 5], "the other member lost nothing")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("the deadline is the timer's: a stalled member goes when the timer wakes at it, with no element after")
    func timerEvictsAtTheDeadline() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let stalled = machine.subscriberJoined()
        let reader = machine.subscriberJoined()
        for n in 0..<3 { machine.push(n, clock: time.now) }
        #expect(time.readings == 0, "nobody past the soft limit: no reading")
        _ = machine.push(3, epoch: Machine.pushEpoch)  // past 3 at t = 0
        #expect(machine.followUp.contains(.reading), "the machine asks for the time, after the lock")
        #expect(machine.invariantViolation() == nil)
        let effects = machine.followedUp(clock: time.now)
        #expect(effects?.timerTask == .start, "the deadline is timed")
        #expect(machine.nextSoftDeadline == .seconds(5))
        #expect(machine.invariantViolation() == nil)
        #expect(machine.drain(reader) == [0, 1, 2, 3])
        let generation = machine.timer.generation
        guard
            case .sleep(let until) = machine.timerWoke(
                generation: generation, at: .zero, sleptUntil: nil, sleepFailed: false)
        else {
            Issue.record("the timer did not sleep until the deadline")
            return
        }
        #expect(until == .seconds(5))
        #expect(machine.subscriberCount == 2)
        // No element from here on: the timer's own wake-up evicts it.
        guard
            case .fired(_, let next) = machine.timerWoke(
                generation: generation, at: .seconds(5), sleptUntil: .seconds(5), sleepFailed: false)
        else {
            Issue.record("the timer did not fire at the deadline")
            return
        }
        #expect(next == nil, "nothing left to time")
        #expect(!machine.timer.isRunning)
        #expect(machine.subscriberCount == 1, "it stopped counting when it was evicted")
        #expect(machine.invariantViolation() == nil)
        #expect(readsEvicted(&machine, stalled))
        #expect(time.readings == 1, "one reading: after the element that took it past its soft count")
    }

    @Test(
        "the timer wakes at the earliest soft deadline; a reading after the element is stamped on every position past")
    func timerTimesTheEarliestDeadline() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let first = machine.subscriberJoined()
        for n in 0..<4 { machine.push(n, clock: time.now) }  // `first` past 3 at t = 0: deadline 5
        time.set(.seconds(2))
        let second = machine.subscriberJoined()
        for n in 4..<8 { machine.push(n, clock: time.now) }  // `second` past 3 at t = 2: deadline 7
        #expect(machine.nextSoftDeadline == .seconds(5), "the oldest member's")
        #expect(machine.timer.isRunning)
        let generation = machine.timer.generation
        guard
            case .fired(_, let next) = machine.timerWoke(
                generation: generation, at: .seconds(5), sleptUntil: nil, sleepFailed: false)
        else {
            Issue.record("the timer did not fire at the first deadline")
            return
        }
        #expect(next == .seconds(7), "then the second member's")
        #expect(readsEvicted(&machine, first))
        #expect(machine.backlog(of: second)?.count == 4)
        guard
            case .fired = machine.timerWoke(
                generation: generation, at: .seconds(7), sleptUntil: .seconds(7), sleepFailed: false)
        else {
            Issue.record("the timer did not fire at the second deadline")
            return
        }
        #expect(readsEvicted(&machine, second))
        #expect(machine.subscriberCount == 0)
        #expect(machine.invariantViolation() == nil)
    }

    @Test(
        "a timer's reading taken before a member went past the soft limit writes no deadline: the member is timed from the reading its element asked for"
    )
    func staleTimerReadingWritesNoDeadline() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let member = machine.subscriberJoined()
        for n in 0..<4 { machine.push(n, clock: time.now) }  // past 3 at t = 0: deadline 5
        #expect(machine.drain(member) == [0, 1, 2, 3], "it catches up: nothing to time")
        let generation = machine.timer.generation
        // The timer's sleep returns at 5 s; it reads the clock (60 s), then waits for the lock
        // while the member falls past its soft limit again at 60 s.
        time.set(.seconds(60))
        for n in 4..<8 { _ = machine.push(n, epoch: Machine.pushEpoch) }
        #expect(machine.followUp.contains(.reading), "the element that took it past asks for a reading")
        // The timer, with a reading taken before the clock moved on to 120 s.
        time.set(.seconds(120))
        _ = machine.timerWoke(generation: generation, at: .seconds(60), sleptUntil: .seconds(5), sleepFailed: false)
        #expect(machine.followUp.contains(.reading), "left to the element's own reading")
        #expect(machine.backlog(of: member)?.count == 4)
        _ = machine.followedUp(clock: time.now)  // that reading: 120 s
        #expect(machine.nextSoftDeadline == .seconds(125), "timed from the reading its element asked for")
        #expect(machine.invariantViolation() == nil)
        time.set(.milliseconds(124_999))
        machine.push(8, clock: time.now)
        #expect(machine.backlog(of: member)?.count == 5, "not evicted before its deadline")
    }

    @Test("reading moves the measure to a later element; one that keeps up is never timed")
    func readingMovesTheMeasure() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let slow = machine.subscriberJoined()
        let fast = machine.subscriberJoined()
        for n in 0..<4 { machine.push(n, clock: time.now) }  // element 3 at t = 0
        time.set(.seconds(3))
        machine.push(4, clock: time.now)  // element 4 at t = 3
        #expect(machine.take(slow) == .element(0))  // now measured from element 4: until t = 8
        _ = machine.drain(fast)
        time.set(.seconds(6))
        machine.push(5, clock: time.now)
        #expect(machine.backlog(of: slow)?.count == 5)
        time.set(.seconds(8))
        machine.push(6, clock: time.now)
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
            machine.push(n, clock: time.now)
            _ = machine.drain(reader)
        }
        #expect(time.readings == 0)
        let stalled = machine.subscriberJoined()
        for n in 0..<10 { machine.push(n, clock: time.now) }
        #expect(machine.backlog(of: stalled)?.count == 10, "at the hard limit, within the duration")
        machine.push(10, clock: time.now)
        #expect(readsEvicted(&machine, stalled), "an 11th element passes the hard limit: evicted at once")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("a clock set back brings the deadlines taken before it down to its reading plus the duration")
    func clockSetBack() {
        let time = TestTime()
        var machine = pushMachine(self.soft, time: time)
        let stalled = machine.subscriberJoined()
        time.set(.seconds(100))
        for n in 0..<4 { machine.push(n, clock: time.now) }  // deadline 105
        time.set(.seconds(1))
        machine.push(4, clock: time.now)  // set back: no deadline after 1 + 5
        #expect(machine.invariantViolation() == nil)
        time.set(.milliseconds(5999))
        machine.push(5, clock: time.now)
        #expect(machine.backlog(of: stalled) != nil)
        time.set(.seconds(6))
        machine.push(6, clock: time.now)
        #expect(readsEvicted(&machine, stalled), "not kept until the clock reads 105 again")
        #expect(machine.invariantViolation() == nil)
    }

    @Test("the backlog counts what a member holds; the high-water mark the most it held")
    func backlogAndHighWaterMark() {
        let time = TestTime()
        var machine = pushMachine(.bounded(100), time: time)
        let member = machine.subscriberJoined()
        #expect(machine.backlog(of: member)! == (0, 0))
        for n in 0..<7 { machine.push(n, clock: time.now) }
        #expect(machine.backlog(of: member)! == (7, 7))
        _ = machine.drain(member)
        #expect(machine.backlog(of: member)! == (0, 7))
        for n in 0..<3 { machine.push(n, clock: time.now) }
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
            for n in 0..<10 { machine.push(n, clock: time.now) }
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
            machine.push(n, clock: time.now)
            _ = machine.drain(early)
        }
        let late = machine.subscriberJoined()
        #expect(machine.backlog(of: late)! == (0, 0))
        machine.push(8, clock: time.now)
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
