// Automatic mode, the one `share()` and `replay(n)` use, driven on `MulticastStateMachine`
// directly: no tasks, no locks. Orderings that are hard to produce with real tasks
// (cancellation racing an element, the last subscriber leaving while the upstream produces,
// a stale producer) are written out transition by transition, and the effects each
// transition returns are checked. Where a suspended subscriber is needed, a real
// continuation is created by `withUnsafeContinuation` and resumed by performing the effects.
// The driving helpers are in Support/StateMachineDriving.swift.

import Testing

@testable import AsyncMulticast

@Suite("State machine: automatic mode (share and replay)")
struct StateMachineTests {
    // MARK: Subscribing and starting

    @Test func subscribingStartsNothing() {
        var machine = Machine(policy: .bounded(4), replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        let b = machine.subscriberJoined()
        #expect(machine.subscriberCount == 2)
        #expect(machine.upstream == .idle)
        #expect(machine.isSubscribed(a) && machine.isSubscribed(b))
        #expect(a != b)
    }

    @Test func firstDemandStartsOneUpstream() {
        var machine = Machine(policy: .bounded(4), replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        let b = machine.subscriberJoined()
        #expect(machine.take(a) == .suspend(startUpstream: 0))
        #expect(machine.upstream == .running(epoch: 0))
        // Further demand, from the same or another subscriber, starts nothing more.
        #expect(machine.take(b) == .suspend(startUpstream: nil))
        #expect(machine.take(a) == .suspend(startUpstream: nil))
    }

    @Test func waitingSubscriberIsHandedTheElement() async {
        var (machine, ids) = runningMachine(policy: .bounded(4), subscribers: 2)
        let (a, b) = (ids[0], ids[1])
        let received = await withUnsafeContinuation { continuation in
            let suspended = machine.subscriberSuspended(a, continuation: continuation)
            #expect(suspended.isEmpty, "already running: nothing to start")
            let (effects, park) = machine.push(7, epoch: 0)
            #expect(!park)
            #expect(effects.subscribers.count == 1)
            #expect(effects.subscriberResult == .success(7))
            effects.perform()
        }
        #expect(received == .success(7))
        // The waiting subscriber took it directly; `b` (not waiting) has it buffered.
        #expect(machine.take(a) == .suspend(startUpstream: nil))
        #expect(machine.drain(b) == [7])
        #expect(machine.bufferedCount == 0)
    }

    @Test func onlyWaitingSubscribersMeansNothingIsStored() async {
        var (machine, ids) = runningMachine(policy: .bounded(4), subscribers: 1)
        let received = await withUnsafeContinuation { continuation in
            _ = machine.subscriberSuspended(ids[0], continuation: continuation)
            let (effects, _) = machine.push(1, epoch: 0)
            #expect(machine.bufferedCount == 0)
            effects.perform()
        }
        #expect(received == .success(1))
    }

    @Test func suspendResumesAtOnceWhenAnElementArrivedInBetween() async {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 1)
        let a = ids[0]
        // `next` said "suspend", then an element arrived before `suspend` ran.
        _ = machine.push(5, epoch: 0)
        let received = await withUnsafeContinuation { continuation in
            let effects = machine.subscriberSuspended(a, continuation: continuation)
            #expect(effects.subscribers.count == 1)
            #expect(effects.subscriberResult == .success(5))
            effects.perform()
        }
        #expect(received == .success(5))
    }

    // MARK: Leaving

    @Test func cancelRacingAnElement() async {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 2)
        let (a, b) = (ids[0], ids[1])
        let received = await withUnsafeContinuation { continuation in
            _ = machine.subscriberSuspended(a, continuation: continuation)
            // Cancellation wins: `a` leaves and its continuation is handed back with nil.
            let left = machine.subscriberLeft(a)
            #expect(left.subscribers.count == 1)
            #expect(left.subscriberResult == .success(nil))
            #expect(left.cancelUpstream == nil, "b is still subscribed")
            // The element produced right after is not delivered to `a`.
            let (produced, _) = machine.push(1, epoch: 0)
            #expect(produced.subscribers.isEmpty)
            left.perform()
        }
        #expect(received == .success(nil))
        #expect(!machine.isSubscribed(a))
        #expect(machine.take(a) == .finished)
        #expect(machine.drain(b) == [1])
        #expect(machine.subscriberCount == 1)
    }

    @Test func cancelledBeforeSuspendingIsResumedWithNil() async {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 2)
        let a = ids[0]
        _ = machine.subscriberLeft(a)  // the cancellation handler ran first
        let received = await withUnsafeContinuation { continuation in
            let effects = machine.subscriberSuspended(a, continuation: continuation)
            #expect(effects.subscribers.count == 1)
            effects.perform()
        }
        #expect(received == .success(nil))
        #expect(machine.subscriberCount == 1)
    }

    @Test func leavingTwiceIsHarmlessAndStaleIDsNeverTouchANewSubscriber() {
        var machine = Machine(policy: .unbounded, replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        _ = machine.subscriberJoined()
        _ = machine.subscriberLeft(a)
        #expect(machine.subscriberLeft(a).isEmpty)
        #expect(machine.subscriberCount == 1)
        // The freed slot is reused with a new generation.
        let c = machine.subscriberJoined()
        #expect(c.slot == a.slot)
        #expect(c != a)
        _ = machine.subscriberLeft(a)
        #expect(machine.isSubscribed(c))
        #expect(machine.subscriberCount == 2)
    }

    @Test func lastSubscriberLeavingWhileTheUpstreamProduces() {
        var (machine, ids) = runningMachine(policy: .bounded(2), subscribers: 2)
        _ = machine.push(0, epoch: 0)
        #expect(machine.subscriberLeft(ids[0]).cancelUpstream == nil)
        let last = machine.subscriberLeft(ids[1])
        #expect(last.cancelUpstream == 0)
        #expect(machine.upstream == .idle)
        #expect(machine.bufferedCount == 0, "nobody is left to read the buffered element")
        // The upstream was already producing: its element is refused, and its end is ignored.
        #expect(machine.produce(1, epoch: 0).isStop)
        #expect(machine.upstreamEnded(epoch: 0, failure: .boom).isEmpty)
        #expect(machine.terminal == nil)
    }

    @Test func neverIteratedSubscribersLeavingStopNothing() {
        var machine = Machine(policy: .bounded(2), replay: 0, mode: .automatic)
        let a = machine.subscriberJoined()
        let effects = machine.subscriberLeft(a)
        #expect(effects.isEmpty)
        #expect(machine.upstream == .idle)
    }

    @Test func restartAfterDisconnectUsesTheNextEpoch() {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 1)
        _ = machine.push(0, epoch: 0)
        #expect(machine.subscriberLeft(ids[0]).cancelUpstream == 0)
        let b = machine.subscriberJoined()
        #expect(machine.take(b) == .suspend(startUpstream: 1), "a stale element is never replayed")
        #expect(machine.upstream == .running(epoch: 1))
        #expect(machine.produce(99, epoch: 0).isStop, "the old iteration stays stopped")
        _ = machine.push(0, epoch: 1)
        #expect(machine.drain(b) == [0])
        #expect(machine.isCurrent(epoch: 1) && !machine.isCurrent(epoch: 0))
    }

    // MARK: Joining

    @Test func lateSubscriberStartsAtTheTail() {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 1)
        for i in 0..<3 { _ = machine.push(i, epoch: 0) }
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .suspend(startUpstream: nil))
        _ = machine.push(3, epoch: 0)
        #expect(machine.drain(late) == [3])
        #expect(machine.drain(ids[0]) == [0, 1, 2, 3])
    }

    // MARK: The shared buffer

    @Test func histogramTrimsExactlyWhatNobodyNeeds() {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 3)
        let (a, b, c) = (ids[0], ids[1], ids[2])
        for i in 0..<5 { _ = machine.push(i, epoch: 0) }
        #expect(machine.bufferedCount == 5)
        #expect(machine.drain(a) == [0, 1, 2, 3, 4])
        #expect(machine.bufferedCount == 5)
        #expect(machine.take(b) == .element(0))
        #expect(machine.take(b) == .element(1))
        #expect(machine.bufferedCount == 5, "c still holds 0")
        for i in 0..<3 { #expect(machine.take(c) == .element(i)) }
        #expect(machine.bufferedCount == 3, "b holds 2, 3, 4")
        _ = machine.subscriberLeft(b)
        #expect(machine.bufferedCount == 2, "c holds 3, 4")
        _ = machine.push(5, epoch: 0)
        #expect(machine.bufferedCount == 3)
        #expect(machine.drain(c) == [3, 4, 5])
        #expect(machine.bufferedCount == 1, "a still holds 5")
        #expect(machine.drain(a) == [5])
        #expect(machine.bufferedCount == 0)
    }

    @Test func replayWindowIsKeptForLateSubscribers() {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 1, replay: 2)
        let a = ids[0]
        for i in 0..<5 { _ = machine.push(i, epoch: 0) }
        #expect(machine.drain(a) == [0, 1, 2, 3, 4])
        #expect(machine.bufferedCount == 2)
        let b = machine.subscriberJoined()
        #expect(machine.drain(b) == [3, 4])
        #expect(machine.take(b) == .suspend(startUpstream: nil))
        // A dropping subscriber never receives more than its limit, even from the replay.
        let newest = machine.subscriberJoined(policy: .bufferingNewest(1))
        #expect(machine.drain(newest) == [4])
        _ = machine.push(5, epoch: 0)
        #expect(machine.bufferedCount == 2, "4, 5 (everyone read 5 or will)")
        #expect(machine.drain(b) == [5])
        #expect(machine.drain(newest) == [5])
        #expect(machine.drain(a) == [5])
        #expect(machine.bufferedCount == 2)
        // Nobody left: the upstream stops but the window survives.
        for id in [a, b, newest] { _ = machine.subscriberLeft(id) }
        #expect(machine.upstream == .idle)
        #expect(machine.bufferedCount == 2)
        let c = machine.subscriberJoined()
        #expect(machine.drain(c) == [4, 5])
    }

    @Test func lanesPerPolicyShareOneBuffer() {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 1)
        let all = ids[0]
        let newest = machine.subscriberJoined(policy: .bufferingNewest(2))
        let oldest = machine.subscriberJoined(policy: .bufferingOldest(2))
        let bounded = machine.subscriberJoined(policy: .bounded(10))
        for i in 0..<6 { _ = machine.push(i, epoch: 0) }
        #expect(machine.bufferedCount == 6)
        #expect(machine.drain(all) == Array(0..<6))
        #expect(machine.drain(bounded) == Array(0..<6))
        #expect(machine.bufferedCount == 2, "only the bufferingNewest(2) subscriber's 4, 5 are left")
        #expect(machine.drain(newest) == [4, 5])
        #expect(machine.drain(oldest) == [0, 1])
        #expect(machine.bufferedCount == 0)
    }

    // MARK: Bounded: parking the producer

    @Test func boundedProducerParksUntilTheSlowestReads() async {
        var (machine, ids) = runningMachine(policy: .bounded(2), subscribers: 2)
        let (slow, fast) = (ids[0], ids[1])
        #expect(machine.push(0, epoch: 0).park == false)
        #expect(machine.hasRoom)
        #expect(machine.push(1, epoch: 0).park == true)
        #expect(!machine.hasRoom)
        #expect(machine.drain(fast) == [0, 1])
        #expect(!machine.hasRoom, "the fast subscriber reading makes no room")
        let resumed = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            #expect(machine.producerParked(epoch: 0, token: 0, continuation: producer).isEmpty)
            guard case .element(let element, let producers) = machine.nextRequested(slow) else {
                Issue.record("slow subscriber had nothing")
                producer.resume(returning: false)
                return
            }
            #expect(element == 0)
            #expect(producers.count == 1)
            for p in producers { p.resume(returning: true) }
        }
        #expect(resumed)
        #expect(machine.hasRoom)
    }

    @Test func parkingWhenRoomOrStaleResumesAtOnce() async {
        var (machine, ids) = runningMachine(policy: .bounded(1), subscribers: 1)
        let withRoom = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            let effects = machine.producerParked(epoch: 0, token: 0, continuation: producer)
            #expect(effects.producers.count == 1)
            effects.perform()
        }
        #expect(withRoom == true)
        let stale = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            let effects = machine.producerParked(epoch: 7, token: 1, continuation: producer)
            #expect(effects.producers.count == 1)
            effects.perform()
        }
        #expect(stale == false)
        _ = ids
    }

    @Test("a parked producer resumes at half the bound, not at the first free slot")
    func parkedProducerResumesAtTheLowWatermark() async {
        var (machine, ids) = runningMachine(policy: .bounded(4), subscribers: 1)
        for value in 0..<3 { #expect(!machine.push(value, epoch: 0).park) }
        #expect(machine.push(3, epoch: 0).park, "4 pending: full")
        #expect(machine.producerStatus(epoch: 0) == .park)
        let resumed = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            #expect(machine.producerParked(epoch: 0, token: 1, continuation: producer).isEmpty)
            // Reading one leaves 3 pending: there is room for one, but 3 > 4 - 4 / 2.
            guard case .element(0, let early) = machine.nextRequested(ids[0]) else {
                Issue.record("expected element 0")
                return
            }
            #expect(early.isEmpty, "one free slot does not wake the producer")
            #expect(machine.hasRoom && !machine.hasRoomToResume)
            #expect(machine.producerStatus(epoch: 0) == .park)
            // Reading a second leaves 2 pending: half the bound, so the producer goes on.
            guard case .element(1, let producers) = machine.nextRequested(ids[0]) else {
                Issue.record("expected element 1")
                return
            }
            #expect(producers.count == 1)
            #expect(machine.producerStatus(epoch: 0) == .proceed)
            for producer in producers { producer.resume(returning: true) }
        }
        #expect(resumed == true)
        #expect(machine.producerStatus(epoch: 7) == .stop, "a stale epoch stops")
    }

    @Test("bounds of 1 and 2 resume as soon as there is room")
    func smallBoundsResumeAtFirstRoom() {
        for bound in [1, 2] {
            var (machine, ids) = runningMachine(policy: .bounded(bound), subscribers: 1)
            for value in 0..<bound { _ = machine.push(value, epoch: 0) }
            #expect(machine.producerStatus(epoch: 0) == .park, "bound \(bound): full")
            #expect(machine.take(ids[0]) == .element(0))
            #expect(machine.producerStatus(epoch: 0) == .proceed, "bound \(bound): one read makes room")
        }
    }

    /// Random produce / read / join / leave steps with bounded and unbounded subscribers and
    /// a producer that parks when told to: it is resumed exactly when every bounded
    /// subscriber is down to its resume level, and while it is parked some subscriber
    /// always has elements to read (so parking can never deadlock).
    @Test(arguments: 0..<12)
    func parkedProducerResumesExactlyAtTheWatermark(seed: Int) async {
        var rng = LCG(seed: UInt64(seed) &+ 1000)
        let policies: [SharedBufferingPolicy] = [.bounded(1), .bounded(2), .bounded(4), .bounded(7), .unbounded]
        func resumeLevel(_ policy: SharedBufferingPolicy) -> Int {
            if case .bounded(let n) = policy { return n - max(1, n / 2) }
            return .max
        }
        var machine = Machine(policy: .bounded(4), replay: 0, mode: .automatic)
        var subs: [(id: SubscriberID, policy: SharedBufferingPolicy, pending: Int)] = []
        func join(_ policy: SharedBufferingPolicy? = nil) {
            let policy = policy ?? policies[Int(rng.next() % UInt64(policies.count))]
            subs.append((machine.subscriberJoined(policy: policy), policy, 0))
        }
        join(.bounded(4))
        #expect(machine.take(subs[0].id) == .suspend(startUpstream: 0))
        join()
        var resumes = 0
        _ = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            var parked = false
            var value = 0
            func allAtOrBelowLevel() -> Bool {
                subs.allSatisfy { $0.pending <= resumeLevel($0.policy) }
            }
            for step in 0..<600 {
                let roll = rng.next() % 100
                if !parked && roll < 45 {
                    let (effects, park) = machine.push(value, epoch: 0)
                    #expect(effects.subscribers.isEmpty, "nobody is suspended in this test")
                    value += 1
                    for k in subs.indices { subs[k].pending += 1 }
                    if park {
                        let parking = machine.producerParked(epoch: 0, token: UInt64(step), continuation: producer)
                        if parking.producers.isEmpty {
                            parked = true
                            #expect(
                                !allAtOrBelowLevel(), "step \(step): parked although every subscriber is at its level")
                        } else {
                            #expect(parking.producerResult && allAtOrBelowLevel(), "step \(step)")
                            resumes += 1
                        }
                    }
                } else if roll < 90 || subs.count == 1 {
                    let k = Int(rng.next() % UInt64(subs.count))
                    switch machine.nextRequested(subs[k].id) {
                    case .element(_, let producers):
                        subs[k].pending -= 1
                        if !producers.isEmpty {
                            #expect(parked && allAtOrBelowLevel(), "step \(step): resumed early")
                            parked = false
                            resumes += 1
                        }
                    case .nothingReady, .nothingReadyStartingUpstream:
                        #expect(subs[k].pending == 0, "step \(step): suspended with elements pending")
                    case .gap:
                        Issue.record("step \(step): a gap reported to a reader that does not report gaps")
                    case .ended, .endedNoticed:
                        Issue.record("step \(step): unexpected end")
                    case .elementReleasingSenders:
                        Issue.record("step \(step): an upstream's producer parks without an element")
                    }
                } else if roll < 95 {
                    let k = Int(rng.next() % UInt64(subs.count))
                    let effects = machine.subscriberLeft(subs[k].id)
                    subs.remove(at: k)
                    if !effects.producers.isEmpty {
                        #expect(parked && allAtOrBelowLevel(), "step \(step): resumed early on leave")
                        parked = false
                        resumes += 1
                    }
                } else {
                    join()
                }
                if parked {
                    #expect(!allAtOrBelowLevel(), "step \(step): left parked at the watermark")
                    #expect(subs.contains { $0.pending > 0 }, "step \(step): parked with nothing to read")
                }
            }
            // Resumed once, here: the test only recorded the resumptions the machine asked for.
            producer.resume(returning: true)
        }
        #expect(resumes > 0, "the walk exercised parking")
    }

    @Test func lastSubscriberLeavingReleasesAParkedProducerWithFalse() async {
        var (machine, ids) = runningMachine(policy: .bounded(1), subscribers: 1)
        #expect(machine.push(0, epoch: 0).park)
        let resumed = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            #expect(machine.producerParked(epoch: 0, token: 3, continuation: producer).isEmpty)
            let effects = machine.subscriberLeft(ids[0])
            #expect(effects.cancelUpstream == 0)
            #expect(effects.producers.count == 1)
            #expect(effects.producerResult == false)
            effects.perform()
        }
        #expect(resumed == false)
        #expect(machine.producerCancelled(token: 3).isEmpty)
    }

    @Test func unparkingACancelledProducer() async {
        var (machine, _) = runningMachine(policy: .bounded(1), subscribers: 1)
        #expect(machine.push(0, epoch: 0).park)
        let resumed = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            _ = machine.producerParked(epoch: 0, token: 9, continuation: producer)
            #expect(machine.producerCancelled(token: 8).isEmpty)
            let mine = machine.producerCancelled(token: 9)
            #expect(mine.producers.count == 1)
            #expect(mine.producerResult == false)
            mine.perform()
        }
        #expect(resumed == false)
    }

    // MARK: Terminal events

    @Test func finishHandsWaitersTheErrorAndOthersTheirBufferFirst() async {
        var (machine, ids) = runningMachine(policy: .unbounded, subscribers: 2)
        let (waiting, buffered) = (ids[0], ids[1])
        #expect(await machine.suspended(waiting, thenPushed: 0) == .success(0))
        _ = machine.push(1, epoch: 0)
        #expect(machine.drain(waiting) == [1])
        let failed = await withUnsafeContinuation { continuation in
            _ = machine.subscriberSuspended(waiting, continuation: continuation)
            let effects = machine.upstreamEnded(epoch: 0, failure: .boom)
            #expect(effects.subscribers.count == 1)
            #expect(effects.subscriberResult == .failure(.boom))
            #expect(effects.cancelUpstream == nil && effects.startUpstream == nil)
            effects.perform()
        }
        #expect(failed == .failure(.boom))
        #expect(machine.upstream == .terminated(.failed(.boom)))
        #expect(!machine.isSubscribed(waiting), "a subscriber that got the terminal event has left")
        #expect(machine.take(buffered) == .element(0))
        #expect(machine.take(buffered) == .element(1))
        #expect(machine.take(buffered) == .failed(.boom))
        #expect(machine.take(buffered) == .finished, "after the error: nil")
        // Later subscribers get the error at once, and nothing restarts.
        let late = machine.subscriberJoined()
        #expect(machine.take(late) == .failed(.boom))
        #expect(machine.take(late) == .finished)
        #expect(machine.subscriberCount == 0)
        #expect(machine.produce(2, epoch: 0).isStop)
        #expect(machine.upstreamEnded(epoch: 0, failure: nil).isEmpty, "terminal events are sticky")
    }

    @Test func finishReleasesParkedProducers() async {
        var (machine, _) = runningMachine(policy: .bounded(1), subscribers: 1)
        #expect(machine.push(0, epoch: 0).park)
        let resumed = await withUnsafeContinuation { (producer: Machine.ProducerContinuation) in
            _ = machine.producerParked(epoch: 0, token: 0, continuation: producer)
            let effects = machine.upstreamEnded(epoch: 0, failure: nil)
            #expect(effects.producers.count == 1)
            #expect(effects.producerResult == false)
            effects.perform()
        }
        #expect(resumed == false)
    }

    // MARK: Dropping policies

    @Test func bufferingNewestMovesWholeCells() {
        var (machine, ids) = runningMachine(policy: .bufferingNewest(2), subscribers: 1)
        let early = ids[0]
        for i in 0..<2 { _ = machine.push(i, epoch: 0) }
        let late = machine.subscriberJoined()
        for i in 2..<5 {
            _ = machine.push(i, epoch: 0)
            #expect(machine.bufferedCount <= 2)
        }
        #expect(machine.drain(early) == [3, 4])
        #expect(machine.drain(late) == [3, 4])
        #expect(machine.bufferedCount == 0)
    }

    @Test func bufferingOldestFreezesAFullCellOutOfTheSharedBuffer() {
        var (machine, ids) = runningMachine(policy: .bufferingOldest(2), subscribers: 1)
        let slow = ids[0]
        for i in 0..<10 { _ = machine.push(i, epoch: 0) }
        #expect(machine.bufferedCount == 0, "the full subscriber's two elements were copied out")
        #expect(machine.take(slow) == .element(0))
        for i in 10..<13 { _ = machine.push(i, epoch: 0) }
        #expect(machine.drain(slow) == [1, 10])
        _ = machine.push(13, epoch: 0)
        #expect(machine.drain(slow) == [13], "back in the shared buffer once its queue emptied")
        #expect(machine.subscriberCount == 1)
        _ = machine.subscriberLeft(slow)
        #expect(machine.subscriberCount == 0)
    }

    @Test func bufferingOldestFrozenMembersLeaveCleanly() {
        var (machine, ids) = runningMachine(policy: .bufferingOldest(1), subscribers: 3)
        for i in 0..<3 { _ = machine.push(i, epoch: 0) }
        #expect(machine.take(ids[0]) == .element(0))  // detached, then rejoins
        _ = machine.subscriberLeft(ids[1])  // still frozen
        _ = machine.push(3, epoch: 0)
        #expect(machine.drain(ids[0]) == [3])
        #expect(machine.drain(ids[2]) == [0], "full with 0: 1, 2 and 3 were dropped")
        #expect(machine.bufferedCount == 0)
    }

    @Test(arguments: [SharedBufferingPolicy.bufferingNewest(0), .bufferingOldest(0)])
    func limitZeroReceivesOnlyWhileWaiting(policy: SharedBufferingPolicy) async {
        var (machine, ids) = runningMachine(policy: policy, subscribers: 2)
        let (waiting, idle) = (ids[0], ids[1])
        #expect(await machine.suspended(waiting, thenPushed: 0) == .success(0))
        #expect(machine.bufferedCount == 0)
        _ = machine.push(1, epoch: 0)
        #expect(machine.take(idle) == .suspend(startUpstream: nil), "nothing is kept for it")
        #expect(machine.take(waiting) == .suspend(startUpstream: nil))
        _ = machine.subscriberLeft(idle)
        #expect(machine.subscriberCount == 1)
    }

    // MARK: Against a naive model

    /// Random subscribe / read / produce / leave / finish steps, on machines with mixed
    /// policies and with or without a replay window, checked against per-subscriber queues
    /// (the "own AsyncStream" semantics) after every step.
    @Test(arguments: 0..<24)
    func agreesWithPerSubscriberQueues(seed: Int) {
        var rng = LCG(seed: UInt64(seed))
        let policies: [SharedBufferingPolicy] = [
            .bounded(1), .bounded(3), .unbounded,
            .bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(3),
            .bufferingOldest(0), .bufferingOldest(1), .bufferingOldest(3),
        ]
        let replay = seed % 3 == 0 ? 2 : 0
        let mixed = seed % 2 == 1
        let defaultPolicy = policies[seed % policies.count]
        var machine = Machine(policy: defaultPolicy, replay: replay, mode: .automatic)

        struct Model {
            var id: SubscriberID
            var policy: SharedBufferingPolicy
            var queue: [Int]
        }
        var subs: [Model] = []
        var produced: [Int] = []
        var epoch: UInt64?
        var nextEpoch: UInt64 = 0
        var terminal: TestError?? = nil  // .some(nil): finished
        var value = 0

        func modelHasRoom() -> Bool {
            !subs.contains { sub in
                if case .bounded(let n) = sub.policy { return sub.queue.count >= n }
                return false
            }
        }

        for step in 0..<400 {
            let roll = Int(rng.next() % 100)
            let context = "seed \(seed) step \(step)"
            if roll < 15 && subs.count < 6 {
                let policy = mixed ? policies[Int(rng.next() % UInt64(policies.count))] : defaultPolicy
                let id = machine.subscriberJoined(policy: policy)
                subs.append(Model(id: id, policy: policy, queue: policy.replayed(produced, replay: replay)))
            } else if roll < 50 && !subs.isEmpty {
                let k = Int(rng.next() % UInt64(subs.count))
                let outcome = machine.take(subs[k].id)
                if !subs[k].queue.isEmpty {
                    #expect(outcome == .element(subs[k].queue.removeFirst()), "\(context)")
                } else if let terminal {
                    #expect(outcome == (terminal.map(ReadOutcome.failed) ?? .finished), "\(context)")
                    subs.remove(at: k)
                } else if epoch == nil {
                    #expect(outcome == .suspend(startUpstream: nextEpoch), "\(context)")
                    epoch = nextEpoch
                    nextEpoch += 1
                } else {
                    #expect(outcome == .suspend(startUpstream: nil), "\(context)")
                }
            } else if roll < 80, let running = epoch, terminal == nil, machine.hasRoom {
                let action = machine.produce(value, epoch: running)
                produced.append(value)
                for k in subs.indices { subs[k].policy.enqueue(value, into: &subs[k].queue) }
                value += 1
                switch action {
                case .proceed(let effects):
                    #expect(modelHasRoom(), "\(context)")
                    #expect(effects.subscribers.isEmpty)
                case .park(let effects):
                    #expect(!modelHasRoom(), "\(context)")
                    #expect(effects.subscribers.isEmpty)
                case .stop:
                    Issue.record("\(context): current producer stopped")
                }
            } else if roll < 93 && !subs.isEmpty {
                let k = Int(rng.next() % UInt64(subs.count))
                let effects = machine.subscriberLeft(subs[k].id)
                subs.remove(at: k)
                if subs.isEmpty, let running = epoch, terminal == nil {
                    #expect(effects.cancelUpstream == running, "\(context)")
                    epoch = nil
                    #expect(machine.produce(-1, epoch: running).isStop, "\(context)")
                } else {
                    #expect(effects.cancelUpstream == nil, "\(context)")
                }
            } else if roll >= 98, let running = epoch, terminal == nil {
                let failure: TestError? = rng.next() % 2 == 0 ? nil : .other(step)
                _ = machine.upstreamEnded(epoch: running, failure: failure)
                terminal = .some(failure)
                epoch = nil
            }

            // Invariants after every step.
            #expect(machine.subscriberCount == subs.count, "\(context)")
            #expect(machine.hasRoom == modelHasRoom(), "\(context)")
            let pinned =
                subs.filter {
                    if case .bufferingOldest(let n) = $0.policy, n > 0 { return false }
                    return true
                }.map(\.queue.count).max() ?? 0
            let lower = max(min(replay, produced.count), pinned)
            let upper = max(lower, subs.map(\.queue.count).max() ?? 0)
            #expect(
                machine.bufferedCount >= lower && machine.bufferedCount <= upper,
                "\(context): bufferedCount \(machine.bufferedCount) outside \(lower)...\(upper)")
        }
        // Finish and drain everyone.
        if terminal == nil {
            if epoch == nil, !subs.isEmpty {
                epoch = machine.connectRequested().epoch  // start an upstream so that it can finish
            }
            if let running = epoch { _ = machine.upstreamEnded(epoch: running, failure: nil) }
            terminal = .some(nil)
        }
        for sub in subs {
            #expect(machine.drain(sub.id) == sub.queue, "seed \(seed): final drain")
        }
        #expect(machine.subscriberCount == 0)
        #expect(machine.bufferedCount <= replay)
    }
}
