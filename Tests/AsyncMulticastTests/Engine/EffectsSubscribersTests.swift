// `Effects` keeps the first subscriber to resume inline (`firstSubscriber`) and the rest in
// `moreSubscribers`: the machine fills them in the waiters' order, `isEmpty` sees a lone first
// subscriber, and the storage's own `resume(_:)` (not the test support's `perform()`) resumes
// every one of them, once.

import Testing

@testable import AsyncMulticast

@Suite("Effects: the first subscriber inline, the others after it")
struct EffectsSubscribersTests {
    typealias Result = Swift.Result<Int?, TestError>

    /// A running machine whose `count` subscribers all wait, suspended in their order.
    private static func waiting(_ count: Int) async -> (Machine, [Suspended<Result>]) {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: count)
        var suspended: [Suspended<Result>] = []
        for (index, id) in ids.enumerated() {
            if index > 0 { #expect(machine.take(id) == .suspend(startUpstream: nil)) }
            let waiter = await Suspended<Result>.make()
            #expect(machine.subscriberSuspended(id, continuation: waiter.continuation).isEmpty)
            suspended.append(waiter)
        }
        #expect(machine.waiters.count == count)
        return (machine, suspended)
    }

    @Test("one waiter ended: first inline, no array, and the effects are not empty")
    func oneWaiter() async {
        let (started, waiters) = await Self.waiting(1)
        var machine = started
        let effects = machine.upstreamEnded(epoch: 0, failure: nil)
        #expect(effects.firstSubscriber != nil)
        #expect(effects.moreSubscribers.isEmpty)
        #expect(!effects.isEmpty)
        MulticastStorage<Int, TestError>(policy: .unbounded, replay: 0, mode: .push, upstream: nil).resume(effects)
        #expect(await waiters[0].value() == .success(nil))
    }

    @Test("a cancelled waiter alone: subscriberLeft's effects hold it first, and are not empty")
    func cancelledWaiter() async {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 2)
        let waiter = await Suspended<Result>.make()
        #expect(machine.subscriberSuspended(ids[0], continuation: waiter.continuation).isEmpty)
        let left = machine.subscriberLeft(ids[0])
        #expect(left.firstSubscriber != nil && left.moreSubscribers.isEmpty)
        #expect(!left.isEmpty)
        MulticastStorage<Int, TestError>(policy: .unbounded, replay: 0, mode: .push, upstream: nil).resume(left)
        #expect(await waiter.value() == .success(nil))
    }

    @Test("three waiters ended: the first waiter first, then the others in their order")
    func threeWaitersInOrder() async {
        let (started, waiters) = await Self.waiting(3)
        var machine = started
        let effects = machine.upstreamEnded(epoch: 0, failure: TestError.other(3))
        #expect(effects.moreSubscribers.count == 2)
        #expect(effects.subscribers.count == 3)
        // Resumed one at a time: which waiter each continuation belongs to.
        effects.firstSubscriber?.resume(returning: effects.subscriberResult)
        #expect(await waiters[0].value() == .failure(TestError.other(3)))
        #expect(waiters[1].received.withLock { $0 } == nil && waiters[2].received.withLock { $0 } == nil)
        effects.moreSubscribers[0].resume(returning: effects.subscriberResult)
        #expect(await waiters[1].value() == .failure(TestError.other(3)))
        #expect(waiters[2].received.withLock { $0 } == nil)
        effects.moreSubscribers[1].resume(returning: effects.subscriberResult)
        #expect(await waiters[2].value() == .failure(TestError.other(3)))
    }

    @Test("three waiters ended: the storage's resume(_:) resumes all three")
    func storageResumesAll() async {
        let (started, waiters) = await Self.waiting(3)
        var machine = started
        let effects = machine.upstreamEnded(epoch: 0, failure: nil)
        MulticastStorage<Int, TestError>(policy: .unbounded, replay: 0, mode: .push, upstream: nil).resume(effects)
        for waiter in waiters { #expect(await waiter.value() == .success(nil)) }
    }
}
