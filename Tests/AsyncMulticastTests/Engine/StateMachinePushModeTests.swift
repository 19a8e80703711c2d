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

    // MARK: Senders waiting for room

    /// Parks a sender of `value` (token `value`), expecting it to wait.
    private static func park(_ value: Int, in machine: inout Machine) async -> Suspended<Bool> {
        let sender = await Suspended<Bool>.make()
        let effects = machine.senderParked(value, token: UInt64(value), continuation: sender.continuation)
        #expect(effects.isEmpty, "the sender of \(value) waits")
        return sender
    }

    @Test(
        "the last subscriber leaving appends the parked senders' elements in the order they parked, then resumes them")
    func lastSubscriberLeavingAppendsParkedSendersInOrder() async {
        var machine = Machine(policy: .bounded(1), replay: 8, mode: .push)
        let a = machine.subscriberJoined()
        #expect(machine.produceIfRoom(0, epoch: 0) != nil)
        #expect(machine.produceIfRoom(1, epoch: 0) == nil, "full: the sender must wait")
        var senders: [Suspended<Bool>] = []
        for value in 1...4 { senders.append(await Self.park(value, in: &machine)) }
        #expect(machine.parkedProducers.map(\.element) == [1, 2, 3, 4])
        #expect(machine.invariantViolation() == nil)

        let effects = machine.subscriberLeft(a)
        #expect(effects.producers.count == 4 && effects.producerResult, "every sender is resumed as sent")
        #expect(effects.parkedElementsAppended == 4)
        #expect(machine.replayCache == [0, 1, 2, 3, 4], "their elements are in, in the order they parked")
        #expect(machine.parkedProducers.isEmpty)
        effects.perform()
        for sender in senders { #expect(await sender.value() == true) }
    }

    @Test(
        "a read at the resume level appends parked elements while there is room and hands the first to a waiting subscriber"
    )
    func readAppendsParkedSendersWhileThereIsRoom() async {
        var machine = Machine(policy: .bounded(2), replay: 0, mode: .push)
        let slow = machine.subscriberJoined()
        let fast = machine.subscriberJoined(policy: .unbounded)
        for value in 0..<2 { #expect(machine.produceIfRoom(value, epoch: 0) != nil) }
        #expect(machine.drain(fast) == [0, 1])
        var senders: [Suspended<Bool>] = []
        for value in 2...5 { senders.append(await Self.park(value, in: &machine)) }
        #expect(machine.produceIfRoom(9, epoch: 0) == nil, "full: a new sender waits too")

        let handed = await Suspended<ModelRun.Result>.make()
        #expect(machine.subscriberSuspended(fast, continuation: handed.continuation).isEmpty)
        // The slow subscriber takes 0 (and 1 into its batch): nothing is pending, so there
        // is room for two: 2 and 3 go in, 4 and 5 wait on, in order.
        var batch: [Int]? = []
        var report = ReadReport()
        guard
            case .elementReleasingSenders(0, let effects) = machine.nextRequested(
                slow, batch: &batch, report: &report)
        else {
            Issue.record("the read should release senders")
            return
        }
        #expect(batch == [1])
        #expect(!report.caughtUp, "the senders' elements came after what it took")
        #expect(effects.producers.count == 2 && effects.producerResult)
        #expect(effects.parkedElementsAppended == 2)
        #expect(effects.handedOver.map(\.element) == [2], "the waiting subscriber gets the first")
        #expect(machine.parkedProducers.map(\.element) == [4, 5])
        #expect(machine.invariantViolation() == nil)
        effects.perform()
        #expect(await handed.value() == .success(2))
        #expect(await senders[0].value() == true)
        #expect(await senders[1].value() == true)
        #expect(machine.drain(fast) == [3])

        // Completion resumes the senders still waiting as not sent.
        let completed = machine.subjectCompleted(failure: nil)
        #expect(completed.producers.count == 2 && !completed.producerResult)
        completed.perform()
        #expect(await senders[2].value() == false)
        #expect(await senders[3].value() == false)
        #expect(machine.drain(slow) == [2, 3])
    }

    @Test("a cancelled parked sender's element goes in at once, past the bound; the others keep their order")
    func cancelledParkedSenderSendsAtOnce() async {
        var machine = Machine(policy: .bounded(1), replay: 0, mode: .push)
        let a = machine.subscriberJoined()
        #expect(machine.produceIfRoom(0, epoch: 0) != nil)
        var senders: [Suspended<Bool>] = []
        for value in 1...3 { senders.append(await Self.park(value, in: &machine)) }

        let cancelled = machine.senderCancelled(token: 2)
        #expect(cancelled.producers.count == 1 && cancelled.producerResult, "resumed as sent")
        #expect(cancelled.parkedElementsAppended == 1)
        #expect(machine.senderCancelled(token: 2).isEmpty, "cancelling it again does nothing")
        #expect(machine.parkedProducers.map(\.element) == [1, 3])
        #expect(machine.invariantViolation() == nil)
        cancelled.perform()
        #expect(await senders[1].value() == true)

        #expect(machine.take(a) == .element(0))
        // Past the bound, ahead of the senders still waiting; reading it makes room for 1.
        guard case .elementReleasingSenders(2, let released) = machine.nextRequested(a) else {
            Issue.record("reading 2 should release the sender of 1")
            return
        }
        #expect(released.producers.count == 1 && released.parkedElementsAppended == 1)
        released.perform()
        #expect(await senders[0].value() == true)
        #expect(machine.parkedProducers.map(\.element) == [3])
        let left = machine.subscriberLeft(a)
        #expect(left.producers.count == 1 && left.parkedElementsAppended == 1)
        left.perform()
        #expect(await senders[2].value() == true)
    }

    @Test(
        "a parked sender goes in as soon as there is room for it, not at the resume level; one parking with room and nobody before it goes in at once"
    )
    func senderParkedDecidedAtOnce() async {
        var machine = Machine(policy: .bounded(4), replay: 0, mode: .push)
        let a = machine.subscriberJoined()
        for value in 0..<4 { #expect(machine.produceIfRoom(value, epoch: 0) != nil) }
        let waiting = await Self.park(4, in: &machine)
        #expect(machine.produceIfRoom(9, epoch: 0) == nil, "full, and a sender waits: a new one queues behind")
        // Room for one, though not down to the resume level (2): the sender goes in.
        guard case .elementReleasingSenders(0, let released) = machine.nextRequested(a) else {
            Issue.record("the read that made room for one should release the sender")
            return
        }
        #expect(!machine.hasRoom, "its element took the room")
        released.perform()
        #expect(await waiting.value() == true)
        #expect(machine.take(a) == .element(1))

        // Full again, then room for one: a sender refused before the read parks after it.
        #expect(machine.produceIfRoom(5, epoch: 0) != nil)
        #expect(machine.produceIfRoom(6, epoch: 0) == nil)
        #expect(machine.take(a) == .element(2))
        let atOnce = await Suspended<Bool>.make()
        let effects = machine.senderParked(6, token: 9, continuation: atOnce.continuation)
        #expect(effects.producers.count == 1 && effects.producerResult && effects.parkedElementsAppended == 1)
        effects.perform()
        #expect(await atOnce.value() == true)
        #expect(machine.drain(a) == [3, 4, 5, 6])

        _ = machine.subjectCompleted(failure: nil)
        let late = await Suspended<Bool>.make()
        let refused = machine.senderParked(6, token: 10, continuation: late.continuation)
        #expect(refused.producers.count == 1 && !refused.producerResult && refused.parkedElementsAppended == 0)
        refused.perform()
        #expect(await late.value() == false)
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
