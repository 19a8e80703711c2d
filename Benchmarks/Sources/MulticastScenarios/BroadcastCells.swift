// The cells measured against tokio's `sync::broadcast`, the reference broadcast channel (the
// Benchmarks README's "Against tokio's broadcast" gives tokio's figures and their source):
//
// - lockstep: tokio's own `benches/sync_broadcast.rs` "contention" without its work: a subject
//   of capacity 1000, N subscribers each in its own task; the sender sends one element and
//   waits until every subscriber has received it before it sends the next, so each delivery
//   is one wake-up (a subscriber suspended in `next()` resumed by `send`).
// - resume floor: the same lockstep with no library at all: N tasks, each suspended on an
//   `UnsafeContinuation` per element, all resumed by the sender. What the Swift runtime's
//   resumption (job enqueue through the global executor, the task's switch) costs per
//   wake-up, which no broadcast library can go below.
// - lossy send: a `.bufferingNewest(64)` subject with N subscribers that never read while
//   the sender sends: the cost of a send (per element sent, not per delivery), flat in N
//   when a send does no per-subscriber work. Then each subscriber reads what it kept.
// - lossless, capacity 1024: `share(buffering: .bounded(1024))`, tokio's capacity for its
//   lossless fan-out figures (the `share` cell is capacity 64).

import AsyncMulticast
import Synchronization

/// A one-waiter notification: `wait()` returns once `signal()` was called since the last
/// `wait()` returned (tokio's `Notify::notify_one` with its stored permit).
final class LockstepNotify: Sendable {
    private let state = Mutex<(permit: Bool, waiter: UnsafeContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = self.state.withLock { state -> UnsafeContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.permit = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            let now = self.state.withLock { state -> Bool in
                if state.permit {
                    state.permit = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// The subscribers that have not yet received the element just sent.
final class Outstanding: Sendable {
    let count = Atomic<Int>(0)
}

/// The resume floor's suspended tasks, resumed together by the sender.
final class SuspendedTasks: Sendable {
    let continuations = Mutex<[UnsafeContinuation<Int?, Never>]>([])
}

enum BroadcastCells {
    /// The lockstep cell: `rounds` elements, each sent once every subscriber has received the
    /// one before. Every subscriber must receive `0..<rounds` in order.
    static func lockstep(subscribers: Int, rounds: Int) async -> FanOutTally {
        await Self.inRounds(
            AsyncPassthroughSubject(buffering: .bounded(1000)), subscribers: subscribers, elements: rounds, roundSize: 1
        )
    }

    /// `elements` sent to `subject`'s `subscribers` in rounds of `roundSize`, each round once
    /// every subscriber has received the one before. Every subscriber must receive
    /// `0..<elements` in order.
    static func inRounds(
        _ subject: AsyncPassthroughSubject<Int, Never>, subscribers: Int, elements: Int, roundSize: Int
    ) async -> FanOutTally {
        let outstanding = Outstanding()
        let allReceived = LockstepNotify()
        // Subscribed before any task runs, so that none misses the first element.
        let subscriptions = (0..<subscribers).map { _ in subject.subscribe() }
        return await withTaskGroup(of: SubscriberTally?.self, returning: FanOutTally.self) { group in
            for subscription in subscriptions {
                group.addTask {
                    var tally = SubscriberTally()
                    var expected = 0
                    var leftInRound = roundSize
                    for await value in subscription {
                        if value != expected, tally.failure == nil {
                            tally.failure = "got \(value) after \(expected - 1)"
                        }
                        expected = value + 1
                        tally.received += 1
                        leftInRound -= 1
                        // The last of its round: one count per subscriber and round.
                        if leftInRound == 0 || expected == elements {
                            leftInRound = roundSize
                            if outstanding.count.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                                allReceived.signal()
                            }
                        }
                    }
                    if expected != elements, tally.failure == nil {
                        tally.failure = "ended after \(expected) of \(elements)"
                    }
                    return tally
                }
            }
            group.addTask {
                var next = 0
                while next < elements {
                    outstanding.count.store(subscribers, ordering: .releasing)
                    let end = Swift.min(next + roundSize, elements)
                    while next < end {
                        subject.send(next)
                        next += 1
                    }
                    await allReceived.wait()
                }
                subject.finish()
                return nil
            }
            var total = FanOutTally()
            for await tally in group {
                if let tally { total.add(tally) }
            }
            return total
        }
    }

    /// The resume floor: the lockstep cell with no library. Each of `subscribers` tasks
    /// suspends on an `UnsafeContinuation` per element; the sender waits until all are
    /// suspended, then resumes them all with the element (`nil`: the end).
    static func resumeFloor(subscribers: Int, rounds: Int) async -> FanOutTally {
        let waiting = SuspendedTasks()
        let allWaiting = LockstepNotify()
        @Sendable func suspend() async -> Int? {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Int?, Never>) in
                let last = waiting.continuations.withLock { list -> Bool in
                    list.append(continuation)
                    return list.count == subscribers
                }
                if last { allWaiting.signal() }
            }
        }
        return await withTaskGroup(of: SubscriberTally?.self, returning: FanOutTally.self) { group in
            for _ in 0..<subscribers {
                group.addTask {
                    var tally = SubscriberTally()
                    var expected = 0
                    while let value = await suspend() {
                        if value != expected, tally.failure == nil {
                            tally.failure = "got \(value) after \(expected - 1)"
                        }
                        expected = value + 1
                        tally.received += 1
                    }
                    if expected != rounds, tally.failure == nil {
                        tally.failure = "ended after \(expected) of \(rounds)"
                    }
                    return tally
                }
            }
            group.addTask {
                for round in 0...rounds {
                    await allWaiting.wait()
                    let resuming = waiting.continuations.withLock { list in
                        defer { list.removeAll(keepingCapacity: true) }
                        return list
                    }
                    for continuation in resuming { continuation.resume(returning: round < rounds ? round : nil) }
                }
                return nil
            }
            var total = FanOutTally()
            for await tally in group {
                if let tally { total.add(tally) }
            }
            return total
        }
    }

    /// The lossy send cell: `elements` sent to a `.bufferingNewest(64)` subject whose
    /// `subscribers` never read until it finished; then each must read the newest 64 (or
    /// all, if fewer were sent), in order.
    static func lossySend(subscribers: Int, elements: Int) async -> FanOutTally {
        let kept = 64
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(kept))
        let subscriptions = (0..<subscribers).map { _ in subject.subscribe() }
        for element in 0..<elements { subject.send(element) }
        subject.finish()
        var total = FanOutTally()
        for subscription in subscriptions {
            var tally = SubscriberTally()
            var expected = Swift.max(0, elements - kept)
            for await value in subscription {
                if value != expected, tally.failure == nil { tally.failure = "got \(value), expected \(expected)" }
                expected = value + 1
                tally.received += 1
            }
            if expected != elements, tally.failure == nil { tally.failure = "ended at \(expected) of \(elements)" }
            total.add(tally)
        }
        return total
    }

    /// The chunked read cells (`inRounds`, rounds of 512): a subscriber never falls 1,024
    /// behind, so nothing is dropped; the same deliveries under `.bufferingNewest(1024)`
    /// (`lossy-read`) and `.bounded(1024)` (`lossless-read`): what reading a lossy lane costs
    /// against a lossless one. Each subscriber is woken once a round, and takes what it
    /// finds in batches.
    static func chunkedRead(lossy: Bool, subscribers: Int, elements: Int) async -> FanOutTally {
        await Self.inRounds(
            AsyncPassthroughSubject(buffering: lossy ? .bufferingNewest(1024) : .bounded(1024)),
            subscribers: subscribers, elements: elements, roundSize: 512)
    }

    /// `share(buffering: .bounded(1024))` over the opaque upstream: the `share` cell at
    /// tokio's capacity.
    static func share1024(subscribers: Int, elements: Int) async -> FanOutTally {
        await HeapJitter.around {
            let shared = OpaqueCountingSequence(elements).share(buffering: .bounded(1024))
            return await fanOutShared(shared, subscribers: subscribers, elements: elements, lossless: true)
        }
    }
}
