// The model test's upstream priority (MulticastStateMachine+Priority.swift), as plainly as the
// rule says it:
//
// - a subscriber that starts waiting at a priority above the upstream task's raises it to its
//   own (`WaitOutcome.stored(raiseUpstreamTo:)`);
// - an upstream task that starts is created at the highest priority among the subscribers
//   then waiting, if above its own: a detached task's (`.medium`), or a hosted `run()`'s
//   (`runPriority`, when `run()` creates the task of the iteration it picked up);
// - a hosted machine's new iteration, handed to `run()` while the previous task still stops,
//   raises that task to the waiting subscribers' priority if above what it runs at;
// - a cancelled task keeps its priority (the next iteration waits behind it); a task whose
//   iteration ended is released: nothing to raise until the next one starts.

@testable import AsyncMulticast

extension ModelRun {
    /// The priorities a waiting subscriber's task has in the random runs and the explorer's
    /// scopes: background, utility, medium, high (`TaskPriority.rawValue`).
    static let waitPriorities: [UInt8] = [9, 17, 21, 25]

    /// A detached upstream task's priority, whoever asked for it: `.medium`.
    static var detachedPriority: UInt8 { 21 }

    /// A hosted `run()`'s priority: `.background`, below every waiter but one.
    static var runPriority: UInt8 { 9 }

    /// The highest priority among the waiting subscribers, if any waits.
    var highestWaiting: UInt8? {
        self.subscribers.compactMap { $0.waiting == nil ? nil : $0.waitingPriority }.max()
    }

    /// The event that returned `effects` started iteration `epoch`: how the storage starts its
    /// task. A detached task at `.medium` or the highest waiting priority; a hosted machine's
    /// iteration handed to `run()` (woken if it waits), the stopping task raised if a waiter
    /// is above it.
    mutating func expectUpstreamStart(_ effects: Machine.Effects, epoch: UInt64) async throws(ModelFailure) {
        guard let start = effects.upstreamStart else { throw self.fail("iteration \(epoch) started without a start") }
        if self.config.hosted {
            let raise = self.highestWaiting.flatMap { $0 > self.upstreamPriority ? $0 : nil }
            try self.check(
                start.raiseStopping == raise,
                "the stopping task raised to \(start.raiseStopping as Any), expected \(raise as Any)")
            if let raise { self.upstreamPriority = raise }
            try await self.handToHost(epoch, wakeUp: start.hostWakeUp)
        } else {
            let expected = Swift.max(Self.detachedPriority, self.highestWaiting ?? 0)
            try self.check(
                start.priority == expected, "iteration \(epoch) starts at \(start.priority), expected \(expected)")
            try self.check(start.hostWakeUp == nil, "a run() woken for a machine that is not hosted")
            self.upstreamPriority = expected
        }
    }

    /// `run()` picked up iteration `epoch` and creates its task at `runPriority`
    /// (`hostedUpstreamStarting`): nothing if the iteration is no longer current, else at
    /// the highest waiting priority if that is higher.
    mutating func hostCreatesTask(for epoch: UInt64) throws(ModelFailure) {
        let priority = self.machine.hostedUpstreamStarting(epoch: epoch, runPriority: Self.runPriority)
        let expected: UInt8? =
            self.currentEpoch == epoch ? Swift.max(Self.runPriority, self.highestWaiting ?? 0) : nil
        try self.check(
            priority == expected,
            "run() creates iteration \(epoch)'s task at \(priority as Any), expected \(expected as Any)")
        if let expected { self.upstreamPriority = expected }
    }

    /// A subscriber started waiting at `priority`: the machine raised the upstream task to
    /// `raise`.
    mutating func expectRaise(_ raise: UInt8?, byWaiterAt priority: UInt8) throws(ModelFailure) {
        let expected = priority > self.upstreamPriority ? priority : nil
        try self.check(
            raise == expected,
            "a waiter at \(priority) raised the upstream (at \(self.upstreamPriority)) to \(raise as Any), expected \(expected as Any)"
        )
        if let expected { self.upstreamPriority = expected }
    }

    /// The upstream iteration `epoch` ended (its body returned): the storage held its task
    /// unless `run()` never created it (a hosted iteration not picked up); the task is then
    /// released.
    mutating func upstreamIterationEnds(_ epoch: UInt64, failure: TestError?) -> Machine.Effects {
        let heldItsTask = !self.config.hosted || self.hostIteration == epoch
        if heldItsTask { self.upstreamPriority = .max }
        return self.machine.upstreamIterationEnded(epoch: epoch, failure: failure, heldItsTask: heldItsTask)
    }

    /// The machine's upstream priority is the model's, and no waiter is above it (the
    /// invariant, checked by the machine too).
    func comparePriority() throws(ModelFailure) {
        try self.check(
            self.machine.upstreamPriority == self.upstreamPriority,
            "upstream priority \(self.machine.upstreamPriority), expected \(self.upstreamPriority)")
        if let highest = self.highestWaiting {
            try self.check(
                highest <= self.upstreamPriority,
                "a waiter at \(highest) is above the upstream's \(self.upstreamPriority)")
        }
    }
}
