// The contract of a `.bufferingNewest(n)` iterator that takes batches ahead (HeldBatch,
// `HeldBatch.take`): what each subscriber receives, and the `.missed(n)` events and
// positioned gaps it reports, are exactly what reading one element at a time under the lock
// gave (tokio's `Lagged(n)`: a `.missed` takes nothing; the element after a gap may itself be
// dropped later). Single-task runs compare event by event with `LagReference`; concurrent runs
// check what holds in every interleaving (each element received or counted missed, each
// sender's order, no duplicate, a positioned gap bounding exactly the positions not received,
// the same position carrying the same element for every subscriber).

import Testing

@testable import AsyncMulticast

@Suite("Dropping batches: the one-at-a-time contract", .timeLimit(.minutes(5)))
struct DroppingBatchContractTests {
    // MARK: Seeded single-task comparisons

    /// Every limit the batches treat apart: 1 (no batch), 2 and 3 (batches of 1), 4, 5, 7,
    /// 130 (a batch of 64), and `Int.max` (lossless batches), beside lossless subscribers.
    static let policies: [SharedBufferingPolicy] =
        [0, 1, 2, 3, 4, 5, 7, 130, .max].map { .bufferingNewest($0) } + [.bounded(4), .unbounded]

    /// A subscriber of a seeded run: a lag-reporting iterator, or a positioned one (its
    /// events checked against the reference's with positions, from `position`).
    enum Reader {
        case events(SharedEventIterator<Int, Never>)
        case positioned(PositionedEventIterator<Int, Never>, position: Int, pendingGap: Range<Int>?)
    }

    @Test(
        "events and positioned gaps match a one-at-a-time queue, for every limit, with and without replay",
        arguments: [0, 3, 9])
    func eventsAndGapsMatchOneAtATime(replay: Int) async throws {
        let coverage = try await LagReportingTests.Coverage.ofSeededRuns(
            "seeded runs", seeds: 0..<120, case: "replay \(replay)"
        ) { await Self.run(seed: $0, replay: replay, coverage: &$1) }
        #expect(coverage.elements > 1_000)
        #expect(coverage.missed > 300, "the runs reached few gaps")
    }

    /// The elements sent are their positions, so that a positioned event's position and its
    /// element must agree.
    static func run(seed: UInt64, replay: Int, coverage: inout LagReportingTests.Coverage) async -> String? {
        var rng = LCG(seed: seed &* 31 &+ UInt64(replay))
        let subject = AsyncReplaySubject<Int, Never>(replay: replay, buffering: .unbounded)
        var readers: [Reader?] = []
        var references: [LagReference] = []
        var trace: [String] = []
        var sent = 0

        func join(_ rng: inout LCG) {
            let policy = Self.policies[Int(rng.next() % UInt64(Self.policies.count))]
            let history = Array(Swift.max(0, sent - replay)..<sent)
            var reference = LagReference(policy: policy)
            if case .bufferingNewest(let keep) = policy, rng.next() % 2 == 0 {
                // Positioned, resuming after a random position: the history after it that
                // the replay cache and the policy hold, and a gap before it.
                let after = Int(rng.next() % UInt64(sent + 2)) - 1
                let start = Swift.min(sent, Swift.max(after + 1, sent - replay, keep == .max ? 0 : sent - keep))
                for value in start..<sent { reference.receive(value) }
                let gap = after + 1 < start ? (after + 1)..<start : nil
                readers.append(
                    .positioned(
                        subject.subscribe(after: after, buffering: policy).makeAsyncIterator(), position: start,
                        pendingGap: gap))
                trace.append("subscribe(after: \(after), \(policy))")
            } else {
                // A dropping subscriber is replayed the newest of the cache it holds.
                let replayed: ArraySlice<Int>
                if case .bufferingNewest(let keep) = policy {
                    replayed = history.suffix(keep)
                } else {
                    replayed = history[...]
                }
                for value in replayed { reference.receive(value) }
                readers.append(.events(subject.events(buffering: policy).makeAsyncIterator()))
                trace.append("events(\(policy))")
            }
            references.append(reference)
        }
        func failure(_ message: String) -> String { "\(message)\n  steps: \(trace.joined(separator: ", "))" }

        for _ in 0..<Int(rng.next() % 3) + 1 { join(&rng) }
        for _ in 0..<150 {
            let roll = rng.next() % 100
            switch roll {
            case 0..<45:
                subject.send(sent)
                for k in references.indices where readers[k] != nil { references[k].receive(sent) }
                trace.append("send(\(sent))")
                sent += 1
            case 45..<92:
                let ready = references.indices.filter {
                    guard readers[$0] != nil else { return false }
                    if case .positioned(_, _, _?) = readers[$0] { return true }
                    return references[$0].hasEventReady
                }
                guard !ready.isEmpty else { continue }
                let k = ready[Int(rng.next() % UInt64(ready.count))]
                if let mismatch = await Self.readOne(&readers[k], &references[k], &coverage) {
                    return failure("subscriber #\(k) (\(references[k].policy)): \(mismatch)")
                }
                trace.append("read(#\(k))")
            case 92..<97:
                if readers.count < 6 { join(&rng) }
            default:
                let live = readers.indices.filter { readers[$0] != nil }
                guard live.count > 1 else { continue }
                let k = live[Int(rng.next() % UInt64(live.count))]
                readers[k] = nil
                references[k].ended = true
                trace.append("leave(#\(k))")
            }
            if let violation = subject.storage.invariantViolation { return failure("invariant: \(violation)") }
        }
        subject.finish()
        trace.append("finish")
        for k in readers.indices where readers[k] != nil {
            // The end: what is left, then the trailing gap, then nil.
            while references[k].hasEventReady || Self.hasPendingGap(readers[k]) {
                if let mismatch = await Self.readOne(&readers[k], &references[k], &coverage) {
                    return failure("subscriber #\(k) (\(references[k].policy)) at the end: \(mismatch)")
                }
            }
            let (rest, _) = references[k].remainingEvents(endingWith: nil)
            for expected in rest {
                guard let mismatch = await Self.readExpecting(expected, &readers[k]) else { continue }
                return failure("subscriber #\(k) (\(references[k].policy)) at the end: \(mismatch)")
            }
            if let mismatch = await Self.readExpecting(nil, &readers[k]) {
                return failure("subscriber #\(k) (\(references[k].policy)) at the end: \(mismatch)")
            }
        }
        return nil
    }

    static func hasPendingGap(_ reader: Reader?) -> Bool {
        if case .positioned(_, _, _?) = reader { return true }
        return false
    }

    /// Reads one event and compares it with the reference's next one (a positioned reader's
    /// pending gap first).
    static func readOne(
        _ reader: inout Reader?, _ reference: inout LagReference, _ coverage: inout LagReportingTests.Coverage
    ) async -> String? {
        if case .positioned(var iterator, let position, let gap?) = reader {
            let event = await iterator.next()
            reader = .positioned(iterator, position: position, pendingGap: nil)
            let expected = PositionedEvent<Int, Int>.gap(after: gap.lowerBound - 1, before: gap.upperBound)
            return event == expected ? nil : "read \(String(describing: event)), expected \(expected)"
        }
        let expected = reference.nextEvent()
        coverage.count(expected)
        return await Self.readExpecting(expected, &reader)
    }

    /// Reads one event, expecting the reference's `expected` (`nil`: the end).
    static func readExpecting(_ expected: SharedEvent<Int>?, _ reader: inout Reader?) async -> String? {
        switch reader {
        case .events(var iterator):
            let event = await iterator.next()
            reader = .events(iterator)
            return event == expected
                ? nil : "read \(String(describing: event)), expected \(String(describing: expected))"
        case .positioned(var iterator, let position, _):
            let event = await iterator.next()
            let wanted: PositionedEvent<Int, Int>?
            var next = position
            switch expected {
            case .element(let value)?:
                wanted = .element(value, position: position)
                next += 1
            case .missed(let count)?:
                wanted = .gap(after: position - 1, before: position + count)
                next += count
            case .evicted(let eviction)?: wanted = .evicted(eviction)
            case nil: wanted = nil
            }
            reader = .positioned(iterator, position: next, pendingGap: nil)
            return event == wanted ? nil : "read \(String(describing: event)), expected \(String(describing: wanted))"
        case nil:
            return "read from a subscriber that left"
        }
    }

    // MARK: Leaving while holding a batch

    /// How many elements `storage` has produced (its machine's tail).
    static func produced(_ storage: MulticastStorage<Int, Never>) -> Int {
        storage.state.withLock { $0.machine.tail }
    }

    /// A cancelled task's `next()` returns what its iterator had taken that the policy has not
    /// dropped, then `nil`; what was still only in the shared buffer (3) is not returned.
    @Test(
        "a task cancelled while its iterator holds a batch gets the part its policy kept, then nil",
        arguments: [false, true])
    func cancelledWhileHoldingABatch(reportsGaps: Bool) async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bufferingNewest(4))
        let (joined, tookFirst) = (Signal<Void>(), Signal<SharedEvent<Int>?>())
        let (readFirst, readRest) = (Latch(), Latch())
        // A plain iterator's elements are recorded as `.element`s.
        let reader = Task { () -> [SharedEvent<Int>] in
            var received: [SharedEvent<Int>] = []
            if reportsGaps {
                var events = subject.events().makeAsyncIterator()
                joined.send(())
                await readFirst.wait()
                tookFirst.send(await events.next())
                await readRest.wait()
                while let event = await events.next() { received.append(event) }
            } else {
                var iterator = subject.makeAsyncIterator()
                joined.send(())
                await readFirst.wait()
                tookFirst.send(await iterator.next().map { .element($0) })
                await readRest.wait()
                while let element = await iterator.next() { received.append(.element(element)) }
            }
            return received
        }
        _ = await joined.next("joined")
        for value in 0..<4 { subject.send(value) }
        readFirst.release()
        let first = await tookFirst.next("read 0, took 1 and 2 ahead")
        #expect(first == .some(.element(0)))
        // One at a time it would now hold 2...5: 1 (taken ahead) is dropped, 2 is not.
        subject.send(4)
        subject.send(5)
        reader.cancel()
        readRest.release()
        let rest = await reader.value
        #expect(rest == (reportsGaps ? [.missed(1), .element(2)] : [.element(2)]))
        #expect(subject.storage.subscriberCount == 0, "it left once the batch was used up")
    }

    /// A subscriber whose multicast connection was cancelled keeps what it had taken: the
    /// elements a later connection produces never reach it, so they drop nothing it holds,
    /// even once a subscriber of that connection makes the producers publish the tail again.
    @Test("a batch taken before a multicast connection ended is not dropped by the next connection's elements")
    func aBatchOutlivesItsConnection() async throws {
        let source = FedSource()
        let multicast = source.multicast(buffering: .bufferingNewest(4))
        let storage = multicast._core.storage
        var old = multicast.events().makeAsyncIterator()
        let connection = multicast.connect()
        #expect(await source.control.waitForStart(of: 0))
        source.control.yield(0, 1, 2, 3)
        try await waitUntil("0...3 produced") { Self.produced(storage) == 4 }
        #expect(await old.next() == .element(0))
        #expect(old.subscription.held?.withLock(\.elements) == [1, 2], "it took 1 and 2 ahead")
        connection.cancel()

        // The next connection: `late` takes a batch (so appends publish the tail again) and
        // ten more are produced, far past the expiry of `old`'s batch.
        var late = multicast.events().makeAsyncIterator()
        let reconnected = multicast.connect()
        #expect(await source.control.waitForStart(of: 1))
        source.control.yield(10, 11, 12)
        try await waitUntil("10...12 produced") { Self.produced(storage) == 7 }
        #expect(await late.next() == .element(10))
        #expect(late.subscription.held?.withLock(\.elements) == [11, 12])
        source.control.yield(13, 14, 15, 16, 17, 18, 19, 20, 21, 22)
        try await waitUntil("13...22 produced") { Self.produced(storage) == 17 }
        #expect(storage.tailPublished > 5, "the tail published is past the expiry of old's batch")

        var rest: [SharedEvent<Int>] = []
        while let event = await old.next() { rest.append(event) }
        #expect(rest == [.element(1), .element(2), .element(3)], "what it held when its connection ended, then nil")
        // One at a time, `late` would hold 19...22 now: its batch (11, 12) and 13...18 drop.
        #expect(await late.next() == .missed(8))
        #expect(await late.next() == .element(19))
        reconnected.cancel()
        var lateRest: [SharedEvent<Int>] = []
        while let event = await late.next() { lateRest.append(event) }
        #expect(lateRest == [.element(20), .element(21), .element(22)])
    }

    // MARK: Senders appended outside a send

    /// How the parked senders get in: the `.bounded(1)` subscriber they wait for leaves, or
    /// they give up waiting (their tasks are cancelled) and are appended past every bound.
    enum Admission: String, CaseIterable, Sendable {
        case boundedSubscriberLeaves, sendersCancelled
    }

    /// The critical section that appends parked senders' elements is not a send's: a leave's,
    /// or a cancelled sender's. It must publish the tail too, or the iterator would return
    /// what its policy dropped.
    @Test(
        "senders let in by a leave, or giving up waiting, drop what the iterator holds", arguments: Admission.allCases)
    func parkedSendersAppendedOutsideASend(_ admission: Admission) async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var paced: SharedIterator<Int, Never>? = subject.buffering(.bounded(1)).makeAsyncIterator()
        var events = subject.events(buffering: .bufferingNewest(4)).makeAsyncIterator()
        for value in 0..<4 { subject.send(value) }  // past `paced`'s bound: a plain send never waits
        #expect(await events.next() == .element(0))
        #expect(events.subscription.held?.withLock(\.elements) == [1, 2])
        let senders = try await parkInOrder([4, 5], storage: subject.storage) { await subject.send(waitingForRoom: $0) }
        switch admission {
        case .boundedSubscriberLeaves:
            withExtendedLifetime(paced) {}
            paced = nil
        case .sendersCancelled:
            for sender in senders { sender.cancel() }
        }
        for sender in senders { await sender.value }
        try await waitUntil("4 and 5 appended") { Self.produced(subject.storage) == 6 }
        // One at a time, `events` would hold 2...5: 1 dropped.
        #expect(await events.next() == .missed(1))
        #expect(await events.next() == .element(2))
        subject.finish()
        var rest: [SharedEvent<Int>] = []
        while let event = await events.next() { rest.append(event) }
        #expect(rest == [.element(3), .element(4), .element(5)])
        withExtendedLifetime(paced) {}
    }
}
