// Reliability of the subjects: behaviour at the edges of the public API, with real tasks.
//
// - A `.bounded(n)` subject counts only the elements a subscriber has not been handed yet, so
//   a subscriber that echoes what it reads with `send(waitingForRoom:)` never waits for itself.
// - Extreme arguments (`Int.max` and zero limits, very many distinct per-subscriber policies)
//   work as documented.
//
// Every test body runs under `withTimeout` or `withProgressWatchdog`, so a hang is reported as
// a failure. The other faces' reliability suites: Share/ShareReliabilityTests.swift and
// Multicast/MulticastReliabilityTests.swift.

import Testing

@testable import AsyncMulticast

// Long: its races scale with scheduler round trips, so on a loaded machine they may take
// minutes. A hang fails sooner, by each test's no-progress watchdog or hang guard.
@Suite("Reliability: subjects", .timeLimit(.minutes(15)))
struct SubjectReliabilityTests {
    // MARK: - Bounded subjects count only what was not handed out

    @Test(
        "a .bounded(8) subject: after the subscriber read all 8 buffered elements, 8 send(waitingForRoom:) calls return without a reader"
    )
    func boundedSubjectHasRoomOnceTheSubscriberReadEverything() async throws {
        try await withTimeout(seconds: 150) {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(8))
            var iterator = subject.makeAsyncIterator()
            for value in 0..<8 { subject.send(value) }
            var first: [Int] = []
            for _ in 0..<8 {
                guard let element = await iterator.next() else { break }
                first.append(element)
            }
            #expect(first == Array(0..<8))

            // Nothing is unconsumed now: the subscriber has room for 8 more, and nobody reads
            // while they are sent, so each of these must return on its own.
            var sent = 0
            for value in 8..<16 {
                await subject.send(waitingForRoom: value)
                sent += 1
            }
            try Task.checkCancellation()  // stopped by the hang guard: nothing more to check
            #expect(sent == 8)

            var second: [Int] = []
            for _ in 0..<8 {
                guard let element = await iterator.next() else { break }
                second.append(element)
            }
            #expect(second == Array(8..<16))
            subject.finish()
            #expect(await iterator.next() == nil)
        }
    }

    /// Where an echoing subscriber's bound is: the subject's policy, or a view's on an
    /// unbounded subject.
    enum BoundOn: String, NamedTestCase {
        case subject, view
    }

    @Test(
        "a subscriber of a .bounded(n) subject, or of a .bounded(n) view on an unbounded subject, that echoes every element with send(waitingForRoom:) never waits for itself, for every n in 1...64",
        arguments: BoundOn.allCases)
    func echoingSubscriberNeverWaitsForItself(_ boundOn: BoundOn) async throws {
        try await withTimeout(seconds: 150) {
            for bound in 1...64 {
                if Task.isCancelled { break }
                let subject: AsyncPassthroughSubject<Int, Never>
                let iterator: SharedIterator<Int, Never>
                switch boundOn {
                case .subject:
                    subject = AsyncPassthroughSubject(buffering: .bounded(bound))
                    iterator = subject.makeAsyncIterator()
                case .view:
                    subject = AsyncPassthroughSubject()
                    iterator = subject.buffering(.bounded(bound)).makeAsyncIterator()
                }
                await Self.checkEcho(bound: bound, subject: subject, iterator: iterator)
            }
        }
    }

    @Test(
        "a .bounded(n) view paces send(waitingForRoom:) on an unbounded subject: it waits while the view's subscriber is full"
    )
    func boundedViewPacesSendWaitingForRoom() async throws {
        try await withTimeout(seconds: 150) {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var iterator = subject.buffering(.bounded(2)).makeAsyncIterator()
            subject.send(0)
            subject.send(1)  // the view's subscriber now holds 2 of 2
            let sent = Lock(false)
            let producer = Task {
                await subject.send(waitingForRoom: 2)
                sent.withLock { $0 = true }
            }
            try await waitUntil("the producer to wait for room") { subject.storage.parkedProducerCount != 0 }
            #expect(subject.storage.parkedProducerCount == 1, "one producer waits")
            #expect(sent.withLock { $0 } == false, "send(waitingForRoom:) waited for the full view")
            #expect(await iterator.next() == 0)  // makes room: the producer goes on
            await producer.value
            #expect(sent.withLock { $0 })
            #expect(await iterator.next() == 1)
            #expect(await iterator.next() == 2)
        }
    }

    /// A burst of `max(1, bound - 1)` synchronous sends, then the subscriber (this task)
    /// echoes every element it receives (`element + 1000`) with `send(waitingForRoom:)` until
    /// it received `3 * bound + 5` elements. It never holds more than `bound - 1` unconsumed
    /// elements when it sends, so no send may wait. Afterwards the subject is finished and the
    /// subscriber reads the echoes it had not read yet, then `nil`.
    private static func checkEcho(
        bound: Int, subject: AsyncPassthroughSubject<Int, Never>, iterator: SharedIterator<Int, Never>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        var iterator = iterator
        let burst = max(1, bound - 1)
        let total = 3 * bound + 5
        for value in 0..<burst { subject.send(value) }
        var received: [Int] = []
        while received.count < total, let element = await iterator.next() {
            received.append(element)
            await subject.send(waitingForRoom: element + 1000)
        }
        if Task.isCancelled {
            // Stopped by the hang guard: say where.
            Issue.record("bound \(bound): stuck after receiving \(received)", sourceLocation: sourceLocation)
            return
        }
        subject.finish()
        let rest = await iterator.readAll()

        // Everything sent, in order: the burst, then each echo in the order of the elements
        // it answers.
        var expected = Array(0..<burst)
        var answered = 0
        while expected.count < total + burst {
            expected.append(expected[answered] + 1000)
            answered += 1
        }
        #expect(received == Array(expected.prefix(total)), "bound \(bound)", sourceLocation: sourceLocation)
        #expect(
            rest == Array(expected.dropFirst(total)), "bound \(bound): the echoes not read yet",
            sourceLocation: sourceLocation)
        #expect(subject.subscriberCount == 0, "bound \(bound)", sourceLocation: sourceLocation)
    }

    // MARK: - Many distinct per-subscriber policies

    @Test(
        "100,000 short-lived subscribers, each through a view with a policy of its own, each receive what was sent to them"
    )
    func hundredThousandDistinctViews() async throws {
        // 100,000 rounds, each a few scheduler round trips: the hang guard is a watchdog that
        // each round feeds, not a deadline a loaded machine could miss.
        try await withProgressWatchdog("100,000 views") { progress in
            let subject = AsyncPassthroughSubject<Int, Never>()
            let count = 100_000
            var delivered = 0
            var firstMismatch: (k: Int, got: Int?)?
            for k in 0..<count {
                if Task.isCancelled { break }
                progress.tick()
                // A round never suspends (the element is there): let other tests run now and then.
                if k % 100 == 0 { await Task.yield() }
                var iterator = subject.buffering(.bufferingNewest(k + 1)).makeAsyncIterator()
                subject.send(k)
                let element = await iterator.next()
                if element == k {
                    delivered += 1
                } else if firstMismatch == nil {
                    firstMismatch = (k, element)
                }
            }
            #expect(delivered == count)
            #expect(firstMismatch == nil, "first mismatch: \(String(describing: firstMismatch))")
            #expect(subject.subscriberCount == 0)

            // The subject still works for a plain subscriber afterwards.
            var last = subject.makeAsyncIterator()
            subject.send(-1)
            subject.finish()
            #expect(await last.next() == -1)
            #expect(await last.next() == nil)
        }
    }

    // MARK: - Extreme arguments

    @Test(
        "subjects with an Int.max limit (policy or view) lose nothing, and send(waitingForRoom:) never waits",
        arguments: SharedBufferingPolicy.effectivelyUnbounded)
    func subjectsWithExtremeLimits(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 150) {
            let values = Array(0..<300)
            // The subject's own policy, and a view with it on a default subject.
            let own = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let plain = AsyncPassthroughSubject<Int, Never>()
            for (subject, iterator) in [
                (own, own.makeAsyncIterator()), (plain, plain.buffering(policy).makeAsyncIterator()),
            ] {
                var iterator = iterator
                for value in values.prefix(150) { subject.send(value) }
                for value in values.dropFirst(150) { await subject.send(waitingForRoom: value) }
                subject.finish()
                let received = await iterator.readAll()
                #expect(received == values, "\(policy)")
            }

            // A current-value subject: the current value first, then every value sent.
            let current = AsyncCurrentValueSubject<Int, Never>(-1, buffering: policy)
            let currentPlain = AsyncCurrentValueSubject<Int, Never>(-1)
            for (subject, iterator) in [
                (current, current.makeAsyncIterator()),
                (currentPlain, currentPlain.buffering(policy).makeAsyncIterator()),
            ] {
                var iterator = iterator
                for value in values.prefix(150) { subject.send(value) }
                for value in values.dropFirst(150) { await subject.send(waitingForRoom: value) }
                subject.finish()
                let received = await iterator.readAll()
                #expect(received == [-1] + values, "\(policy)")
                #expect(subject.value == 299)
            }
        }
    }

    @Test(
        ".bufferingNewest(0) and .bufferingOldest(0) subscribers receive only what arrives while they wait",
        arguments: [SharedBufferingPolicy.bufferingNewest(0), .bufferingOldest(0)])
    func zeroLimitsReceiveOnlyWhileWaiting(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 150) {
            let own = AsyncPassthroughSubject<Int, Never>(buffering: policy)
            let plain = AsyncPassthroughSubject<Int, Never>()
            for (subject, iterator) in [
                (own, own.makeAsyncIterator()), (plain, plain.buffering(policy).makeAsyncIterator()),
            ] {
                let sub = SubscriberBox(iterator)
                subject.send(1)  // not waiting: not received
                let read = sub.startNext()
                try await waitUntil("the subscriber to wait") { subject.storage.waitingCount == 1 }
                subject.send(2)  // received by the waiting subscriber
                subject.send(3)  // not waiting any more: not received
                #expect(await read.value == 2, "\(policy)")
                subject.finish()
                #expect(await sub.next() == nil, "\(policy)")
            }

            // A current-value subject: not even the current value.
            let current = AsyncCurrentValueSubject<Int, Never>(0, buffering: policy)
            let currentPlain = AsyncCurrentValueSubject<Int, Never>(0)
            for (subject, iterator) in [
                (current, current.makeAsyncIterator()),
                (currentPlain, currentPlain.buffering(policy).makeAsyncIterator()),
            ] {
                let sub = SubscriberBox(iterator)
                subject.send(1)
                let read = sub.startNext()
                try await waitUntil("the subscriber to wait") { subject.storage.waitingCount == 1 }
                subject.send(2)
                subject.send(3)
                #expect(await read.value == 2, "\(policy)")
                subject.finish()
                #expect(await sub.next() == nil, "\(policy)")
                #expect(subject.value == 3)
            }
        }
    }
}

extension MulticastStorage {
    /// Producers waiting in `send(waitingForRoom:)` (or an upstream waiting for room).
    fileprivate var parkedProducerCount: Int {
        self.state.withLock { $0.machine.parkedProducers.count }
    }
}
