// Push mode, the one the subjects use, at the level of `MulticastStateMachine`: running from
// the start with no upstream to start, fed by sends, ended once by subjectCompleted. The
// real-task side is in Subjects/SubjectTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: push mode (subjects)")
struct StateMachinePushModeTests {
    @Test(
        "nextRequested in push mode starts nothing; subjectCompleted while running ends it once: buffered elements, then nil"
    )
    func subjectCompletedEndsTheSubjectOnce() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .push)
        #expect(machine.upstream == .running(epoch: 0))
        let a = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: nil), "a push-fed machine has no upstream to start")

        #expect(machine.produce(1, epoch: 0, respectingBounds: false).isProceed, "a send is taken")
        let completed = machine.subjectCompleted(failure: nil)
        #expect(completed.subscribers.isEmpty, "nobody was waiting")
        #expect(machine.upstream == .terminated(.finished))
        #expect(machine.subjectCompleted(failure: TestError.other(1)).isEmpty, "completing twice does nothing")
        #expect(machine.produce(2, epoch: 0, respectingBounds: false).isStop, "a send after completion is refused")

        #expect(machine.take(a) == .element(1), "buffered elements first")
        #expect(machine.take(a) == .finished, "then nil")
        #expect(!machine.isSubscribed(a))
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .finished, "a later subscriber ends at once")
    }

    @Test("subjectCompleted with a failure resumes a waiting subscriber with the error, and later ones get it too")
    func subjectCompletedWithAFailureResumesWaitersWithTheError() async {
        var machine = Machine(policy: .unbounded, replay: 1, mode: .push)
        let a = machine.subscriberJoined()
        var resumed = 0
        let result = await withUnsafeContinuation { (continuation: Machine.SubscriberContinuation) in
            _ = machine.subscriberSuspended(a, continuation: continuation)
            let effects = machine.subjectCompleted(failure: TestError.other(4))
            resumed = effects.subscribers.count
            effects.perform()
        }
        #expect(resumed == 1)
        #expect(result == .failure(TestError.other(4)))
        #expect(machine.subscriberCount == 0)
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .failed(TestError.other(4)), "a later subscriber gets the error")
    }

    @Test("produceIfRoom while full (.bounded(1)) refuses; a synchronous send while full is buffered past the bound")
    func produceIfRoomWhileFullRefusesButASynchronousSendIsTaken() {
        var machine = Machine(policy: .bounded(1), replay: 0, mode: .push)
        let a = machine.subscriberJoined()
        #expect(machine.produceIfRoom(1, epoch: 0) != nil)
        #expect(!machine.hasRoom)
        #expect(machine.produceIfRoom(2, epoch: 0) == nil, "full: wait for room")
        #expect(machine.produce(2, epoch: 0, respectingBounds: false).isProceed, "a synchronous send must be taken")
        #expect(machine.take(a) == .element(1))
        #expect(machine.take(a) == .element(2))
        #expect(machine.hasRoom)
    }
}
