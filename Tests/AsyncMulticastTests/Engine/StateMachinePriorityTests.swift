// The upstream task's priority, at the level of `MulticastStateMachine` (the rule is in
// MulticastStateMachine+Priority.swift): a waiting subscriber raises a running task once per
// priority level; a task that starts is raised at once to the highest priority among the
// subscribers already waiting; without a task, nothing is raised. The real-task side is in
// Share/UpstreamTaskTests.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: the upstream task's priority")
struct StateMachinePriorityTests {
    typealias Waiting = Suspended<Result<Int?, TestError>>
    static let background = TaskPriority.background.rawValue
    static let medium = TaskPriority.medium.rawValue
    static let high = TaskPriority.high.rawValue

    @Test("a waiting subscriber raises a running task to its priority, once per level, and never lowers it")
    func waitingSubscriberRaisesOncePerLevel() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        let (epoch, _) = machine.connectRequested()
        #expect(machine.upstreamTaskStarted(priority: Self.medium) == nil, "nobody waits")
        var raised: [UInt8?] = []
        var waiting: [Waiting] = []
        for priority in [Self.background, Self.high, Self.high, Self.medium] {
            let id = machine.subscriberJoined()
            let suspended = await Waiting.make()
            waiting.append(suspended)
            raised.append(Self.raise(&machine, id, suspended, priority: priority))
            #expect(machine.invariantViolation() == nil)
        }
        #expect(raised == [nil, Self.high, nil, nil])
        machine.connectionCancelled(epoch: epoch!).perform()
        for suspended in waiting { #expect(await suspended.value() == .success(nil)) }
    }

    @Test("a task that starts is raised to the highest priority among the subscribers already waiting")
    func startedTaskIsRaisedToTheWaitingSubscribers() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .manual)
        var waiting: [Waiting] = []
        var raised: [UInt8?] = []
        for priority in [Self.background, Self.high, Self.medium] {
            let id = machine.subscriberJoined()
            let suspended = await Waiting.make()
            waiting.append(suspended)
            raised.append(Self.raise(&machine, id, suspended, priority: priority))
        }
        #expect(raised == [nil, nil, nil], "no task yet: nothing to raise")
        let (epoch, effects) = machine.connectRequested()
        #expect(effects.startUpstream == epoch)
        #expect(machine.upstreamTaskStarted(priority: Self.background) == Self.high)
        #expect(machine.invariantViolation() == nil)
        #expect(machine.upstreamPriority == Self.high)

        // The task ends (released): a restart at `.medium` is raised to `.high` again, and
        // one already running at `.high` or above is not raised.
        machine.upstreamTaskReleased()
        #expect(machine.upstreamTaskStarted(priority: Self.medium) == Self.high)
        machine.upstreamTaskReleased()
        #expect(machine.upstreamTaskStarted(priority: TaskPriority.userInitiated.rawValue) == nil)
        machine.connectionCancelled(epoch: epoch!).perform()
        for suspended in waiting { #expect(await suspended.value() == .success(nil)) }
        #expect(machine.waiters.isEmpty)
    }

    @Test("without an upstream task (a subject, or a task released), a waiting subscriber raises nothing")
    func nothingToRaiseWithoutATask() async {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .push)
        let id = machine.subscriberJoined()
        let suspended = await Waiting.make()
        #expect(Self.raise(&machine, id, suspended, priority: Self.high) == nil)
        #expect(machine.invariantViolation() == nil)
        machine.subjectCompleted(failure: nil).perform()
        #expect(await suspended.value() == .success(nil))
    }

    /// Subscriber `id` waits at `priority` on `suspended`'s continuation (it must be stored);
    /// returns the priority the machine raises the upstream task to.
    static func raise(_ machine: inout Machine, _ id: SubscriberID, _ suspended: Waiting, priority: UInt8) -> UInt8? {
        var report = ReadReport()
        let outcome = machine.subscriberWaiting(
            id, continuation: suspended.continuation, priority: priority, report: &report)
        guard case .stored(let raise) = outcome else {
            Issue.record("the subscriber was resumed instead of waiting")
            return nil
        }
        return raise
    }
}
