// Adversarial round 3, from outside, through the public API. Three targets:
//
// 1. `send(contentsOf:)` on the subjects when the subject completes while the call waits
//    (Guides/Subjects.md, "Feeding a sequence into a subject: send(contentsOf:)"): races of
//    finish/fail with sends and with the caller's cancellation, bounded subjects fed by many
//    feeders with a reader that echoes back, sequences that throw at completion, that ignore
//    cancellation, that complete the subject from inside `next()`, non-Sendable sequences
//    sent from an actor, main-actor callers.
// 2. The keep-alive / replay-expiry timer that trusts a returning `sleep(until:)`
//    (Guides/Replay.md, "Keeping the upstream alive"): sleeps that throw, return early, late
//    or at once, clocks set back at the moment a sleep returns, windows longer than a day,
//    rapid joining and leaving, `AsyncSharedSource` start/stop ordering.
// 3. Lightly: lag reports, `.evicting(n)` with a replay greeting, FIFO waiting senders.
//
// Order comes from gates (signals, `waitUntil` on public state, the manual clock's sleepers);
// deadlines are hang guards only. Races are looped.
//
// What this round found, each fixed and checked below (the comments say what was seen before
// the fix):
// - send(contentsOf:): a completion whose `feeding.cancel()` landed just as AsyncStream.next()
//   returned a buffered element left the held stream un-cancelled (about 1 round in 100 to
//   1 in 200). Now a sequence that has not ended is always asked once more after a completion.
// - The timer: after one failed sleep, every later window timed by the same task (a re-armed
//   keep-alive window, a replay expiry window longer than a day) closed at that task's next
//   wake-up.
// - The timer: a window chained after a trusted sleep (the expiry window after the
//   keep-alive) was timed from the trusted instant, not from the clock's reading, so a clock
//   set back as the sleep returned delayed it. (That the next sleep of a long window may be
//   longer than a day after such a set-back is decided, and checked as such.)

import Testing

// `@testable` only for the test-support types (`Lock`, `TerminationRecorder`, `Signal`,
// `Probe`, and the `storage.producersWaitingForRoom` gate the other suites use). Every
// assertion is about public behaviour.
@testable import AsyncMulticast

// MARK: - The scripted clock and the recorded upstream (Support/ScriptedClock.swift)

private typealias R3Clock = ScriptedClock
private typealias R3Log = ScriptedLog
private typealias R3Base = ScriptedBase
private func at(_ offset: Duration) -> ScriptedClock.Instant { scriptedInstant(offset) }
private let day = Duration.seconds(86_400)

/// The sessions of an `AsyncSharedSource`: each `start` sends its index first. Records starts,
/// stops, a start while the previous session ran, and a stop called twice.
private final class R3Sessions: Sendable {
    private struct State: Sendable {
        var emitters: [AsyncSharedSource<Int, Never>.Emitter?] = []
        var stops: [Int] = []
        var running = false
        var overlaps = 0
        var doubleStops = 0
    }
    private let state = Lock(State())

    var starts: Int { self.state.withLock { $0.emitters.count } }
    var stops: [Int] { self.state.withLock { $0.stops } }
    var overlaps: Int { self.state.withLock { $0.overlaps } }
    var doubleStops: Int { self.state.withLock { $0.doubleStops } }
    var isRunning: Bool { self.state.withLock { $0.running } }

    func makeSource(
        replay: Int, keepAlive: Duration, replayExpiration: Duration, clock: some Clock<Duration>
    ) -> AsyncSharedSource<Int, Never> {
        AsyncSharedSource(replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock) {
            emitter in
            let index = self.state.withLock { state in
                if state.running { state.overlaps += 1 }
                state.running = true
                state.emitters.append(emitter)
                return state.emitters.count - 1
            }
            emitter.send(index)
            var stopped = false
            return {
                self.state.withLock { state in
                    if stopped { state.doubleStops += 1 }
                    state.running = false
                    state.stops.append(index)
                    state.emitters[index] = nil
                }
                stopped = true
            }
        }
    }

    func waitForStops(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("\(count) stops", seconds: 30, sourceLocation: sourceLocation) { self.stops.count >= count }
    }

    /// Every session stopped once, in order, none started before the previous one stopped.
    func expectOrderly(running: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        let starts = self.starts
        #expect(self.stops == Array(0..<(running ? starts - 1 : starts)), sourceLocation: sourceLocation)
        #expect(self.overlaps == 0, "a start while the previous session ran", sourceLocation: sourceLocation)
        #expect(self.doubleStops == 0, "a stop called twice", sourceLocation: sourceLocation)
        #expect(self.isRunning == running, sourceLocation: sourceLocation)
    }
}

/// Joins, reads one element, leaves (the iterator is released), under a hang guard.
private func visit<S: AsyncSequence & Sendable>(
    _ sequence: S, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Int? where S.AsyncIterator == SharedIterator<Int, Never> {
    try await visitScripted(sequence, sourceLocation: sourceLocation)
}

/// Joins, reads `count` elements, leaves, under a hang guard.
private func visit<S: AsyncSequence & Sendable>(
    _ sequence: S, taking count: Int, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Int] where S.AsyncIterator == SharedIterator<Int, Never> {
    try await visitScripted(sequence, taking: count, sourceLocation: sourceLocation)
}

// MARK: - Sequences for send(contentsOf:)

/// A sequence whose `next()` ignores cancellation: each pull waits for the test's answer.
/// Records, per pull, whether its task was cancelled when it began or while it waited, and
/// which actor it ran on.
private final class Patient: Sendable {
    struct Pull: Sendable {
        var cancelledAtEntry: Bool
        var cancelledWhileWaiting = false
        var actor: ObjectIdentifier?
        var sawCancellation: Bool { self.cancelledAtEntry || self.cancelledWhileWaiting }
    }
    private struct State: Sendable {
        var pulls: [Pull] = []
        var pending: [CheckedContinuation<Int?, Never>] = []
        var iterators = 0
    }
    private let state = Lock(State())
    /// Sends each pull's index when it starts waiting.
    let pulled = Signal<Int>()

    var pulls: [Pull] { self.state.withLock { $0.pulls } }
    var iterators: Int { self.state.withLock { $0.iterators } }

    fileprivate func iteratorMade() { self.state.withLock { $0.iterators += 1 } }

    fileprivate func pull(on actor: ObjectIdentifier?) async -> Int? {
        let cancelled = Task.isCancelled
        let index = self.state.withLock { state in
            state.pulls.append(Pull(cancelledAtEntry: cancelled, actor: actor))
            return state.pulls.count - 1
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
                self.state.withLock { $0.pending.append(continuation) }
                self.pulled.send(index)
            }
        } onCancel: {
            self.state.withLock { $0.pulls[index].cancelledWhileWaiting = true }
        }
    }

    /// Answers the oldest waiting pull.
    func answer(_ value: Int?) {
        let continuation = self.state.withLock { $0.pending.isEmpty ? nil : $0.pending.removeFirst() }
        continuation?.resume(returning: value)
    }

    /// Waits for pull `index` to start waiting.
    func waitForPull(_ index: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        let started = await self.pulled.next("pull \(index)", sourceLocation: sourceLocation)
        #expect(started == index, sourceLocation: sourceLocation)
    }

    var sequence: PatientSequence { PatientSequence(control: self) }
}

private struct PatientSequence: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let control: Patient

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        let control: Patient
        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            var id: ObjectIdentifier?
            if let actor { id = ObjectIdentifier(actor) }
            return await self.control.pull(on: id)
        }
        mutating func next() async -> Int? { await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator {
        self.control.iteratorMade()
        return AsyncIterator(control: self.control)
    }
}

/// Over an `AsyncStream`: `-1` is thrown as `TestError.boom`; a `nil` in a cancelled task is
/// thrown as `TestError.other(0)` (a sequence that reports its cancellation as an error).
private struct Throwing: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = TestError
    let base: AsyncStream<Int>

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = TestError
        var base: AsyncStream<Int>.Iterator
        mutating func next(isolation actor: isolated (any Actor)?) async throws(TestError) -> Int? {
            let value = await self.base.next(isolation: actor)
            if value == -1 { throw .boom }
            if value == nil, Task.isCancelled { throw .other(0) }
            return value
        }
        mutating func next() async throws(TestError) -> Int? { try await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: self.base.makeAsyncIterator()) }
}

/// A sequence that completes the subject from inside its `count`-th `next()` (1-based), then
/// either returns an element at once or goes on into a held `AsyncStream`'s `next()`.
private struct CompletesInside: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let count: Int
    let complete: @Sendable () -> Void
    let thenWaits: HeldStream?
    let pulls = Lock(0)

    struct AsyncIterator: AsyncIteratorProtocol {
        let owner: CompletesInside
        var base: AsyncStream<Int>.Iterator?
        mutating func next() async -> Int? {
            let pull = self.owner.pulls.withLock { pulls in
                pulls += 1
                return pulls
            }
            guard pull == self.owner.count else { return pull }
            self.owner.complete()
            if self.base != nil { return await self.base!.next() }
            return pull
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(owner: self, base: self.thenWaits?.stream.makeAsyncIterator())
    }
}

/// Not `Sendable`: a sequence created and iterated on an actor. Counts its pulls and those
/// that did not run isolated to `home`.
private final class LocalLines: AsyncSequence {
    typealias Element = Int
    typealias Failure = Never
    let base: AsyncStream<Int>
    let home: ObjectIdentifier
    var pulls = 0
    var pullsAway = 0

    init(_ base: AsyncStream<Int>, home: ObjectIdentifier) {
        self.base = base
        self.home = home
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        let lines: LocalLines
        var base: AsyncStream<Int>.Iterator
        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            self.lines.pulls += 1
            var id: ObjectIdentifier?
            if let actor { id = ObjectIdentifier(actor) }
            if id != self.lines.home { self.lines.pullsAway += 1 }
            return await self.base.next(isolation: actor)
        }
        mutating func next() async -> Int? { await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(lines: self, base: self.base.makeAsyncIterator()) }
}

private actor R3Feeder {
    /// Sends a non-Sendable sequence over `stream` from this actor; returns its pull counts.
    func feed(
        _ subject: AsyncPassthroughSubject<Int, Never>, _ stream: AsyncStream<Int>
    ) async -> (
        pulls: Int, away: Int
    ) {
        let lines = LocalLines(stream, home: ObjectIdentifier(self))
        await subject.send(contentsOf: lines)
        return (lines.pulls, lines.pullsAway)
    }
}

/// Whether each source's values (`source * stride + i`) arrive in increasing order.
private func inOrderPerSource(_ values: [Int], stride: Int) -> Bool {
    var last: [Int: Int] = [:]
    for value in values {
        let source = value / stride
        if let previous = last[source], previous >= value { return false }
        last[source] = value
    }
    return true
}

// MARK: - Tests

@Suite("AttackRound3", .serialized, .timeLimit(.minutes(10)))
struct AttackRound3Tests {
    // MARK: 1. send(contentsOf:) and completion

    @Test("finish/fail racing a feeder that pulls a busy held AsyncStream: the stream always sees .cancelled")
    func completionRacesABusyFeeder() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 3)
            // Rounds whose held stream never saw `.cancelled`: (round, elements received, pulls).
            var missing: [(round: Int, received: Int, pulls: Int)] = []
            for round in 0..<400 {
                let held = HeldStream(prefilled: 0..<400)
                let completeAfter = Int.random(in: 0...400, using: &generator)
                let fails = round % 2 == 1
                let bounded = round % 3 == 0
                let subject = AsyncPassthroughSubject<Int, TestError>(buffering: bounded ? .bounded(2) : .unbounded)
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sequence = held.counted
                let sending = Task { await subject.send(contentsOf: sequence) }
                var received = await reader.take(completeAfter)
                if fails { subject.fail(.boom) } else { subject.finish() }
                await sending.value
                // "The call returns only after all this": no waiting for onTermination here.
                let ends = held.ends.all
                let rest = await reader.drain()
                received += rest.elements
                // A call that found the subject completed returns without iterating (documented).
                let neverIterated = ends.isEmpty && held.countedPulls == 0 && received.isEmpty
                if ends != [.cancelled] && !neverIterated {
                    missing.append((round, received.count, held.countedPulls))
                }
                #expect(ends.count <= 1)
                #expect(received == Array(0..<received.count), "round \(round): in order, nothing lost")
                #expect(rest.failure == (fails ? .boom : nil))
                #expect(held.countedPulls <= received.count + 2, "round \(round): the ignored one and one more at most")
                withExtendedLifetime(held) {}
            }
            // Expected (Subjects.md): a completion that comes while the call waits for the
            // sequence's next element "cancels the sequence's iteration ... for a sequence that
            // stops on cancellation, such as AsyncStream, ... (its onTermination sees
            // .cancelled)"; one between two `next()` calls makes the call ask once more.
            // Before the fix, in about 1 round in 100: the call returns, the held stream's
            // onTermination is never called, and pulls == received + 1: the last pull
            // returned an element (ignored, the subject had completed) and nothing asked again.
            // Cause: the completion's `feeding.cancel()` landed after AsyncStream.next() had
            // removed its own cancellation handler but before the library's handler around
            // `iterator.next(isolation:)` was removed, so `sawCancellation` was set although
            // the stream never saw the cancellation.
            #expect(missing.isEmpty, "rounds (round, received, pulls) without .cancelled: \(missing)")
        }
    }

    @Test("the caller's cancellation racing finish(): the call returns, nothing is lost or asked twice")
    func callerCancellationRacesCompletion() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 5)
            for round in 0..<200 {
                let held = HeldStream(prefilled: 0..<50)
                let subject = AsyncReplaySubject<Int, Never>(bufferSize: 1, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sequence = held.sequence
                let sending = Task { await subject.send(contentsOf: sequence) }
                let k = Int.random(in: 0...10, using: &generator)
                var received = await reader.take(k)
                let start = Latch()
                let canceller = Task {
                    await start.wait()
                    sending.cancel()
                }
                let finisher = Task {
                    await start.wait()
                    subject.finish()
                }
                start.release()
                await canceller.value
                await finisher.value
                try await withTimeout("send(contentsOf:) returning", seconds: 60) { await sending.value }
                received += await reader.drain().elements
                #expect(received == Array(0..<received.count), "round \(round)")
                #expect(held.ends.all.count <= 1)
                #expect(held.probe.pulls <= received.count + 2, "round \(round): pulled \(held.probe.pulls)")
                #expect(held.probe.iterators <= 1)
                withExtendedLifetime(held) {}
            }
        }
    }

    @Test(
        "the caller's cancellation alone, while an element waits for room: it goes in, the sequence is not asked again")
    func callerCancellationAloneWhilePaced() async throws {
        let held = HeldStream(prefilled: 0..<10)
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
        var reader = subject.makeAsyncIterator()
        let sequence = held.sequence
        let sending = Task { await subject.send(contentsOf: sequence) }
        try await waitUntil("1 waiting for room") { subject.storage.producersWaitingForRoom == 1 }
        sending.cancel()
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(held.probe.pulls == 2)
        #expect(held.ends.all.isEmpty, "a cancelled caller alone does not ask again")
        subject.finish()
        await letOthersRun()
        #expect(held.ends.all.isEmpty, "a completion after the call returned does not touch the sequence")
        #expect(await reader.take(3) == [0, 1])
        withExtendedLifetime(held) {}
    }

    @Test(
        "a caller already cancelled, 100 times: the call returns, the subject stays open, at most the element in hand goes in"
    )
    func callerAlreadyCancelled() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<100 {
                let held = HeldStream(prefilled: [7])
                let subject = AsyncPassthroughSubject<Int, Never>()
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let gate = Latch()
                let sequence = held.sequence
                let sending = Task {
                    await gate.wait()
                    await subject.send(contentsOf: sequence)
                }
                sending.cancel()
                gate.release()
                try await withTimeout("send(contentsOf:) returning", seconds: 60) { await sending.value }
                subject.send(1)
                subject.finish()
                let received = await reader.drain().elements
                // Its feeding task may start pulling before it learns of the cancellation; the
                // element it got then is sent (a cancelled caller sends the element in hand).
                #expect(received == [1] || received == [7, 1], "round \(round): \(received)")
                #expect(held.probe.pulls <= 2, "round \(round)")
                withExtendedLifetime(held) {}
            }
        }
    }

    @Test(
        "a sequence that ignores cancellation, its element waiting for room at completion: asked once more, cancelled")
    func patientSequenceAskedOnceMore() async throws {
        for completion in 0..<2 {
            let patient = Patient()
            let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let returned = LockedFlag()
            let sending = Task {
                await subject.send(contentsOf: patient.sequence)
                returned.set()
            }
            await patient.waitForPull(0)
            patient.answer(1)
            await patient.waitForPull(1)
            patient.answer(2)
            try await waitUntil("2 waiting for room") { subject.storage.producersWaitingForRoom == 1 }
            if completion == 0 { subject.finish() } else { subject.fail(.boom) }
            await patient.waitForPull(2)
            #expect(patient.pulls[2].sawCancellation, "the extra pull runs in a cancelled task")
            await letOthersRun()
            #expect(!returned.isSet, "the call waits for the pending next() of a sequence that ignores cancellation")
            patient.answer(99)
            try await withTimeout("send(contentsOf:) returning") { await sending.value }
            #expect(patient.pulls.count == 3, "asked once, not more")
            #expect(patient.iterators == 1)
            #expect(try await reader.next() == 1, "2 and 99 are ignored")
            if completion == 0 {
                #expect(try await reader.next() == nil)
            } else {
                await #expect(throws: TestError.boom) { try await reader.next() }
            }
        }
    }

    @Test("a completion just after a send, 100 times: one or two more pulls, each seeing the cancellation")
    func completionJustAfterASend() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 11)
            for round in 0..<100 {
                let patient = Patient()
                let subject = AsyncPassthroughSubject<Int, Never>()
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sending = Task { await subject.send(contentsOf: patient.sequence) }
                let k = Int.random(in: 1...5, using: &generator)
                for index in 0..<k {
                    await patient.waitForPull(index)
                    patient.answer(index)
                }
                #expect(await reader.take(k) == Array(0..<k))
                subject.finish()
                // Either the call was already in pull k (it sees the cancellation there), or
                // it asks once more in a cancelled task.
                await patient.waitForPull(k)
                try await waitUntil("pull \(k) to see the cancellation") { patient.pulls[k].sawCancellation }
                patient.answer(-1)
                // Pull k answered with an element although it saw the cancellation (this
                // sequence ignores it): if pull k was already running when the subject
                // finished, the call cannot tell that it saw it, and asks once more.
                let done = Lock(false)
                let waiter = Task {
                    await sending.value
                    done.withLock { $0 = true }
                }
                try await waitUntil("the call returning, or one more pull") {
                    done.withLock { $0 } || patient.pulls.count == k + 2
                }
                if patient.pulls.count == k + 2 {
                    await patient.waitForPull(k + 1)
                    #expect(patient.pulls[k + 1].sawCancellation, "round \(round): asked in a cancelled task")
                    patient.answer(-2)
                }
                try await withTimeout("send(contentsOf:) returning", seconds: 60) { await waiter.value }
                #expect(patient.pulls.count <= k + 2, "round \(round): at most one pull after the completion's")
                #expect(await reader.next() == nil)
            }
        }
    }

    @Test(
        "a sequence that throws when cancelled: idle at completion it throws to the caller; waiting for room, ignored")
    func sequenceThrowingAtCompletion() async throws {
        // Idle inside next(): its error is the caller's ("an error of the sequence is thrown
        // to the caller").
        do {
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let subject = AsyncPassthroughSubject<Int, Never>()
            var reader = subject.makeAsyncIterator()
            let sending = Task { try await subject.send(contentsOf: Throwing(base: stream)) }
            input.yield(1)
            #expect(await reader.next() == 1)
            subject.finish()
            let result = await sending.result
            #expect(throws: TestError.other(0)) { try result.get() }
            withExtendedLifetime(input) {}
        }
        // Its element waiting for room: the extra pull's error is ignored ("ignores what it
        // returns").
        do {
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let ends = TerminationRecorder()
            ends.attach(to: input)
            input.yield(1)
            input.yield(2)
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let sending = Task { try await subject.send(contentsOf: Throwing(base: stream)) }
            try await waitUntil("2 waiting for room") { subject.storage.producersWaitingForRoom == 1 }
            subject.finish()
            let result = await sending.result
            #expect(throws: Never.self) { try result.get() }
            #expect(ends.all == [.cancelled])
            #expect(await reader.next() == 1)
            #expect(await reader.next() == nil)
            withExtendedLifetime(input) {}
        }
    }

    @Test("a sequence that throws by itself as the subject completes, 200 times: it throws or returns, never hangs")
    func sequenceThrowsRacingCompletion() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 17)
            for round in 0..<200 {
                let n = Int.random(in: 1...30, using: &generator)
                let (stream, input) = AsyncStream.makeStream(of: Int.self)
                for value in 0..<n { input.yield(value) }
                input.yield(-1)
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: round % 2 == 0 ? .bounded(1) : .unbounded)
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sending = Task { try await subject.send(contentsOf: Throwing(base: stream)) }
                let k = Int.random(in: 0...n, using: &generator)
                var received = await reader.take(k)
                subject.finish()
                let result = try await withTimeout("send(contentsOf:) returning", seconds: 60) { await sending.result }
                switch result {
                case .success: break
                case .failure(let error):
                    #expect(error as? TestError == .boom, "round \(round): only the sequence's own error")
                }
                received += await reader.drain().elements
                #expect(received == Array(0..<received.count), "round \(round)")
                withExtendedLifetime(input) {}
            }
        }
    }

    @Test("a sequence that completes the subject inside next(): asked once more; inside a stream's next() it ends it")
    func completesFromInsideNext() async throws {
        // Returns an element at once after finish(): it saw the cancellation inside next().
        do {
            let subject = AsyncPassthroughSubject<Int, Never>()
            var reader = subject.makeAsyncIterator()
            let sequence = CompletesInside(count: 3, complete: { subject.finish() }, thenWaits: nil)
            try await withTimeout("send(contentsOf:) returning") { await subject.send(contentsOf: sequence) }
            // It returned an element after the completion, so the call cannot tell that it saw
            // the cancellation: asked once more, in a cancelled task (documented).
            #expect(sequence.pulls.withLock { $0 } == 4, "asked once more after the completion, not twice")
            #expect(await reader.next() == 1)
            #expect(await reader.next() == 2)
            #expect(await reader.next() == nil, "3 came after the completion: ignored")
        }
        // Goes on into a held stream's next(): the stream sees the cancellation.
        do {
            let held = HeldStream(prefilled: [Int]())
            let subject = AsyncReplaySubject<Int, Never>(bufferSize: 4, buffering: .bounded(4))
            let sequence = CompletesInside(count: 2, complete: { subject.finish() }, thenWaits: held)
            try await withTimeout("send(contentsOf:) returning") { await subject.send(contentsOf: sequence) }
            #expect(held.ends.all == [.cancelled])
            #expect(sequence.pulls.withLock { $0 } == 2)
            #expect(subject.replayCache == [1])
        }
    }

    @Test("a bounded subject fed by its own subscriber, stuck on a full one: finish() ends the call")
    func selfFeedingDeadlockBrokenByFinish() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
        let stalled = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(0)  // the stalled subscriber is full
        let bridge = Task { await subject.send(contentsOf: subject) }
        try await waitUntil("the bridge's subscriber") { subject.subscriberCount == 2 }
        subject.send(1)  // past the bound: the bridge reads it and waits for room to send it back
        try await waitUntil("the bridge waiting for room") { subject.storage.producersWaitingForRoom == 1 }
        subject.finish()
        try await withTimeout("send(contentsOf:) returning") { await bridge.value }
        try await waitUntil("the bridge's subscriber gone") { subject.subscriberCount == 1 }
        let rest = await stalled.drain()
        #expect(rest.elements == [0, 1])
    }

    @Test("many feeders into a bounded subject, bridged into another by send(contentsOf:), with echoes; random ends")
    func manyFeedersBridgedWithEcho() async throws {
        let stride = 100_000
        try await withTimeout(seconds: 400) {
            var generator = LCG(seed: 23)
            var missing: [String] = []
            for round in 0..<40 {
                let a = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
                let b = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
                let bReader = await SubscriberTask.join { b.makeAsyncIterator() }
                let bridge = Task { await b.send(contentsOf: a) }
                try await waitUntil("the bridge's subscriber") { a.subscriberCount == 1 }
                let streams = (1...4).map { source in HeldStream(prefilled: (0..<100).map { source * stride + $0 }) }
                let feeders = streams.map { held in
                    let sequence = held.counted
                    return Task { await a.send(contentsOf: sequence) }
                }
                let k = Int.random(in: 1...300, using: &generator)
                var received: [Int] = []
                var echoes: [Task<Void, Never>] = []
                while received.count < k, let value = await bReader.next() {
                    received.append(value)
                    if value >= 0, value % 7 == 0 {
                        let echo = -value - 1
                        echoes.append(Task { await a.send(waitingForRoom: echo) })
                    }
                }
                switch round % 3 {
                case 0: a.finish()
                case 1: b.finish()
                default:
                    let start = Latch()
                    let t1 = Task {
                        await start.wait()
                        a.finish()
                    }
                    let t2 = Task {
                        await start.wait()
                        b.finish()
                    }
                    start.release()
                    await t1.value
                    await t2.value
                }
                if round % 3 == 0 {
                    // Only `a` finished: the bridge's sequence ends after what it buffered.
                    let drainer = Task { await bReader.drain().elements }
                    try await withTimeout("the bridge returning", seconds: 60) { await bridge.value }
                    b.finish()
                    received += await drainer.value
                } else {
                    try await withTimeout("the bridge returning", seconds: 60) { await bridge.value }
                    a.finish()
                    received += await bReader.drain().elements
                }
                for feeder in feeders {
                    try await withTimeout("a feeder returning", seconds: 60) { await feeder.value }
                }
                for echo in echoes { await echo.value }
                #expect(a.subscriberCount == 0, "round \(round): the bridge's subscriber left")
                let forward = received.filter { $0 >= 0 }
                #expect(inOrderPerSource(forward, stride: stride), "round \(round)")
                #expect(Set(received).count == received.count, "round \(round): nothing twice")
                for (index, held) in streams.enumerated() {
                    // A feeder whose call came after `a` completed returns at once without
                    // iterating (documented): no pull, no end. Any other was still iterating
                    // its held stream when `a` completed, and must see `.cancelled`.
                    let neverIterated =
                        held.ends.all.isEmpty && held.countedPulls == 0
                        && !received.contains { $0 / stride == index + 1 }
                    if held.ends.all != [.cancelled] && !neverIterated {
                        missing.append(
                            "round \(round), feeder \(index): \(held.countedPulls) pulls, ends \(held.ends.all)")
                    }
                    #expect(held.ends.all.count <= 1)
                    withExtendedLifetime(held) {}
                }
            }
            // Once an intermittent failure (2 feeders of 160 in a CI rehearsal's invariants
            // run): under load, a feeder's task can start after `a` completed. Beside three
            // busy loops, 12 feeders in 400 runs of this test never iterated, each with no
            // pull and no end, and no feeder that pulled missed `.cancelled`.
            #expect(missing.isEmpty, "feeders whose held stream never saw .cancelled: \(missing)")
        }
    }

    @Test("a non-Sendable sequence sent from an actor, the subject finished at random: pulled on the actor, cancelled")
    func nonSendableFromAnActorRacingFinish() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 29)
            let feeder = R3Feeder()
            var missing: [Int] = []
            for round in 0..<100 {
                let (stream, input) = AsyncStream.makeStream(of: Int.self)
                let ends = TerminationRecorder()
                ends.attach(to: input)
                for value in 0..<50 { input.yield(value) }
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: round % 2 == 0 ? .bounded(1) : .unbounded)
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sending = Task { await feeder.feed(subject, stream) }
                let k = Int.random(in: 0...50, using: &generator)
                var received = await reader.take(k)
                subject.finish()
                let counts = try await withTimeout("send(contentsOf:) returning", seconds: 60) { await sending.value }
                #expect(counts.away == 0, "round \(round): every pull ran on the calling actor")
                // A call that found the subject completed returns without iterating (documented).
                if ends.all != [.cancelled] && !(ends.all.isEmpty && counts.pulls == 0) { missing.append(round) }
                received += await reader.drain().elements
                #expect(received == Array(0..<received.count))
                #expect(counts.pulls <= received.count + 2)
                withExtendedLifetime(input) {}
            }
            // The race of completionRacesABusyFeeder (`LocalLines` does nothing after the
            // stream's `next()` returns).
            #expect(missing.isEmpty, "rounds whose held stream never saw .cancelled: \(missing)")
        }
    }

    @Test("main-actor callers, the subject finished from another task at random: pulled on the main actor, cancelled")
    @MainActor
    func mainActorCallerRacingFinish() async throws {
        var generator = LCG(seed: 31)
        let mainActor = ObjectIdentifier(MainActor.shared)
        for round in 0..<100 {
            let patient = Patient()
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let k = Int.random(in: 1...6, using: &generator)
            let returned = LockedFlag()
            let driver = Task.detached {
                async let taken = reader.take(k)
                for index in 0..<k {
                    await patient.waitForPull(index)
                    patient.answer(index)
                }
                let read = await taken
                subject.finish()
                // The call is in pull k, or asks once more. Pull k answers with an element
                // (this sequence ignores cancellation): if it was already running when the
                // subject finished, the call cannot tell that it saw the cancellation, and
                // asks once more.
                await patient.waitForPull(k)
                patient.answer(-1)
                try await waitUntil("the call returning, or one more pull") {
                    returned.isSet || patient.pulls.count == k + 2
                }
                if patient.pulls.count == k + 2 {
                    await patient.waitForPull(k + 1)
                    patient.answer(-2)
                }
                return read
            }
            await subject.send(contentsOf: patient.sequence)
            returned.set()
            let taken = try await driver.value
            #expect(taken == Array(0..<k), "round \(round)")
            let pulls = patient.pulls
            #expect(pulls.allSatisfy { $0.actor == mainActor }, "round \(round): every pull on the main actor")
            #expect(
                pulls.count == k + 1 || pulls.count == k + 2, "round \(round): one or two pulls after the completion")
            #expect(pulls.last?.sawCancellation == true, "round \(round): the last pull saw the cancellation")
            #expect(await reader.next() == nil)
        }
    }

    @Test("send(contentsOf:) racing the subject's completion as it starts: an iterator made is always cancelled")
    func completionRacesTheCallStarting() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<300 {
                let held = HeldStream(prefilled: [Int]())
                let subject = AsyncCurrentValueSubject<Int, Never>(0)
                let sequence = held.sequence
                let start = Latch()
                let sending = Task {
                    await start.wait()
                    await subject.send(contentsOf: sequence)
                }
                let finisher = Task {
                    await start.wait()
                    subject.finish()
                }
                start.release()
                await finisher.value
                try await withTimeout("send(contentsOf:) returning", seconds: 60) { await sending.value }
                if held.probe.iterators == 0 {
                    #expect(held.ends.all.isEmpty, "round \(round): not iterated, not touched")
                } else {
                    #expect(held.ends.all == [.cancelled], "round \(round): iterated, so cancelled")
                }
                withExtendedLifetime(held) {}
            }
        }
    }

    // MARK: 2. The timer and its clock

    @Test("replay: after a failed sleep, a keep-alive window re-armed on the same timer is cut short")
    func failedSleepLeaksIntoARearmedWindow() async throws {
        let clock = R3Clock { $0 == 0 ? .throwFailure : .normal }
        let log = R3Log()
        let replayed = R3Base(log: log).replay(
            1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
        #expect(try await visit(replayed) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "the failed sleep closed the keep-alive at once")
        try await clock.waitForWakes([at(.seconds(100))])  // the expiry window, on the same timer
        clock.jump(to: .seconds(95))
        #expect(try await visit(replayed, taking: 2) == [0, 1], "the cache, then the restarted iteration's first")
        try await waitUntil("iteration 1") { log.starts == 2 }
        // Leaving at 95 opened the keep-alive window 95…105; the timer sleeping toward 100 is
        // kept and re-armed (Replay.md: "One timer serves a shared sequence").
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            log.end(of: 1) != nil || clock.sleeperWakes == [at(.seconds(105))]
        }
        // Expected (Replay.md): "a sleep(until:) that throws without its task being cancelled
        // closes the open window at once ...; the next windows are timed as usual". The
        // window 95…105 opened long after the failure.
        // Before the fix: the upstream is stopped at 100, when the timer's (successful) sleep toward
        // the old expiry deadline returns: `runKeepAliveTimer` never resets `sleepFailed`.
        #expect(log.end(of: 1) == nil, "closed at 100, 5 s before its deadline")
        if log.end(of: 1) == nil {
            clock.jump(to: .seconds(105))
            #expect(try await log.waitForEnd(of: 1) == .cancelled)
        }
        #expect(log.overlaps == 0)
    }

    @Test("AsyncSharedSource: after a failed sleep, a re-armed keep-alive window stops the session early")
    func failedSleepLeaksIntoARearmedSourceWindow() async throws {
        let clock = R3Clock { $0 == 0 ? .throwFailure : .normal }
        let sessions = R3Sessions()
        let source = sessions.makeSource(
            replay: 1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
        #expect(try await visit(source) == 0)
        try await sessions.waitForStops(1)
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(95))
        #expect(try await visit(source, taking: 2) == [0, 1], "the cache, then session 1's first")
        try await waitUntil("session 1") { sessions.starts == 2 }
        try await clock.waitForWakes([at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            sessions.stops.count == 2 || clock.sleeperWakes == [at(.seconds(105))]
        }
        // Expected (the `clock:` doc of `AsyncSharedSource.init`): "A sleep that throws without
        // being cancelled closes the open window at once ...; the next windows are timed as
        // usual." Before the fix: session 1 stopped at 100 instead of 105.
        #expect(sessions.stops.count == 1, "stopped at 100, 5 s before the window's deadline")
        if sessions.stops.count == 1 {
            clock.jump(to: .seconds(105))
            try await sessions.waitForStops(2)
        }
        sessions.expectOrderly(running: false)
    }

    @Test("replay: after a failed keep-alive sleep, an expiry window longer than a day ends after one day")
    func failedSleepCutsALongExpiryWindow() async throws {
        // The control: a clock that behaves. The 3-day window is timed in three sleeps.
        do {
            let clock = R3Clock()
            let log = R3Log()
            let replayed = R3Base(log: log).replay(1, keepAlive: .seconds(10), replayExpiration: day * 3, clock: clock)
            #expect(try await visit(replayed) == 0)
            try await clock.waitForWakes([at(.seconds(10))])
            clock.jump(to: .seconds(10))
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            for chunk in 1...2 {
                try await clock.waitForWakes([at(.seconds(10) + day * chunk)])
                clock.jump(to: .seconds(10) + day * chunk)
            }
            try await clock.waitForWakes([at(.seconds(10) + day * 3)])
            #expect(replayed.replayCache == [0], "still cached after two days")
            clock.jump(to: .seconds(10) + day * 3)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            #expect(clock.longestSleep <= day, "never more than a day at once")
        }
        // The first sleep throws: the keep-alive closes at once, the 3-day expiry window opens.
        let clock = R3Clock { $0 == 0 ? .throwFailure : .normal }
        let log = R3Log()
        let replayed = R3Base(log: log).replay(1, keepAlive: .seconds(10), replayExpiration: day * 3, clock: clock)
        #expect(try await visit(replayed) == 0)
        #expect(try await log.waitForEnd(of: 0) == .cancelled)
        try await clock.waitForWakes([at(day)])
        clock.jump(to: day)
        try await waitUntil("the timer to act after a day") {
            replayed.replayCache.isEmpty || clock.sleeperWakes == [at(day * 2)]
        }
        // Expected (Replay.md): "the next windows are timed as usual": the cache expires 3
        // days after the stop. Before the fix: it expires after 1 day, at the first wake-up of the
        // expiry window (`sleepFailed` is still set in `runKeepAliveTimer`).
        #expect(replayed.replayCache == [0], "expired after 1 day of 3")
    }

    @Test("replay: the clock set back as the keep-alive sleep returns: the expiry window opened then is delayed")
    func setBackAsTheSleepReturnsDelaysTheExpiryWindow() async throws {
        let clock = R3Clock()
        let log = R3Log()
        let replayed = R3Base(log: log).replay(
            1, keepAlive: .seconds(10), replayExpiration: .seconds(100), clock: clock)
        #expect(try await visit(replayed) == 0)
        try await clock.waitForWakes([at(.seconds(10))])
        // The sleep returns at 10 (its deadline), but the clock reads 0 when the timer looks.
        clock.setBackOnNextWake(to: at(.zero))
        clock.jump(to: .seconds(10))
        #expect(try await log.waitForEnd(of: 0) == .cancelled, "documented: a returned sleep closes the window")
        try await waitUntil("the expiry timer asleep") { clock.sleeperCount == 1 }
        #expect(clock.now == at(.zero))
        // Expected (Replay.md): "a clock set back does not delay a window opened after the
        // jump: it ends when the clock reads its own deadline". The expiry window opened when
        // the clock read 0: its deadline is 100. Before the fix: 110 — the window is timed from the
        // trusted instant of the previous sleep (`now = max(clock.now(), sleptUntil)` in
        // `runKeepAliveTimer`), i.e. delayed by however far the clock was set back.
        #expect(clock.sleeperWakes == [at(.seconds(100))])
        clock.jump(to: .seconds(100))
        try await waitUntil("the timer to act at 100") {
            replayed.replayCache.isEmpty || clock.sleeperWakes == [at(.seconds(110))]
        }
        #expect(replayed.replayCache.isEmpty, "the cache outlives its 100 s window")
        clock.jump(to: .seconds(110))
        try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
    }

    @Test(
        "a 3-day window, the clock set back 30 days as a sleep returns: the next sleep is toward a day past the trusted instant"
    )
    func setBackDuringALongWindowStretchesASleep() async throws {
        let clock = R3Clock()
        let log = R3Log()
        let shared = R3Base(log: log).share(keepAlive: day * 3, clock: clock)
        #expect(try await visit(shared) == 0)
        try await clock.waitForWakes([at(day)])
        clock.setBackOnNextWake(to: at(.zero - day * 30))
        clock.jump(to: day)
        try await waitUntil("the timer's second sleep") { clock.sleepCalls == 2 && clock.sleeperCount == 1 }
        #expect(log.end(of: 0) == nil, "the window, opened before the set-back, stays open")
        let asked = clock.now.duration(to: clock.sleeperWakes[0])
        // Decided (`longestTimerSleep`'s doc): the timer keeps the time its returned sleep
        // vouched for (day 1), so its next sleep is at most a day past that instant: toward
        // day 2, which on a clock set back to -30 days is one sleep of 32 days. Measuring it
        // from the clock's reading instead would make a creeping clock poll again.
        #expect(clock.sleeperWakes == [at(day * 2)])
        #expect(asked == day * 32)
        log.finishLatest()
        #expect(try await log.waitForEnd(of: 0) == .finished)
        try await waitUntil("the timer cancelled") { clock.sleeperCount == 0 }
    }

    @Test("windows of days on a clock whose sleep returns at once: each closes after a bounded number of sleeps")
    func longWindowsOnASleepThatReturnsAtOnce() async throws {
        do {
            let clock = R3Clock { _ in .returnAtOnce }
            let log = R3Log()
            let shared = R3Base(log: log).share(keepAlive: day * 10, clock: clock)
            #expect(try await visit(shared) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            #expect(clock.sleepCalls <= 11, "one sleep per day of the window at most: \(clock.sleepCalls)")
        }
        do {
            let clock = R3Clock { _ in .returnAtOnce }
            let log = R3Log()
            let replayed = R3Base(log: log).replay(1, keepAlive: day * 3, replayExpiration: day * 5, clock: clock)
            #expect(try await visit(replayed) == 0)
            #expect(try await log.waitForEnd(of: 0) == .cancelled)
            try await waitUntil("the cache to expire") { replayed.replayCache.isEmpty }
            #expect(clock.sleepCalls <= 10, "\(clock.sleepCalls) sleeps")
            // A restart after it: a fresh iteration, no stale greeting.
            #expect(try await visit(replayed) == 1)
        }
        do {
            // Just under forever: timed, in sleeps of at most a day; and 2^40 s is never timed.
            let clock = R3Clock()
            let log = R3Log()
            let shared = R3Base(log: log).share(keepAlive: .seconds(Int64(1) << 40) - .nanoseconds(1), clock: clock)
            #expect(try await visit(shared) == 0)
            try await clock.waitForWakes([at(day)])
            clock.jump(to: day)
            try await clock.waitForWakes([at(day * 2)])
            #expect(log.end(of: 0) == nil)
            log.finishLatest()
            #expect(try await log.waitForEnd(of: 0) == .finished)
            try await waitUntil("the timer cancelled") { clock.sleeperCount == 0 }
            let forever = R3Clock { _ in .returnAtOnce }
            let log2 = R3Log()
            let shared2 = R3Base(log: log2).replay(
                1, keepAlive: .seconds(Int64(1) << 40), replayExpiration: .seconds(Int64(1) << 40), clock: forever)
            #expect(try await visit(shared2) == 0)
            await letOthersRun()
            #expect(forever.sleepCalls == 0 && log2.end(of: 0) == nil, "never timed")
            log2.finishLatest()
            #expect(try await log2.waitForEnd(of: 0) == .finished)
        }
    }

    @Test("sleeps that return late, early, or throw, in turn: each window closes when its sleep returns or fails")
    func lateEarlyAndThrowingSleepsInTurn() async throws {
        let plans: [R3Clock.Sleep] = [.late(by: .seconds(5)), .early(by: .seconds(3)), .throwFailure, .normal]
        let clock = R3Clock { plans[$0 % plans.count] }
        let log = R3Log()
        let shared = R3Base(log: log).share(keepAlive: .seconds(10), clock: clock)
        for session in 0..<8 {
            #expect(try await visit(shared) == session)
            let left = clock.now
            switch plans[session % plans.count] {
            case .throwFailure:
                #expect(try await log.waitForEnd(of: session) == .cancelled, "a failed sleep closes at once")
                continue
            case .late(let late):
                try await clock.waitForWakes([left.advanced(by: .seconds(10) + late)])
            case .early(let early):
                try await clock.waitForWakes([left.advanced(by: .seconds(10) - early)])
            default:
                try await clock.waitForWakes([left.advanced(by: .seconds(10))])
            }
            let wake = clock.sleeperWakes[0]
            clock.jump(to: wake.advanced(by: .nanoseconds(-1)))
            await letOthersRun()
            #expect(log.end(of: session) == nil, "session \(session): open until its sleep returns")
            clock.jump(to: wake)
            #expect(try await log.waitForEnd(of: session) == .cancelled, "session \(session)")
        }
        #expect(log.overlaps == 0)
        #expect(clock.sleepCalls == 8, "one sleep per window")
    }

    @Test("replay: rapid concurrent join/leave while a misbehaving clock moves both ways; nothing overlaps or leaks")
    func churnOnAMisbehavingClock() async throws {
        try await withTimeout(seconds: 400) {
            var generator = LCG(seed: 37)
            let planSeed = UInt64.random(in: 0...1_000, using: &generator)
            let clock = R3Clock { index in
                var local = LCG(seed: planSeed &+ UInt64(index))
                switch Int.random(in: 0..<6, using: &local) {
                case 0: return .throwFailure
                case 1: return .returnAtOnce
                case 2: return .early(by: .seconds(2))
                case 3: return .late(by: .seconds(2))
                default: return .normal
                }
            }
            let log = R3Log()
            let replayed = R3Base(log: log).replay(
                1, buffering: .bufferingNewest(4), keepAlive: .seconds(10), replayExpiration: .seconds(30), clock: clock
            )
            for round in 0..<150 {
                let visitors = Int.random(in: 1...3, using: &generator)
                let moves = (0..<3).map { _ in Duration.seconds(Int.random(in: -15...25, using: &generator)) }
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors {
                        group.addTask { try await visit(replayed) }
                    }
                    for move in moves {
                        clock.advance(by: move)
                        await Task.yield()
                    }
                    for try await value in group {
                        #expect(value != nil, "round \(round): a visit got an element")
                    }
                }
            }
            // Everyone left: far ahead, in steps, until the last iteration stopped and the cache
            // expired (a late sleep may need a second step).
            try await waitUntil("every iteration stopped, the cache expired") {
                if log.stops != log.starts || !replayed.replayCache.isEmpty { clock.advance(by: .seconds(1_000)) }
                return log.stops == log.starts && replayed.replayCache.isEmpty
            }
            #expect(log.starts >= 10 && clock.sleepCalls >= 20, "the churn restarted the upstream and timed windows")
            #expect(log.overlaps == 0, "two iterations of the base at once")
            #expect(log.endReports == log.stops, "an iteration ended twice")
            try await waitUntil("no timer left") { clock.sleeperCount == 0 }
            #expect(replayed.subscriberCount == 0)
        }
    }

    @Test(
        "AsyncSharedSource: rapid concurrent join/leave on a misbehaving clock; stop once per start, never overlapping")
    func sourceChurnOnAMisbehavingClock() async throws {
        try await withTimeout(seconds: 400) {
            var generator = LCG(seed: 41)
            let clock = R3Clock { index in
                switch index % 5 {
                case 0: return .normal
                case 1: return .throwFailure
                case 2: return .early(by: .seconds(1))
                case 3: return .returnAtOnce
                default: return .late(by: .seconds(1))
                }
            }
            let sessions = R3Sessions()
            let source = sessions.makeSource(
                replay: 1, keepAlive: .seconds(3), replayExpiration: .seconds(7), clock: clock)
            for round in 0..<150 {
                let visitors = Int.random(in: 1...3, using: &generator)
                try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<visitors {
                        group.addTask { try await visit(source) }
                    }
                    clock.advance(by: .seconds(Int.random(in: -5...9, using: &generator)))
                    for try await value in group {
                        #expect(value != nil, "round \(round)")
                    }
                }
                #expect(sessions.overlaps == 0 && sessions.doubleStops == 0, "round \(round)")
            }
            try await waitUntil("the last session stopped and the cache expired") {
                if sessions.isRunning || !source.replayCache.isEmpty { clock.advance(by: .seconds(100)) }
                return !sessions.isRunning && source.replayCache.isEmpty
            }
            try await waitUntil("every session stopped") { sessions.stops.count == sessions.starts }
            #expect(sessions.starts >= 10 && clock.sleepCalls >= 20, "the churn restarted sessions and timed windows")
            sessions.expectOrderly(running: false)
        }
    }

    // MARK: 3. Lag reports, eviction, waiting senders (lightly)

    @Test("feeders into an unbounded subject, a lossy events() reader, finished at random: the counts add up")
    func lossyReaderOfFeeders() async throws {
        let stride = 100_000
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 43)
            var missing: [String] = []
            for round in 0..<30 {
                let subject = AsyncPassthroughSubject<Int, Never>()
                let lossless = await SubscriberTask.join { subject.makeAsyncIterator() }
                let lossyJoined = Signal<Void>()
                let lossy = Task {
                    var iterator = subject.events(buffering: .bufferingNewest(3)).makeAsyncIterator()
                    lossyJoined.send(())
                    var events: [SharedEvent<Int>] = []
                    while let event = await iterator.next() {
                        events.append(event)
                        if events.count % 3 == 0 { await Task.yield() }
                    }
                    return events
                }
                _ = await lossyJoined.next()
                let streams = (1...3).map { source in HeldStream(prefilled: (0..<300).map { source * stride + $0 }) }
                let feeders = streams.map { held in
                    let sequence = held.counted
                    return Task { await subject.send(contentsOf: sequence) }
                }
                let k = Int.random(in: 1...900, using: &generator)
                var all = await lossless.take(k)
                subject.finish()
                for feeder in feeders { await feeder.value }
                all += await lossless.drain().elements
                let events = await lossy.value
                var elements: [Int] = []
                var missed = 0
                for event in events {
                    switch event {
                    case .element(let value): elements.append(value)
                    case .missed(let count): missed += count
                    case .evicted: Issue.record("round \(round): no eviction with a dropping policy")
                    }
                }
                #expect(elements.count + missed == all.count, "round \(round): \(elements.count) + \(missed)")
                #expect(inOrderPerSource(all, stride: stride))
                // What the lossy reader got is a subsequence of what everyone got.
                var cursor = all.makeIterator()
                #expect(
                    elements.allSatisfy { value in
                        while let next = cursor.next() { if next == value { return true } }
                        return false
                    }, "round \(round)")
                for (index, held) in streams.enumerated() where held.ends.all != [.cancelled] {
                    // A feeder whose call came after the completion returns at once without
                    // iterating (documented), as in manyFeedersBridgedWithEcho.
                    let neverIterated =
                        held.ends.all.isEmpty && held.countedPulls == 0 && !all.contains { $0 / stride == index + 1 }
                    if !neverIterated {
                        missing.append(
                            "round \(round), feeder \(index): \(held.countedPulls) pulls, ends \(held.ends.all)")
                    }
                }
            }
            // Once marked an intermittent known issue with manyFeedersBridgedWithEcho: under
            // load, a feeder's task can start after the completion, and such a feeder never
            // pulls (see that test).
            #expect(missing.isEmpty, "feeders whose held stream never saw .cancelled: \(missing)")
        }
    }

    @Test("an .evicting(2) client greeted with a replay of 8: the greeting never evicts; the third new element does")
    func evictingClientWithAGreeting() async throws {
        let subject = AsyncReplaySubject<Int, Never>(bufferSize: 8)
        for value in 0..<8 { subject.send(value) }
        var keeping = subject.events(buffering: .evicting(2)).makeAsyncIterator()
        var stalled = subject.events(buffering: .evicting(2)).makeAsyncIterator()
        subject.send(100)
        subject.send(101)
        var events: [SharedEvent<Int>] = []
        for _ in 0..<10 { if let event = await keeping.next() { events.append(event) } }
        #expect(events == (Array(0..<8) + [100, 101]).map { .element($0) }, "greeting and 2 new: nothing lost")
        subject.send(102)  // `stalled` holds 2 new ones (and its greeting): evicted
        subject.send(103)
        subject.finish()
        var rest: [SharedEvent<Int>] = []
        while let event = await keeping.next() { rest.append(event) }
        #expect(rest == [.element(102), .element(103)])
        var stalledEvents: [SharedEvent<Int>] = []
        while let event = await stalled.next() { stalledEvents.append(event) }
        #expect(stalledEvents.last == .evicted(.hardLimit(2)), "\(stalledEvents)")
        #expect(!stalledEvents.contains { if case .missed = $0 { return true } else { return false } })
    }

    @Test("waiting senders (FIFO) racing the reader and finish(), 60 times: what got in is a prefix of their order")
    func fifoSendersRacingFinish() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 47)
            for round in 0..<60 {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)
                var senders: [Task<Void, Never>] = []
                for value in 1...6 {
                    senders.append(Task { await subject.send(waitingForRoom: value) })
                    try await waitUntil("sender \(value) parked") { subject.storage.producersWaitingForRoom == value }
                }
                let k = Int.random(in: 0...7, using: &generator)
                let start = Latch()
                let finisher = Task {
                    await start.wait()
                    subject.finish()
                }
                start.release()
                var received = await reader.take(k)
                await finisher.value
                received += await reader.drain().elements
                for sender in senders { await sender.value }
                #expect(received == Array(0..<received.count), "round \(round): \(received)")
            }
        }
    }
}
