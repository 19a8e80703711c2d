// Draining at the level of `MulticastStateMachine`: a drain observer hears, through the
// notices of the event that drained the machine (`noticing`, `takeNotices()`), that the machine has ended with no subscriber left,
// once; and the owner of a source ends it (`ownerFinished()`). The real-task side is in
// Subjects/DrainedShutdownTests.swift and Share/DrainedSourceShutdownTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: draining")
struct StateMachineDrainTests {
    @Test func aDrainObserverHearsOnceTheEndedMachineLosesItsLastSubscriber() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .push)
        let a = machine.subscriberJoined()
        let b = machine.subscriberJoined()
        #expect(machine.produce(1, epoch: 0, respectingBounds: false).isProceed)
        let cell = DrainCell()
        let drainedAtOnce = machine.drainObserverAdded(cell)
        #expect(!drainedAtOnce, "running: not drained")
        #expect(!machine.isQuiet, "an observer waits: no critical section skips its end")
        #expect(machine.takeNotices().drained == nil)

        _ = machine.subjectCompleted(failure: nil)
        #expect(machine.takeNotices().drained == nil, "ended, but two subscribers are left")
        _ = machine.subscriberLeft(b)
        #expect(machine.takeNotices().drained == nil, "a still has 1 and the end to read")
        #expect(machine.take(a) == .element(1))
        #expect(machine.takeNotices().drained == nil, "handed its last element, but has not read the end")
        // The read of the end leaves, and the event itself takes the notice into its effects.
        var noBatch: [Int]? = nil
        var report = ReadReport()
        guard
            case .endedNoticed(.success(nil), let effects) = machine.nextRequested(
                a, batch: &noBatch, report: &report)
        else {
            Issue.record("reading the end did not carry the drain notice")
            return
        }
        #expect(effects.notices.drained.map { $0.map(ObjectIdentifier.init) } == [ObjectIdentifier(cell)])
        #expect(machine.takeNotices().drained == nil, "told once")
        #expect(machine.drainObservers.isEmpty && machine.isQuiet)
        #expect(machine.invariantViolation() == nil)
    }

    @Test func anObserverAddedOnceDrainedIsToldAtOnceAndNotKept() {
        var machine = Machine(policy: .unbounded, replay: 1, mode: .push)
        _ = machine.subjectCompleted(failure: nil)
        let toldAtOnce = machine.drainObserverAdded(DrainCell())
        #expect(toldAtOnce)
        #expect(machine.drainObservers.isEmpty)

        let late = machine.subscriberJoined()  // joins after the end: not drained until it reads it
        let cell = DrainCell()
        let lateDrained = machine.drainObserverAdded(cell)
        #expect(!lateDrained)
        machine.drainObserverRemoved(cell)  // its deadline passed
        var noBatch: [Int]? = nil
        var report = ReadReport()
        switch machine.nextRequested(late, batch: &noBatch, report: &report) {
        case .ended(.success(nil)): break
        case .endedNoticed(.success(nil), let effects):
            #expect(effects.notices.drained == nil, "a removed observer is not told")
        default: Issue.record("the late subscriber did not read the end")
        }
        #expect(machine.takeNotices().drained == nil)
    }

    @Test func theOwnerFinishingASourceCancelsItsSessionAndEndsIt() {
        var machine = Machine(policy: .unbounded, replay: 1, mode: .automatic)
        let a = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: 0))
        #expect(machine.produce(5, epoch: 0).isProceed)
        let effects = machine.ownerFinished()
        #expect(effects.cancelUpstream == 0, "the running session is cancelled")
        #expect(machine.upstream == .terminated(.finished))
        #expect(machine.produce(6, epoch: 0).isStop, "the session's late values are refused")
        #expect(machine.take(a) == .element(5))
        #expect(machine.take(a) == .finished)
        #expect(machine.ownerFinished().isEmpty, "ignored once ended")
        #expect(machine.isDrained)
    }
}
