// The soft limit's deadlines against the order of clock readings, from outside: a deadline must
// be timed from a reading taken after its member went past the soft count, whoever took the
// reading (the element's own follow-up, another element's, the timer's); and a member that
// stays past its soft count must go once the duration has passed, by the timer alone, with no
// element sent after it went past (the timer's own evictions of the last subscriber, a clock
// whose sleeps fail, readings and wake-ups interleaved).
//
// Readings are held where the storage takes them (`HeldReadingClock`: a `ManualClock` that
// runs a closure on its next reading, after the value was read and before it is returned), so
// that another element can be sent between a reading and the critical section it is for. Order
// comes from gates (semaphores on threads outside the cooperative pool, a `BlockingGate` for
// the timer's thread, the clock's sleepers, `waitForEviction`); timeouts are hang guards only.

import Dispatch
import Synchronization
import Testing

@testable import AsyncMulticast

/// A `ManualClock` whose next reading of `now` can be held: `onNextReading(_:)` runs a closure
/// on it, once, after the value was read and before it is returned (the reader then uses that
/// value, however the time moved meanwhile).
final class HeldReadingClock: Clock, Sendable {
    typealias Duration = Swift.Duration
    typealias Instant = ManualClock.Instant

    let manual = ManualClock()
    private let hook = Mutex<(@Sendable (Instant) -> Void)?>(nil)

    var now: Instant {
        let reading = self.manual.now
        let hook = self.hook.withLock { hook in
            defer { hook = nil }
            return hook
        }
        hook?(reading)
        return reading
    }

    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await self.manual.sleep(until: deadline, tolerance: tolerance)
    }

    /// The next reading of `now` (only that one) runs `body` with its value before returning it.
    func onNextReading(_ body: @escaping @Sendable (Instant) -> Void) {
        self.hook.withLock { $0 = body }
    }
}

/// Runs `body` on a Dispatch thread (outside the cooperative pool, so that it may block on a
/// semaphore), and returns once it has.
func onDispatchThread(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            body()
            continuation.resume()
        }
    }
}

/// Waits on `semaphore` (on a Dispatch thread only), under a hang guard that records an issue.
func waitOnDispatchThread(
    _ semaphore: DispatchSemaphore, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    if semaphore.wait(timeout: .now() + .seconds(30)) == .timedOut {
        Issue.record("Timed out waiting for \(what)", sourceLocation: sourceLocation)
    }
}

// MARK: - On the machine

@Suite("Soft limits: a deadline is timed from a reading taken after its member went past")
struct SoftLimitReadingOrderTests {
    static let soft = SharedBufferingPolicy.evicting(10, softLimit: .above(2, for: .seconds(10)))

    /// A push-fed machine of `soft` with two members: the first joined before 0 was pushed, the
    /// second before 1. The next element takes the first past its soft count.
    static func machineWithTwoMembers() -> (Machine, first: SubscriberID, second: SubscriberID) {
        var machine = Machine(policy: Self.soft, replay: 0, mode: .push)
        let first = machine.subscriberJoined()
        _ = machine.push(0, epoch: Machine.pushEpoch)
        let second = machine.subscriberJoined()
        _ = machine.push(1, epoch: Machine.pushEpoch)
        return (machine, first, second)
    }

    @Test(
        "a reading taken for one element, before another took a second member past its soft count, does not time the second"
    )
    func aReadingTakenBeforeAnElementDoesNotTimeTheMemberItTookPast() {
        var (machine, first, second) = Self.machineWithTwoMembers()
        _ = machine.push(2, epoch: Machine.pushEpoch)  // t = 0: the first holds 3 > 2
        #expect(machine.followUp.contains(.reading))
        // Its storage reads the clock for it (0 s), outside the lock. Before that reading takes
        // the lock, the clock moves on to 100 s and an element takes the second past.
        _ = machine.push(3, epoch: Machine.pushEpoch)  // t = 100: the second holds 3 > 2
        _ = machine.clockRead(at: .zero, through: 3)  // the first element's reading arrives
        _ = machine.clockRead(at: .seconds(100), through: 4)  // then the second element's own
        #expect(machine.backlog(of: first) == nil, "the first held more than 2 for 100 s of 10")
        #expect(machine.backlog(of: second)?.count == 3, "the second held more than 2 for 0 s of 10")
        #expect(machine.nextSoftDeadline == .seconds(110))
        #expect(machine.invariantViolation() == nil)
    }

    @Test("an older reading arriving after a newer one does not bring the deadlines written from the newer one forward")
    func anOlderReadingArrivingLateKeepsTheDeadlinesOfTheNewer() {
        var (machine, first, second) = Self.machineWithTwoMembers()
        let third = machine.subscriberJoined()
        _ = machine.push(2, epoch: Machine.pushEpoch)  // t = 0: the first holds 3 > 2; its reading (0 s) is held
        _ = machine.push(3, epoch: Machine.pushEpoch)  // t = 100: the second holds 3 > 2
        _ = machine.clockRead(at: .seconds(100), through: 4)  // that element's reading: deadlines at 110
        _ = machine.push(4, epoch: Machine.pushEpoch)  // t = 100: the third holds 3 > 2
        _ = machine.clockRead(at: .zero, through: 3)  // the first element's reading, taken at 0 s, arrives now
        _ = machine.clockRead(at: .seconds(100), through: 5)  // the third element's own reading
        #expect(machine.backlog(of: first) == nil, "the first held more than 2 for 100 s of 10")
        #expect(machine.backlog(of: second)?.count == 4, "the second held more than 2 for 0 s of 10")
        #expect(machine.backlog(of: third)?.count == 3, "the third held more than 2 for 0 s of 10")
        #expect(machine.invariantViolation() == nil)
    }
}

// MARK: - Through a subject, readings held on the clock

extension HeavyAndTimingSensitive {
    /// Blocks threads: a Dispatch thread in a clock reading, and the timer's (a `BlockingGate`).
    @Suite("Soft limits: readings held on the clock while elements are sent", .timeLimit(.minutes(2)))
    struct SoftLimitHeldReadingTests {
        @Test(
            "a subject: the reading another element's follow-up took before a send does not time the member that send took past"
        )
        func anotherElementsReadingDoesNotTimeTheMemberASendTookPast() async {
            let clock = HeldReadingClock()
            let (subject, first, second) = subjectWithTwoMembers(on: clock)
            let firstRead = DispatchSemaphore(value: 0)
            let secondSent = DispatchSemaphore(value: 0)
            let firstDone = DispatchSemaphore(value: 0)
            // The follow-up of send(2) reads 0 s, and waits before it locks until send(3) is in.
            clock.onNextReading { _ in
                firstRead.signal()
                waitOnDispatchThread(secondSent, "send(3)")
            }
            async let one: Void = onDispatchThread {
                subject.send(2)  // t = 0: the first holds 3 > 2
                firstDone.signal()
            }
            async let two: Void = onDispatchThread {
                waitOnDispatchThread(firstRead, "the reading for send(2)")
                clock.manual.advance(by: .seconds(100))
                // send(3)'s own reading (100 s) waits until send(2)'s reading was used.
                clock.onNextReading { _ in
                    secondSent.signal()
                    waitOnDispatchThread(firstDone, "send(2)'s follow-up")
                }
                subject.send(3)  // t = 100: the second holds 3 > 2
            }
            await one
            await two
            #expect(await first.waitForEviction()?.reason == .softLimit, "the first held more than 2 for 100 s")
            #expect(second.backlog?.count == 3, "the second went past its soft count at 100 s: its deadline is 110 s")
            #expect(subject.storage.invariantViolation == nil)
            subject.finish()
        }

        @Test(
            "a subject: the timer's reading, taken before a send took a member past, does not time that member; the timer alone evicts it later"
        )
        func theTimersReadingDoesNotTimeTheMemberASendTookPast() async {
            let clock = HeldReadingClock()
            let (subject, first, second) = subjectWithTwoMembers(on: clock)
            subject.send(2)  // t = 0: the first holds 3 > 2, deadline 10 s
            await clock.manual.waitForSleepers(count: 1)
            #expect(clock.manual.sleeperDeadlines.map(\.offset) == [.seconds(10)])
            let timerRead = Signal<Void>()
            let gate = BlockingGate()
            clock.onNextReading { _ in
                timerRead.send(())
                gate.wait("the timer holds its reading of 10 s")
            }
            clock.manual.advance(by: .seconds(10))  // the timer wakes, reads 10 s and holds it
            _ = await timerRead.next("the timer's reading")
            let firstEvicted = DispatchSemaphore(value: 0)
            let watcher = Task {
                let eviction = await first.waitForEviction()
                firstEvicted.signal()
                return eviction
            }
            await onDispatchThread {
                clock.manual.advance(by: .seconds(40))  // 50 s
                // send(3)'s reading (50 s) lets the timer take the lock with its reading of
                // 10 s, and waits until the timer evicted the first.
                clock.onNextReading { _ in
                    gate.open()
                    waitOnDispatchThread(firstEvicted, "the timer's eviction of the first")
                }
                subject.send(3)  // t = 50: the second holds 3 > 2
            }
            #expect(await watcher.value?.reason == .softLimit)
            #expect(second.backlog?.count == 3, "went past its soft count at 50 s: its deadline is 60 s")
            #expect(subject.storage.invariantViolation == nil)
            // Nothing is sent from here on: the timer alone times the second.
            try? await waitUntil("the timer sleeps toward 60 s") {
                clock.manual.sleeperDeadlines.map(\.offset) == [.seconds(60)]
            }
            clock.manual.advance(by: .milliseconds(9_999))
            #expect(second.backlog?.count == 3, "59.999 s: kept")
            clock.manual.advance(by: .milliseconds(1))
            #expect(await second.waitForEviction()?.reason == .softLimit, "evicted at 60 s, nothing sent")
            subject.finish()
        }
    }
}

/// A subject of `.evicting(64, softLimit: .above(2, for: .seconds(10)))` on `clock`, with two
/// members: the first joined before 0 was sent, the second before 1. The next element takes
/// the first past its soft count, the one after it the second.
func subjectWithTwoMembers(
    on clock: some Clock<Duration>
) -> (
    subject: AsyncPassthroughSubject<Int, Never>, first: SharedSubscription<Int, Never>,
    second: SharedSubscription<Int, Never>
) {
    let subject = AsyncPassthroughSubject<Int, Never>(
        buffering: .evicting(64, softLimit: .above(2, for: .seconds(10))), clock: clock)
    let first = subject.subscribe()
    subject.send(0)
    let second = subject.subscribe()
    subject.send(1)
    return (subject, first, second)
}
