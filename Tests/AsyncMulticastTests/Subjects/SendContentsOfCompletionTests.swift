// `send(contentsOf:)` when the subject completes while the call waits (Guides/Subjects.md,
// "Feeding a sequence into a subject: send(contentsOf:)"): races of finish/fail with sends and
// with the caller's cancellation, bounded subjects fed by many feeders with a reader that
// echoes back, sequences that idle, that throw at completion, that ignore cancellation, that
// complete the subject from inside `next()`, non-Sendable sequences sent from an actor,
// main-actor callers, and a subject completed before the call.
//
// Order comes from gates (signals, `waitUntil` on public state, held streams and patient
// upstreams); deadlines are hang guards only. Races are looped.
//
// Found, and fixed: a completion whose `feeding.cancel()` landed just as AsyncStream.next()
// returned a buffered element left the held stream un-cancelled (about 1 round in 100 to 1 in
// 200); now a sequence that has not ended is always asked once more after a completion, in a
// cancelled task. A sequence that ignores cancellation then keeps the call until that extra
// pull returns (a completion as the `next()` returns cannot be told apart): the doc of
// `send(contentsOf:)` says so, and `completionDuringAPatientPull` checks it.

import Testing

@testable import AsyncMulticast

/// Over an `AsyncStream`: `-1` is thrown as `TestError.boom`; with `reportsCancellation`, a
/// `nil` in a cancelled task is thrown as `TestError.other(0)` (a sequence that reports its
/// cancellation as an error). Counts its pulls in `counter`.
private struct ThrowsOnMinusOne: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = TestError
    let base: AsyncStream<Int>
    var counter = Lock(0)
    var reportsCancellation = false

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = TestError
        var base: AsyncStream<Int>.Iterator
        let counter: Lock<Int>
        let reportsCancellation: Bool
        mutating func next(isolation actor: isolated (any Actor)?) async throws(TestError) -> Int? {
            self.counter.withLock { $0 += 1 }
            let value = await self.base.next(isolation: actor)
            if value == -1 { throw .boom }
            if self.reportsCancellation, value == nil, Task.isCancelled { throw .other(0) }
            return value
        }
        mutating func next() async throws(TestError) -> Int? { try await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            base: self.base.makeAsyncIterator(), counter: self.counter, reportsCancellation: self.reportsCancellation)
    }
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

private actor NonSendableFeeder {
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

extension HeldStream {
    /// Whether `ends` (this stream's ends, read once the `send(contentsOf:)` call feeding from
    /// it returned) show what the subject's completion must do to it: `.cancelled`, once. Or
    /// nothing at all, when the call found the subject completed and returned without iterating
    /// (documented): then it pulled nothing and `delivered` none of its elements.
    fileprivate func endedAsCompletionRequires(_ ends: [StreamEnd], delivered: Bool) -> Bool {
        let neverIterated = ends.isEmpty && self.countedPulls == 0 && !delivered
        return ends == [.cancelled] || neverIterated
    }
}

@Suite("send(contentsOf:) when the subject completes", .serialized, .timeLimit(.minutes(10)))
struct SendContentsOfCompletionTests {
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
                if !held.endedAsCompletionRequires(ends, delivered: !received.isEmpty) {
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
                let subject = AsyncReplaySubject<Int, Never>(replay: 1, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sequence = held.sequence
                let sending = Task { await subject.send(contentsOf: sequence) }
                let k = Int.random(in: 0...10, using: &generator)
                var received = await reader.take(k)
                await race {
                    sending.cancel()
                } against: {
                    subject.finish()
                }
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
            let patient = StubbornSource()
            let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let returned = LockedFlag()
            let sending = Task {
                await subject.send(contentsOf: patient)
                returned.set()
            }
            await patient.control.waitForPull(0)
            patient.control.answer(1)
            await patient.control.waitForPull(1)
            patient.control.answer(2)
            try await waitUntil("2 waiting for room") { subject.storage.producersWaitingForRoom == 1 }
            if completion == 0 { subject.finish() } else { subject.fail(.boom) }
            await patient.control.waitForPull(2)
            #expect(patient.control.pulls[2].sawCancellation, "the extra pull runs in a cancelled task")
            await letOthersRun()
            #expect(!returned.isSet, "the call waits for the pending next() of a sequence that ignores cancellation")
            patient.control.answer(99)
            try await withTimeout("send(contentsOf:) returning") { await sending.value }
            #expect(patient.control.pulls.count == 3, "asked once, not more")
            #expect(patient.control.iteratorCount == 1)
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
                let patient = StubbornSource()
                let subject = AsyncPassthroughSubject<Int, Never>()
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                let sending = Task { await subject.send(contentsOf: patient) }
                let k = Int.random(in: 1...5, using: &generator)
                for index in 0..<k {
                    await patient.control.waitForPull(index)
                    patient.control.answer(index)
                }
                #expect(await reader.take(k) == Array(0..<k))
                subject.finish()
                // Either the call was already in pull k (it sees the cancellation there), or
                // it asks once more in a cancelled task.
                await patient.control.waitForPull(k)
                try await waitUntil("pull \(k) to see the cancellation") { patient.control.pulls[k].sawCancellation }
                patient.control.answer(-1)
                // Pull k answered with an element although it saw the cancellation (this
                // sequence ignores it): if pull k was already running when the subject
                // finished, the call cannot tell that it saw it, and asks once more.
                let done = Lock(false)
                let waiter = Task {
                    await sending.value
                    done.withLock { $0 = true }
                }
                try await waitUntil("the call returning, or one more pull") {
                    done.withLock { $0 } || patient.control.pulls.count == k + 2
                }
                if patient.control.pulls.count == k + 2 {
                    await patient.control.waitForPull(k + 1)
                    #expect(patient.control.pulls[k + 1].sawCancellation, "round \(round): asked in a cancelled task")
                    patient.control.answer(-2)
                }
                try await withTimeout("send(contentsOf:) returning", seconds: 60) { await waiter.value }
                #expect(patient.control.pulls.count <= k + 2, "round \(round): at most one pull after the completion's")
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
            let sending = Task {
                try await subject.send(contentsOf: ThrowsOnMinusOne(base: stream, reportsCancellation: true))
            }
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
            let (stream, input, ends) = TerminationRecorder.recordedStream()
            input.yield(1)
            input.yield(2)
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let sending = Task {
                try await subject.send(contentsOf: ThrowsOnMinusOne(base: stream, reportsCancellation: true))
            }
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
                let sending = Task {
                    try await subject.send(contentsOf: ThrowsOnMinusOne(base: stream, reportsCancellation: true))
                }
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
            let subject = AsyncReplaySubject<Int, Never>(replay: 4, buffering: .bounded(4))
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
                    await race {
                        a.finish()
                    } against: {
                        b.finish()
                    }
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
                #expect(isIncreasingPerSender(forward, stride: stride), "round \(round)")
                #expect(Set(received).count == received.count, "round \(round): nothing twice")
                for (index, held) in streams.enumerated() {
                    // A feeder whose call came after `a` completed returns at once without
                    // iterating; any other was still iterating its held stream when `a` completed.
                    let delivered = received.contains { $0 / stride == index + 1 }
                    if !held.endedAsCompletionRequires(held.ends.all, delivered: delivered) {
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
            let feeder = NonSendableFeeder()
            var missing: [Int] = []
            for round in 0..<100 {
                let (stream, input, ends) = TerminationRecorder.recordedStream()
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
            let patient = StubbornSource()
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let k = Int.random(in: 1...6, using: &generator)
            let returned = LockedFlag()
            let driver = Task.detached {
                async let taken = reader.take(k)
                for index in 0..<k {
                    await patient.control.waitForPull(index)
                    patient.control.answer(index)
                }
                let read = await taken
                subject.finish()
                // The call is in pull k, or asks once more. Pull k answers with an element
                // (this sequence ignores cancellation): if it was already running when the
                // subject finished, the call cannot tell that it saw the cancellation, and
                // asks once more.
                await patient.control.waitForPull(k)
                patient.control.answer(-1)
                try await waitUntil("the call returning, or one more pull") {
                    returned.isSet || patient.control.pulls.count == k + 2
                }
                if patient.control.pulls.count == k + 2 {
                    await patient.control.waitForPull(k + 1)
                    patient.control.answer(-2)
                }
                return read
            }
            await subject.send(contentsOf: patient)
            returned.set()
            let taken = try await driver.value
            #expect(taken == Array(0..<k), "round \(round)")
            let pulls = patient.control.pulls
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

    @Test("send(contentsOf:) ends when the subject completes while its sequence is idle: the sequence is cancelled")
    func contentsOfEndsWithTheSubject() async throws {
        try await withTimeout(seconds: 300) {
            for kind in 0..<3 {
                let source = HeldStream()
                let sendAll: @Sendable () async -> Void
                let complete: @Sendable () -> Void
                switch kind {
                case 0:
                    let subject = AsyncPassthroughSubject<Int, Never>()
                    sendAll = { await subject.send(contentsOf: source.idle) }
                    complete = { subject.finish() }
                case 1:
                    let subject = AsyncCurrentValueSubject<Int, TestError>(0)
                    sendAll = { await subject.send(contentsOf: source.idle) }
                    complete = { subject.fail(.boom) }
                default:
                    let subject = AsyncReplaySubject<Int, Never>(replay: 1, buffering: .bounded(1))
                    sendAll = { await subject.send(contentsOf: source.idle) }
                    complete = { subject.finish() }
                }
                let sending = Task { await sendAll() }
                source.input.yield(1)
                _ = await source.entered.next()
                _ = await source.entered.next()  // idle in its second next()
                complete()
                try await withTimeout("send(contentsOf:) after completion", seconds: 300) { await sending.value }
                #expect(try await source.ends.waitForTermination() == [.cancelled], "kind \(kind)")
                #expect(source.iteratorCount == 1)
            }
        }
    }

    @Test("send(contentsOf:) from the main actor, ended by finish() from another task while its sequence is idle")
    @MainActor
    func contentsOfOnTheMainActor() async throws {
        let source = HeldStream()
        let subject = AsyncPassthroughSubject<Int, Never>()
        var reader = subject.makeAsyncIterator()
        let finisher = Task.detached {
            _ = await source.entered.next()
            source.input.yield(1)
            _ = await source.entered.next()
            subject.finish()
        }
        await subject.send(contentsOf: source.idle)
        await finisher.value
        #expect(await reader.next() == 1)
        #expect(await reader.next() == nil)
        #expect(try await source.ends.waitForTermination() == [.cancelled])
    }

    @Test("many send(contentsOf:) calls idle on their sequences all return when the subject finishes")
    func manyIdleContentsOf() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            let sources = (0..<20).map { _ in HeldStream() }
            let calls = sources.map { source in Task { await subject.send(contentsOf: source.idle) } }
            for source in sources { _ = await source.entered.next() }
            sources[0].input.yield(1)
            sources[1].input.yield(2)  // one of them waits for room
            #expect(await reader.next() != nil)
            subject.finish()
            for call in calls { await call.value }
            for source in sources {
                // A call whose element waited for room when the subject finished, or that the
                // finish cancelled between two pulls, asks its sequence once more, cancelled.
                let ends = try await source.ends.waitForTermination()
                #expect(ends == [.cancelled])
            }
            _ = await reader.next()
            #expect(await reader.next() == nil)
        }
    }

    @Test("a send(contentsOf:) feeder among waiting senders: each source keeps its order, everyone gets in")
    func contentsOfAmongWaitingSenders() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<20 {
                let subject = AsyncReplaySubject<Int, Never>(replay: 1_000, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)
                let feeder = Task { await subject.send(contentsOf: (100..<110).async) }
                try await waitUntil("the feeder parked") { subject.storage.producersWaitingForRoom == 1 }
                let senders = try await parkInOrder([1, 2, 3], storage: subject.storage, alreadyParked: 1) {
                    await subject.send(waitingForRoom: $0)
                }
                let received = await reader.take(14)
                await feeder.value
                for sender in senders { await sender.value }
                #expect(Array(received.prefix(3)) == [0, 100, 1], "round \(round): parked order")
                #expect(received.filter { $0 < 100 } == [0, 1, 2, 3], "round \(round)")
                #expect(received.filter { $0 >= 100 } == Array(100..<110), "round \(round)")
                await reader.leave()
            }
        }
    }

    @Test("send(contentsOf:) on a subject already completed: returns at once, never makes an iterator")
    func alreadyCompleted() async throws {
        let held = HeldStream()
        let passthrough = AsyncPassthroughSubject<Int, Never>()
        passthrough.finish()
        await passthrough.send(contentsOf: held.idle)
        let current = AsyncCurrentValueSubject<Int, TestError>(0)
        current.fail(.boom)
        await current.send(contentsOf: held.idle)
        let replay = AsyncReplaySubject<Int, Never>(replay: 2)
        replay.send(1)
        replay.finish()
        await replay.send(contentsOf: held.idle)
        #expect(held.iteratorCount == 0)
        #expect(held.ends.all.isEmpty, "its stream was not touched")
        #expect(replay.replayCache == [1])
        held.input.finish()
    }

    @Test("finish/fail while an element waits for room, 150 rounds, three subjects: .cancelled before the call returns")
    func completionWhileWaitingForRoom() async throws {
        // 150 rounds: the hang guard is a watchdog that each round feeds.
        try await withProgressWatchdog("150 rounds") { progress in
            var generator = LCG(seed: 4_04)
            var missing: [Int] = []
            for round in 0..<150 {
                progress.tick()
                let held = HeldStream(prefilled: 0..<20)
                let kind = round % 3
                let fails = Bool.random(using: &generator)
                let taken = Int.random(in: 0...5, using: &generator)
                let sending: Task<Void, Never>
                let reader: SubscriberTask<Int, TestError>
                let complete: @Sendable () -> Void
                switch kind {
                case 0:
                    let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                case 1:
                    let subject = AsyncReplaySubject<Int, TestError>(replay: 1, buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                default:
                    let subject = AsyncCurrentValueSubject<Int, TestError>(-1, buffering: .bounded(1))
                    reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                    _ = await reader.next()  // the current value
                    let sequence = held.counted
                    sending = Task { await subject.send(contentsOf: sequence) }
                    complete = { if fails { subject.fail(.boom) } else { subject.finish() } }
                }
                let got = await reader.take(taken)
                #expect(got == Array(0..<taken), "round \(round)")
                // The reader stops reading: the next element waits for room.
                try await waitUntil("round \(round): a pull waiting or an element for room") {
                    held.countedPulls >= taken + 2
                }
                complete()
                try await withTimeout("round \(round): the call returning") { await sending.value }
                let ends = held.ends.all
                if ends != [.cancelled] { missing.append(round) }
                #expect(held.countedPulls <= taken + 4, "round \(round): \(held.countedPulls) pulls")
                withExtendedLifetime(held) {}
                await reader.leave()
            }
            #expect(
                missing.isEmpty, "rounds whose held stream did not see .cancelled before the call returned: \(missing)")
        }
    }

    @Test("the caller's cancellation alone while the sequence's next() waits: the stream is cancelled, asked once")
    func callerCancellationWhilePulling() async throws {
        for round in 0..<100 {
            let held = HeldStream(prefilled: 0..<round % 3)
            let subject = AsyncPassthroughSubject<Int, Never>()
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let sequence = held.counted
            let sending = Task { await subject.send(contentsOf: sequence) }
            #expect(await reader.take(round % 3) == Array(0..<round % 3))
            try await waitUntil("round \(round): waiting in next()") { held.countedPulls == round % 3 + 1 }
            sending.cancel()
            try await withTimeout("round \(round): the call returning") { await sending.value }
            #expect(held.ends.all == [.cancelled], "round \(round)")
            #expect(held.countedPulls == round % 3 + 1, "round \(round): asked again after a caller's cancellation")
            subject.send(99)
            #expect(await reader.next() == 99, "round \(round): the subject stays open")
            await reader.leave()
            withExtendedLifetime(held) {}
        }
    }

    @Test("a sequence that threw is not asked again when the subject completes right after")
    func thrownSequenceNotAskedAgain() async throws {
        for round in 0..<100 {
            let counter = Lock(0)
            let (stream, input) = AsyncStream.makeStream(of: Int.self)
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            input.yield(1)
            input.yield(-1)
            let sending = Task { () -> TestError? in
                do throws(TestError) {
                    try await subject.send(contentsOf: ThrowsOnMinusOne(base: stream, counter: counter))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(await reader.next() == 1)
            let error = try await withTimeout("round \(round)") { await sending.value }
            subject.finish()
            #expect(error == .boom, "round \(round): the sequence's error is thrown to the caller")
            #expect(counter.withLock { $0 } == 2, "round \(round): pulled after it threw")
            await reader.leave()
        }
    }

    @Test(
        "a completion while a sequence that ignores cancellation waits in next(): the call returns when that next() does"
    )
    func completionDuringAPatientPull() async throws {
        var extraPulls: [Int] = []
        for round in 0..<30 {
            let patient = StubbornSource()
            let subject = AsyncPassthroughSubject<Int, Never>()
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            let sequence = patient
            let returned = LockedFlag()
            let sending = Task {
                await subject.send(contentsOf: sequence)
                returned.set()
            }
            try await waitUntil("round \(round): pull 1 waiting") { patient.control.waiting == 1 }
            patient.control.answer(0)
            #expect(await reader.next() == 0)
            try await waitUntil("round \(round): pull 2 waiting") { patient.control.waiting == 1 }
            subject.finish()
            await letOthersRun()
            #expect(!returned.isSet, "round \(round): returned before the patient next() did")
            patient.control.answer(1)  // that next() returns now: an element, ignored
            try await waitUntil("round \(round): the call returned, or a third pull") {
                returned.isSet || patient.control.waiting == 1
            }
            if !returned.isSet {
                extraPulls.append(round)
                patient.control.answer(nil)
            }
            try await withTimeout("round \(round): the call returning") { await sending.value }
            #expect(patient.control.pulls.count <= 3)
            let rest = await reader.drain()
            #expect(rest.elements.isEmpty, "round \(round): an element sent after completion")
            await reader.leave()
        }
        // Documented (AsyncSubject.send(contentsOf:), Subjects.md): a pull that returns an
        // element after the completion cannot be told from one that missed the cancellation,
        // so the call asks once more, in a cancelled task, and waits for that pull. Found
        // here: the doc sentence said the call returned "as soon as that next() does".
        #expect(extraPulls.count == 30, "every round asked a third time: \(extraPulls)")
    }
}
