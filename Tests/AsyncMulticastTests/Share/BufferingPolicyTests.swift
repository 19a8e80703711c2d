// Policies apply per subscriber, as if each subscriber iterated its own AsyncStream with the
// same policy, fed with every element from the moment it joined. The dropping policies and
// .unbounded are checked against real AsyncStreams driven through the same script;
// .bounded's pacing is checked by counting the upstream's pulls.

import Testing

@testable import AsyncMulticast

/// One step of a policy script. Slow subscribers never wait in `next()`: they only read when
/// their reference stream says an element is buffered for them.
enum PolicyStep: Sendable, CustomStringConvertible {
    /// Yield the next value upstream; a separate subscriber that is waiting receives it.
    case send
    case join(Int)
    case read(Int)
    case leave(Int)

    var description: String {
        switch self {
        case .send: return "send"
        case .join(let s): return "join(\(s))"
        case .read(let s): return "read(\(s))"
        case .leave(let s): return "leave(\(s))"
        }
    }
}

struct PolicyRun {
    /// Per slow subscriber, in join order: what it received and what its own AsyncStream gave.
    var sessions: [(received: [Int], reference: [Int], joinedAt: Int)] = []
    /// What the always-waiting subscriber received.
    var waiting: [Int] = []
    var sent = 0
}

/// Runs `steps` against `stream.share(buffering: policy)` and, for each slow subscriber, a
/// real `AsyncStream` with the same policy created when it joined and fed the same values.
///
/// Ordering: before each value is sent, the test waits until the always-waiting subscriber is
/// suspended in `next()`; the value is in the shared buffer once that subscriber received it.
func runPolicyScript(_ policy: SharedBufferingPolicy, _ steps: [PolicyStep]) async throws -> PolicyRun {
    struct Session {
        var iterator: SharedIterator<Int, Never>?
        var reference: AsyncStream<Int>.Iterator
        var referenceInput: AsyncStream<Int>.Continuation
        var referenceCount = 0
        var received: [Int] = []
        var expected: [Int] = []
        let joinedAt: Int
    }
    let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
    let shared = stream.share(buffering: policy)
    let waiting = SubscriberBox(shared.makeAsyncIterator())
    var sessions: [Session] = []
    var open: [Int: Int] = [:]
    var run = PolicyRun()

    for step in steps {
        switch step {
        case .send:
            let value = run.sent
            let pending = try await shared.startWaitingRead(of: waiting, waiting: 1)
            upstream.yield(value)
            let received = await pending.value
            #expect(received == value, "a waiting subscriber loses nothing")
            run.waiting.append(received ?? -1)
            for index in open.values {
                switch sessions[index].referenceInput.yield(value) {
                case .enqueued(let remaining):
                    if let limit = policy.dropLimit {
                        sessions[index].referenceCount = limit - remaining
                    } else {
                        sessions[index].referenceCount += 1
                    }
                case .dropped:
                    sessions[index].referenceCount = policy.dropLimit!
                case .terminated:
                    Issue.record("reference stream terminated")
                @unknown default:
                    Issue.record("unknown yield result")
                }
            }
            run.sent += 1
        case .join(let slot):
            guard open[slot] == nil else { continue }
            let (reference, input) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: policy.streamPolicy)
            open[slot] = sessions.count
            sessions.append(
                Session(
                    iterator: shared.makeAsyncIterator(), reference: reference.makeAsyncIterator(),
                    referenceInput: input, joinedAt: run.sent))
        case .read(let slot):
            guard let index = open[slot], sessions[index].referenceCount > 0 else { continue }
            // Something is buffered for it: both return at once.
            let received = await sessions[index].iterator!.next()
            let expected = await sessions[index].reference.next()
            sessions[index].received.append(received ?? -1)
            sessions[index].expected.append(expected ?? -1)
            sessions[index].referenceCount -= 1
        case .leave(let slot):
            guard let index = open.removeValue(forKey: slot) else { continue }
            sessions[index].iterator = nil
            sessions[index].referenceInput.finish()
        }
    }
    upstream.finish()
    #expect(await waiting.next() == nil)
    for index in open.values {
        sessions[index].referenceInput.finish()
        while let element = await sessions[index].iterator!.next() { sessions[index].received.append(element) }
        while let element = await sessions[index].reference.next() { sessions[index].expected.append(element) }
        sessions[index].iterator = nil
    }
    run.sessions = sessions.map { ($0.received, $0.expected, $0.joinedAt) }
    #expect(shared.subscriberCount == 0)
    return run
}

/// `steps` for: a slow subscriber joins, 10 values arrive, it reads one, 3 more arrive, then
/// it reads everything.
let holdReadOneThenDrain: [PolicyStep] =
    [.join(0)] + Array(repeating: .send, count: 10) + [.read(0)] + Array(repeating: .send, count: 3)

func randomPolicyScript(seed: UInt64, length: Int = 48) -> [PolicyStep] {
    var rng = LCG(seed: seed)
    var steps: [PolicyStep] = [.join(0)]
    for _ in 0..<length {
        let roll = rng.next() % 100
        let slot = Int(rng.next() % 3)
        switch roll {
        case 0..<40: steps.append(.send)
        case 40..<75: steps.append(.read(slot))
        case 75..<90: steps.append(.join(slot))
        default: steps.append(.leave(slot))
        }
    }
    return steps
}

@Suite("Buffering policies")
struct BufferingPolicyTests {
    // MARK: Against AsyncStream

    @Test(arguments: [
        (SharedBufferingPolicy.bufferingOldest(2), [0, 1, 10]),
        (.bufferingOldest(1), [0, 10]),
        (.bufferingOldest(0), []),
        (.bufferingNewest(2), [8, 11, 12]),
        (.bufferingNewest(1), [9, 12]),
        (.bufferingNewest(0), []),
        (.unbounded, Array(0..<13)),
    ])
    func slowSubscriberBehavesLikeItsOwnAsyncStream(policy: SharedBufferingPolicy, expected: [Int]) async throws {
        try await withTimeout {
            let run = try await runPolicyScript(policy, holdReadOneThenDrain)
            #expect(run.sessions.count == 1)
            #expect(run.sessions[0].reference == expected, "the expected values are AsyncStream's")
            #expect(run.sessions[0].received == expected)
            #expect(run.waiting == Array(0..<13), "the waiting subscriber loses nothing")
        }
    }

    @Test(
        arguments: [
            SharedBufferingPolicy.bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(2), .bufferingNewest(3),
            .bufferingOldest(0), .bufferingOldest(1), .bufferingOldest(2), .bufferingOldest(3), .unbounded,
        ], [UInt64(1), 2])
    func randomScriptsMatchAsyncStream(policy: SharedBufferingPolicy, seed: UInt64) async throws {
        try await withTimeout {
            let steps = randomPolicyScript(seed: seed)
            let run = try await runPolicyScript(policy, steps)
            #expect(run.waiting == Array(0..<run.sent))
            for (index, session) in run.sessions.enumerated() {
                #expect(session.received == session.reference, "session \(index), script \(steps)")
                #expect(session.received.allSatisfy { $0 >= session.joinedAt }, "nothing from before it joined")
            }
        }
    }

    // MARK: Late subscribers never see stale elements

    @Test(arguments: [
        (SharedBufferingPolicy.unbounded, [5, 6, 7]),
        (.bufferingNewest(2), [6, 7]),
        (.bufferingOldest(2), [5, 6]),
        (.bufferingNewest(0), []),
        (.bufferingOldest(0), []),
    ])
    func lateSubscriberGetsNoStaleElements(policy: SharedBufferingPolicy, expected: [Int]) async throws {
        try await withTimeout {
            // Slot 0 holds whatever its policy keeps of 0..<5; slot 1 joins after that.
            let steps: [PolicyStep] =
                [.join(0)] + Array(repeating: .send, count: 5) + [.join(1)]
                + Array(repeating: .send, count: 3)
            let run = try await runPolicyScript(policy, steps)
            #expect(run.sessions[1].received == expected)
            #expect(run.sessions[1].received == run.sessions[1].reference)
            #expect(run.sessions[0].received == run.sessions[0].reference)
        }
    }

    @Test func lateBoundedSubscriberGetsNoStaleElements() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            // Room for all 8 elements and the end: the holder alone would otherwise keep the
            // upstream from being pulled for its end.
            let shared = stream.share(buffering: .bounded(9))
            var holder = shared.makeAsyncIterator()  // keeps 0..<5 buffered
            let reader = SubscriberBox(shared.makeAsyncIterator())
            for i in 0..<5 { upstream.yield(i) }
            for i in 0..<5 { #expect(await reader.next() == i) }
            #expect(shared.storage.bufferedCount == 5)
            var late = shared.makeAsyncIterator()
            for i in 5..<8 { upstream.yield(i) }
            upstream.finish()
            let received = await late.readAll()
            #expect(received == [5, 6, 7])
            let held = await holder.readAll()
            #expect(held == Array(0..<8))
        }
    }

    // MARK: .bounded

    @Test(arguments: [1, 3, 8])
    func boundedPacesTheUpstreamToTheSlowestSubscriber(limit: Int) async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share(buffering: .bounded(limit))
            let slow = SubscriberBox(shared.makeAsyncIterator())
            var fast = shared.makeAsyncIterator()
            for i in 0..<limit { #expect(await fast.next() == i) }
            // The slow subscriber holds `limit` elements: the upstream was pulled exactly that far.
            #expect(probe.pulls == limit)
            #expect(shared.storage.bufferedCount == limit)

            let slowReads = 40
            let total = limit + slowReads
            let fastRest = Task {
                var received: [Int] = []
                while received.count < total - limit, let element = await fast.next() { received.append(element) }
                return received
            }
            var consumed: [Int] = []
            for _ in 0..<slowReads {
                consumed.append(await slow.next() ?? -1)
                // At most `limit` elements ahead of what the slowest subscriber consumed, plus
                // the batch its iterator took and has not returned yet (`min(limit / 2, 64)`,
                // see `MulticastStateMachine.read`): how much of that the producer filled
                // depends on how far ahead it was at the slow subscriber's last read.
                let pulls = probe.pulls
                let batch = min(limit / 2, 64)
                #expect(pulls <= consumed.count + limit + batch, "pulled \(pulls) after \(consumed.count) consumed")
            }
            #expect(consumed == Array(0..<slowReads), "lossless")
            slow.release()  // the fast subscriber alone paces the rest
            #expect(await fastRest.value == Array(limit..<total), "lossless")
        }
    }

    @Test func boundedSharedBufferStaysWithinTheLimitWithManySubscribers() async throws {
        try await withTimeout {
            let limit = 4
            let shared = Counter(limit: 200).share(buffering: .bounded(limit))
            let storage = shared.storage
            let results = await shared.iterateTogether(200) { iterator in
                var received: [Int] = []
                var maxBuffered = 0
                while let element = await iterator.next() {
                    received.append(element)
                    maxBuffered = max(maxBuffered, storage.bufferedCount)
                }
                return (received, maxBuffered)
            }
            for (received, maxBuffered) in results {
                #expect(received == Array(0..<200))
                #expect(maxBuffered <= limit, "one shared buffer of at most \(limit) elements")
            }
        }
    }

    // MARK: Dropping policies with many idle subscribers

    @Test(arguments: [
        (SharedBufferingPolicy.bufferingNewest(3), [97, 98, 99]),
        (.bufferingOldest(3), [0, 1, 2]),
    ])
    func droppingPoliciesKeepOneSharedBuffer(policy: SharedBufferingPolicy, expected: [Int]) async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share(buffering: policy)
            var idle = (0..<200).map { _ in shared.makeAsyncIterator() }
            let fast = SubscriberBox(shared.makeAsyncIterator())
            var received: [Int] = []
            for value in 0..<100 {
                let pending = try await shared.startWaitingRead(of: fast, waiting: 1)
                upstream.yield(value)
                received.append(await pending.value ?? -1)
                #expect(shared.storage.bufferedCount <= 3)
            }
            upstream.finish()
            #expect(await fast.next() == nil)
            #expect(received == Array(0..<100), "a subscriber that keeps up loses nothing")
            for index in idle.indices {
                var kept: [Int] = []
                while let element = await idle[index].next() { kept.append(element) }
                #expect(kept == expected)
            }
        }
    }

    // MARK: .unbounded

    @Test func unboundedKeepsEverythingWithoutPacing() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(limit: 100), probe: probe).share(buffering: .unbounded)
            var slow = shared.makeAsyncIterator()
            var fast = shared.makeAsyncIterator()
            let fastReceived = await fast.readAll()
            #expect(fastReceived == Array(0..<100))
            #expect(probe.pulls == 101, "not paced by the slow subscriber")
            #expect(shared.storage.bufferedCount == 100)
            let slowReceived = await slow.readAll()
            #expect(slowReceived == Array(0..<100))
            #expect(shared.storage.bufferedCount == 0)
        }
    }

    @Test("a view counts the same subscribers as what it views, whatever their policy")
    func viewSubscriberCount() {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let view = subject.buffering(.bufferingNewest(1))
        var plain: SharedIterator<Int, Never>? = subject.makeAsyncIterator()
        var viewed: SharedIterator<Int, Never>? = view.makeAsyncIterator()
        #expect(view.subscriberCount == 2)
        #expect(subject.subscriberCount == 2)
        plain = nil
        #expect(view.subscriberCount == 1)
        viewed = nil
        #expect(view.subscriberCount == 0)
        _ = (plain, viewed)
    }
}
