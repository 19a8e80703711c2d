// send(contentsOf:) on the subjects: sends every element in order, as send(waitingForRoom:)
// does; returns when the sequence ends without completing the subject; stops when its task is
// cancelled or the subject completes; throws the sequence's error; is paced by a `.bounded`
// subscriber.

import Testing

@testable import AsyncMulticast

/// An `AsyncSequence` that is not `Sendable`: `send(contentsOf:)` takes it from an actor
/// because the sequence stays in the caller's isolation.
private final class Lines: AsyncSequence {
    typealias Element = Int
    typealias Failure = Never
    private var values: [Int]

    init(_ values: [Int]) { self.values = values }

    struct AsyncIterator: AsyncIteratorProtocol {
        let lines: Lines
        mutating func next() async -> Int? {
            self.lines.values.isEmpty ? nil : self.lines.values.removeFirst()
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(lines: self) }
}

private actor Feeder {
    func feed(_ subject: AsyncPassthroughSubject<Int, Never>) async {
        await subject.send(contentsOf: Lines([1, 2, 3]))
    }
}

@Suite("send(contentsOf:)", .timeLimit(.minutes(2)))
struct SendContentsOfTests {
    enum SubjectKind: String, NamedTestCase {
        case passthrough, currentValue, replay
    }

    @Test(
        "sends every element in order and returns when the sequence ends; the subject stays open",
        arguments: SubjectKind.allCases)
    func sendsInOrderWithoutFinishing(_ kind: SubjectKind) async throws {
        try await withTimeout {
            var received: [Int] = []
            switch kind {
            case .passthrough:
                let subject = AsyncPassthroughSubject<Int, Never>()
                var reader = subject.makeAsyncIterator()
                await subject.send(contentsOf: (1...100).async)
                subject.send(101)  // still open
                subject.finish()
                while let n = await reader.next() { received.append(n) }
            case .currentValue:
                let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .unbounded)
                var reader = subject.makeAsyncIterator()
                await subject.send(contentsOf: (1...100).async)
                #expect(subject.value == 100)
                subject.send(101)
                subject.finish()
                #expect(await reader.next() == 0, "the current value when it joined")
                while let n = await reader.next() { received.append(n) }
            case .replay:
                let subject = AsyncReplaySubject<Int, Never>(replay: 2)
                var reader = subject.makeAsyncIterator()
                await subject.send(contentsOf: (1...100).async)
                #expect(subject.replayCache == [99, 100])
                subject.send(101)
                subject.finish()
                while let n = await reader.next() { received.append(n) }
            }
            #expect(received == Array(1...101))
        }
    }

    @Test("two sources feed one subject: each keeps its order, nothing is lost, neither completes it")
    func twoSources() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        async let first: Void = subject.send(contentsOf: (0..<50).async)
        async let second: Void = subject.send(contentsOf: (100..<150).async)
        _ = await (first, second)
        subject.send(-1)
        subject.finish()
        let received = await reader.drain().elements
        #expect(received.filter { $0 >= 0 && $0 < 100 } == Array(0..<50))
        #expect(received.filter { $0 >= 100 } == Array(100..<150))
        #expect(received.last == -1, "the subject was open after both returned")
    }

    @Test("a non-Sendable sequence can be sent from an actor")
    func fromAnActor() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var reader = subject.makeAsyncIterator()
        await Feeder().feed(subject)
        subject.finish()
        let received = await reader.readAll()
        #expect(received == [1, 2, 3])
    }

    /// A subject whose subscriber read 1 from `send(contentsOf:)` of a `StubbornSource` (each
    /// pull waits for the test's answer, whatever the cancellation); its second pull waits.
    private func sendingUntilTheSecondPull() async -> (
        AsyncPassthroughSubject<Int, Never>, SubscriberTask<Int, Never>, StubbornSource, Task<Void, Never>
    ) {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        let source = StubbornSource()
        let sending = Task { await subject.send(contentsOf: source) }
        _ = await source.control.pulled.next("first pull")
        source.control.answer(1)
        #expect(await reader.next() == 1)
        _ = await source.control.pulled.next("second pull")
        return (subject, reader, source, sending)
    }

    @Test("stops when its task is cancelled: the element in hand is sent, nothing more is pulled")
    func stopsWhenCancelled() async throws {
        let (subject, reader, source, sending) = await self.sendingUntilTheSecondPull()
        sending.cancel()
        source.control.answer(2)  // pulled before the cancellation was seen
        // It returns without pulling again (a third pull would wait for an answer forever).
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(source.control.iteratorCount == 1)
        #expect(await reader.next() == 2)
        subject.send(3)
        #expect(await reader.next() == 3, "cancelling the sender does not complete the subject")
        await reader.leave()
    }

    @Test("a sequence that ignores cancellation and answers after the completion is asked once more, then returns")
    func stopsWhenTheSubjectCompletes() async throws {
        let (subject, reader, source, sending) = await self.sendingUntilTheSecondPull()
        subject.finish()
        source.control.answer(2)  // ignored: the subject has completed
        // It returned an element, so it may not have seen the cancellation: asked once more,
        // in a cancelled task; a sequence that ignores that too keeps the call until it answers.
        _ = await source.control.pulled.next("the pull after the completion")
        source.control.answer(3)  // ignored
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(await reader.next() == nil)
        #expect(source.control.iteratorCount == 1)
    }

    @Test(
        "returns at once when the subject has already completed, without pulling the sequence",
        arguments: SubjectKind.allCases)
    func returnsAtOnceAfterCompletion(_ kind: SubjectKind) async throws {
        let probe = Probe()
        // Never yields and never ends: only the subject's completion can end the call.
        let (idle, input) = AsyncStream.makeStream(of: Int.self)
        defer { input.finish() }
        let source = Instrumented(idle, probe: probe)
        switch kind {
        case .passthrough:
            let subject = AsyncPassthroughSubject<Int, Never>()
            subject.finish()
            try await withTimeout("send(contentsOf:) returning") { await subject.send(contentsOf: source) }
        case .currentValue:
            let subject = AsyncCurrentValueSubject<Int, Never>(0)
            subject.finish()
            try await withTimeout("send(contentsOf:) returning") { await subject.send(contentsOf: source) }
            #expect(subject.value == 0)
        case .replay:
            let subject = AsyncReplaySubject<Int, Never>(replay: 2)
            subject.finish()
            try await withTimeout("send(contentsOf:) returning") { await subject.send(contentsOf: source) }
            #expect(subject.replayCache.isEmpty)
        }
        #expect(probe.pulls == 0, "a completed subject takes nothing, so nothing is pulled")
    }

    enum Completion: String, NamedTestCase {
        case finish, fail
    }

    @Test(
        "returns when the subject completes while the sequence is idle; the sequence's iteration is cancelled",
        arguments: Completion.allCases)
    func returnsWhenTheSubjectCompletesDuringAnIdlePull(_ completion: Completion) async throws {
        let subject = AsyncPassthroughSubject<Int, TestError>()
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        let source = FedSource()
        let sending = Task { await subject.send(contentsOf: source) }
        await source.control.waitForStart(of: 0)
        source.control.yield(1, 2)
        #expect(await reader.take(2) == [1, 2])
        // The third pull finds nothing: the call waits inside the sequence's `next()`.
        try await waitUntil("the third pull") { source.control.nextCalls == 3 }
        switch completion {
        case .finish: subject.finish()
        case .fail: subject.fail(.boom)
        }
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        let end = await source.control.waitForEnd()
        #expect(end?.end == .cancelled, "the sequence's iteration is cancelled")
        let rest = await reader.drain()
        #expect(rest.elements.isEmpty)
        #expect(rest.failure == (completion == .fail ? .boom : nil))
        #expect(source.control.iteratorCount == 1)
    }

    /// Starts `send(contentsOf: elements)` into `subject`, counting its pulls; returns once it
    /// waits for room.
    private func startSendingUntilItWaitsForRoom(
        _ elements: Range<Int>, into subject: AsyncPassthroughSubject<Int, Never>
    ) async throws -> (Probe, Task<Void, Never>) {
        let probe = Probe()
        let sending = Task { await subject.send(contentsOf: Instrumented(elements.async, probe: probe)) }
        try await waitUntil("the sender waiting for room") { subject.storage.producersWaitingForRoom == 1 }
        return (probe, sending)
    }

    /// A `.bounded(2)` subject whose one subscriber, `reader`, reads nothing yet, and a
    /// `send(contentsOf: 0..<10)` into it that has sent 0 and 1 and waits for room to send 2.
    private func senderWaitingForRoomInABoundedTwoSubject() async throws -> (
        AsyncPassthroughSubject<Int, Never>, reader: SubscriberBox<Int, Never>, Probe, sending: Task<Void, Never>
    ) {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
        let reader = SubscriberBox(subject.makeAsyncIterator())
        let (probe, sending) = try await self.startSendingUntilItWaitsForRoom(0..<10, into: subject)
        return (subject, reader, probe, sending)
    }

    @Test("returns when the subject completes while it waits for room; the element it waited to send is ignored")
    func returnsWhenTheSubjectCompletesWhilePaced() async throws {
        let (subject, reader, probe, sending) = try await self.senderWaitingForRoomInABoundedTwoSubject()
        subject.finish()
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(probe.pulls == 4, "one more pull, in a cancelled task, tells the sequence its iteration ended")
        let received = await reader.readAll()
        #expect(received == [0, 1], "what was sent before the completion, then the end: the last pull is ignored")
    }

    @Test(
        "a completion while an element waits for room cancels the sequence's iteration: onTermination sees .cancelled",
        arguments: Completion.allCases)
    func completionWhilePacedCancelsTheIteration(_ completion: Completion) async throws {
        let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
        var reader = subject.makeAsyncIterator()
        // The test holds the stream, so dropping its iterator would not end it: only a
        // `next()` in a cancelled task calls `onTermination`.
        let (source, input, ends) = TerminationRecorder.recordedStream()
        input.yield(1)
        input.yield(2)
        let sending = Task { await subject.send(contentsOf: source) }
        try await waitUntil("2 waiting for room") { subject.storage.producersWaitingForRoom == 1 }
        switch completion {
        case .finish: subject.finish()
        case .fail: subject.fail(.boom)
        }
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(ends.all == [.cancelled], "the sequence's iteration was cancelled before the call returned")
        input.yield(3)
        withExtendedLifetime(source) {}
        #expect(try await reader.next() == 1, "2 was ignored")
        switch completion {
        case .finish: #expect(try await reader.next() == nil)
        case .fail: await #expect(throws: TestError.boom) { try await reader.next() }
        }
    }

    @Test("throws the sequence's error, which does not fail the subject")
    func throwsTheSequenceError() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var reader = subject.makeAsyncIterator()
        await #expect(throws: TestError.boom) {
            try await subject.send(contentsOf: Scripted(elements: [1, 2], failure: .boom))
        }
        subject.send(3)
        subject.finish()
        let received = await reader.readAll()
        #expect(received == [1, 2, 3], "sent before the error, and the subject was still open")
    }

    @Test("a .bounded subscriber paces it: it waits while the subscriber holds n, and nothing is lost")
    func pacedByABoundedSubscriber() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
        var reader = subject.makeAsyncIterator()
        let id = reader.subscription.id
        let (probe, sending) = try await self.startSendingUntilItWaitsForRoom(0..<20, into: subject)
        #expect(subject.storage.undelivered(id) == [0, 1, 2, 3], "it sent until the subscriber held 4, then waited")
        #expect(probe.pulls == 5, "and pulled only the element it waits to send")

        var received: [Int] = []
        while received.count < 20, let n = await reader.next() {
            received.append(n)
            #expect(subject.storage.undelivered(id).count <= 4, "never more than the bound")
        }
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(received == Array(0..<20))
        #expect(subject.subscriberCount == 1)
    }

    @Test("cancelled while paced: the waiting element is sent past the bound, and nothing more is pulled")
    func cancelledWhilePaced() async throws {
        let (subject, reader, probe, sending) = try await self.senderWaitingForRoomInABoundedTwoSubject()
        sending.cancel()
        try await withTimeout("send(contentsOf:) returning") { await sending.value }
        #expect(probe.pulls == 3)
        subject.finish()
        let received = await reader.readAll()
        #expect(received == [0, 1, 2], "the element it was waiting to send was not lost")
    }
}
