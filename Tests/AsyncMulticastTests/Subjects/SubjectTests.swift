// AsyncPassthroughSubject and AsyncCurrentValueSubject, with real tasks: sending, what each
// subscriber receives, .bounded(n) and send(waitingForRoom:), completion, per-subscriber
// policies. The push mode behind them is checked in Engine/StateMachinePushModeTests.swift.

import Testing

@testable import AsyncMulticast

/// Compiles only because `send(_:)` and `value`'s setter never suspend: callable from a
/// synchronous function.
private func sendSynchronously(
    _ passthrough: AsyncPassthroughSubject<Int, Never>,
    _ currentValue: AsyncCurrentValueSubject<Int, Never>,
    _ value: Int
) {
    passthrough.send(value)
    currentValue.send(value)
    currentValue.value = value + 1
}

@Suite("Subjects", .timeLimit(.minutes(2)))
struct SubjectTests {
    // MARK: Sending

    @Test("send never suspends: it is callable from a synchronous function")
    func sendFromSynchronousCode() async {
        let (passthrough, currentValue, p, c) = await Self.unboundedSubjectsWithAReaderEach()
        sendSynchronously(passthrough, currentValue, 10)
        #expect(await p.next() == 10)
        #expect(await c.take(3) == [0, 10, 11])
        #expect(currentValue.value == 11)
        await leaveAll(p, c)
    }

    @Test("plain subject.send(x) in async code needs no await and is not ambiguous")
    func plainSendInAsyncCode() async {
        let (subject, current, a, b) = await Self.unboundedSubjectsWithAReaderEach()
        // In an async context, next to `send(waitingForRoom:)`: no `await`, no ambiguity.
        subject.send(1)
        current.send(1)
        await subject.send(waitingForRoom: 2)
        await current.send(waitingForRoom: 2)
        #expect(await a.take(2) == [1, 2])
        #expect(await b.take(3) == [0, 1, 2])
        await leaveAll(a, b)
    }

    @Test("the passthrough subject's default buffering is .unbounded: nothing is lost")
    func passthroughDefaultIsUnbounded() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        for value in 0..<1_000 { subject.send(value) }
        subject.finish()
        let drained = await reader.drain()
        #expect(drained.elements == Array(0..<1_000))
    }

    @Test("the current-value subject's default buffering is .bufferingNewest(1): a slow subscriber skips to the latest")
    func currentValueDefaultIsNewestOne() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0)
        let slow = await SubscriberTask.join { subject.makeAsyncIterator() }
        for value in 1...5 { subject.send(value) }
        #expect(await slow.next() == 5)
        subject.send(6)
        #expect(await slow.next() == 6)
        await slow.leave()
    }

    // MARK: What each subscriber receives

    @Test("passthrough: each iterator receives what is sent after it joined")
    func passthroughReceivesWhatIsSentAfterJoining() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        subject.send(0)  // nobody hears this
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(1)
        let b = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(2)
        subject.finish()
        #expect(await a.drain().elements == [1, 2])
        #expect(await b.drain().elements == [2])
    }

    @Test("current-value: each iterator receives the current value first, then what is sent after it joined")
    func currentValueFirst() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .unbounded)
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(1)
        let b = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(2)
        subject.finish()
        #expect(await a.drain().elements == [0, 1, 2])
        #expect(await b.drain().elements == [1, 2])
    }

    @Test("current-value: `value` reads the current value; setting it sends")
    func valueGetSet() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0)
        #expect(subject.value == 0)
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        #expect(await a.next() == 0)
        subject.value = 5
        #expect(subject.value == 5)
        #expect(await a.next() == 5)
        subject.value += 1
        #expect(subject.value == 6)
        #expect(await a.next() == 6)
        subject.send(7)
        #expect(subject.value == 7)
        #expect(await a.next() == 7)
        await a.leave()
    }

    // MARK: .bounded(n)

    @Test("under .bounded(n) the synchronous send buffers like .unbounded: nothing is lost", arguments: [1, 2])
    func boundedSynchronousSendLosesNothing(limit: Int) async {
        let passthrough = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(limit))
        let current = AsyncCurrentValueSubject<Int, Never>(0, buffering: .bounded(limit))
        let p = await SubscriberTask.join { passthrough.makeAsyncIterator() }
        let c = await SubscriberTask.join { current.makeAsyncIterator() }
        for value in 1...20 {
            passthrough.send(value)
            current.send(value)
        }
        passthrough.finish()
        current.finish()
        #expect(await p.drain().elements == Array(1...20))
        #expect(await c.drain().elements == Array(0...20))
    }

    @Test("send(waitingForRoom:) does not wait while there is room")
    func waitingSendWithRoom() async throws {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        let sender = Task {
            await subject.send(waitingForRoom: 1)
            await subject.send(waitingForRoom: 2)
        }
        try await withTimeout("sends with room") { await sender.value }
        #expect(await reader.take(2) == [1, 2])
        await reader.leave()
    }

    @Test("send(waitingForRoom:) waits while a subscriber holds n pending elements and resumes when it consumes")
    func waitingSendWaitsForTheReader() async throws {
        let (subject, reader) = await Self.subjectWithAFullReader()
        let (sender, sent) = await startWaitingSend(3, into: subject)
        #expect(!sent.isSet, "the send waits: the reader is full")

        #expect(await reader.next() == 1)  // consuming makes room
        try await withTimeout("the waiting send") { await sender.value }
        #expect(sent.isSet)
        #expect(await reader.take(2) == [2, 3])
        await reader.leave()
    }

    @Test("current-value: send(waitingForRoom:) waits until the subscriber consumed the current value (.bounded(1))")
    func currentValueWaitingSend() async throws {
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .bounded(1))
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }  // holds the current value
        let (sender, sent) = await startWaitingSend(1, into: subject)
        #expect(!sent.isSet, "the reader holds 1 = n (the current value)")
        #expect(await reader.next() == 0)
        try await withTimeout("the waiting send") { await sender.value }
        #expect(sent.isSet)
        #expect(subject.value == 1)
        #expect(await reader.next() == 1)
        await reader.leave()
    }

    @Test("a cancelled waiting sender stops waiting, and its element is still delivered")
    func cancelledWaitingSenderStillDelivers() async throws {
        let (subject, reader) = await Self.subjectWithAFullReader()
        let (sender, _) = await startWaitingSend(3, into: subject)
        sender.cancel()
        // It returns although the reader has not consumed anything.
        try await withTimeout("the cancelled send") { await sender.value }
        subject.finish()
        #expect(await reader.drain().elements == [1, 2, 3], "nothing lost")
    }

    /// An unbounded passthrough subject, an unbounded current-value subject of 0, and one
    /// subscriber of each.
    private static func unboundedSubjectsWithAReaderEach() async -> (
        AsyncPassthroughSubject<Int, Never>, AsyncCurrentValueSubject<Int, Never>,
        SubscriberTask<Int, Never>, SubscriberTask<Int, Never>
    ) {
        let passthrough = AsyncPassthroughSubject<Int, Never>()
        let currentValue = AsyncCurrentValueSubject<Int, Never>(0, buffering: .unbounded)
        let p = await SubscriberTask.join { passthrough.makeAsyncIterator() }
        let c = await SubscriberTask.join { currentValue.makeAsyncIterator() }
        return (passthrough, currentValue, p, c)
    }

    /// A `.bounded(2)` subject and its one subscriber, which holds 1 and 2 = n: a sender waits.
    private static func subjectWithAFullReader() async -> (
        AsyncPassthroughSubject<Int, Never>, SubscriberTask<Int, Never>
    ) {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(1)
        subject.send(2)
        return (subject, reader)
    }

    @Test(
        "senders waiting for room go in first in, first out when the last subscriber leaves, whichever task runs first",
        arguments: 0..<20)
    func waitingSendersKeepTheirOrderWhenTheLastSubscriberLeaves(round: Int) async throws {
        // It replays everything, so the order stays visible once nobody subscribes.
        let subject = AsyncReplaySubject<Int, Never>(replay: 16, buffering: .bounded(1))
        let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(0)  // the reader is full
        let senders = try await ParkedSenders(1...6, holding: round % 5, storage: subject.storage) {
            await subject.send(waitingForRoom: $0)
        }
        defer { senders.held.release() }  // if the test fails before it does: no task stays frozen
        await reader.leave()
        try await senders.awaitAll()
        #expect(subject.replayCache == Array(0...6), "round \(round), sender #\(senders.heldIndex) held")
        #expect(subject.storage.producersWaitingForRoom == 0)
    }

    @Test(
        "senders waiting for room go in first in, first out as a subscriber reads, whichever task runs first",
        arguments: 0..<20)
    func waitingSendersKeepTheirOrderAsASubscriberReads(round: Int) async throws {
        let (subject, reader) = await Self.subjectWithAFullReader()
        let senders = try await ParkedSenders(3...8, holding: round % 5, storage: subject.storage) {
            await subject.send(waitingForRoom: $0)
        }
        defer { senders.held.release() }  // if the test fails before it does: no task stays frozen
        let reading = Task { await reader.take(8) }
        try await senders.awaitAll()
        let received = await reading.value
        #expect(received == Array(1...8), "round \(round), sender #\(senders.heldIndex) held")
        await reader.leave()
    }

    // MARK: Completion

    @Test("passthrough: send after finish is ignored; a later subscriber gets nil at once")
    func passthroughSendAfterFinish() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(1)
        subject.finish()
        subject.send(2)
        await subject.send(waitingForRoom: 3)
        subject.finish()
        #expect(await a.drain().elements == [1])
        let late = await SubscriberTask.join { subject.makeAsyncIterator() }
        let drained = await late.drain()
        #expect(drained.elements.isEmpty)
        #expect(drained.failure == nil)
        #expect(subject.subscriberCount == 0)
    }

    @Test("passthrough: send and finish after fail are ignored; a later subscriber gets the error at once")
    func passthroughSendAfterFail() async {
        let subject = AsyncPassthroughSubject<Int, TestError>()
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(1)
        subject.fail(TestError.other(1))
        subject.send(2)
        subject.finish()
        subject.fail(TestError.other(2))
        let drained = await a.drain()
        #expect(drained.elements == [1])
        #expect(drained.failure == TestError.other(1))
        let late = await SubscriberTask.join { subject.makeAsyncIterator() }
        let lateDrained = await late.drain()
        #expect(lateDrained.elements.isEmpty)
        #expect(lateDrained.failure == TestError.other(1))
    }

    @Test(
        "current-value: after finish, sends are ignored, `value` keeps the last value, a later subscriber gets it then nil"
    )
    func currentValueAfterFinish() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0)
        subject.send(5)
        subject.finish()
        subject.send(6)
        subject.value = 7
        #expect(subject.value == 5)
        let late = await SubscriberTask.join { subject.makeAsyncIterator() }
        let drained = await late.drain()
        #expect(drained.elements == [5])
        #expect(drained.failure == nil)
    }

    @Test("current-value: after fail, a later subscriber gets the last value, then the error")
    func currentValueAfterFail() async {
        let subject = AsyncCurrentValueSubject<Int, TestError>(0)
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        subject.send(5)
        subject.fail(TestError.other(3))
        subject.send(6)
        #expect(subject.value == 5)
        let drained = await a.drain()
        #expect(drained.elements == [5], "bufferingNewest(1): 0 was replaced by 5")
        #expect(drained.failure == TestError.other(3))
        let late = await SubscriberTask.join { subject.makeAsyncIterator() }
        let lateDrained = await late.drain()
        #expect(lateDrained.elements == [5])
        #expect(lateDrained.failure == TestError.other(3))
    }

    @Test("a subscriber waiting in next() receives the terminal event")
    func waitingSubscriberGetsTerminal() async {
        let subject = AsyncPassthroughSubject<Int, TestError>()
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        a.request()
        await letOthersRun()
        subject.fail(TestError.other(9))
        let result = await a.response()
        #expect(result.map { r in if case .failure(let e) = r { e == TestError.other(9) } else { false } } == true)
    }

    // MARK: Per-subscriber policy, subscriberCount

    @Test("subject.buffering(.bufferingNewest(1)): a slow logger drops while the UI subscriber loses nothing")
    func perSubscriberOverride() async {
        let subject = AsyncPassthroughSubject<Int, Never>()  // .unbounded: the UI's policy
        let ui = await SubscriberTask.join { subject.makeAsyncIterator() }
        let logger = await SubscriberTask.join { subject.buffering(.bufferingNewest(1)).makeAsyncIterator() }
        #expect(subject.buffering(.bufferingNewest(1)).policy == .bufferingNewest(1))
        for value in 1...100 { subject.send(value) }  // neither reads meanwhile
        subject.finish()
        #expect(await logger.drain().elements == [100], "the logger kept only the newest")
        #expect(await ui.drain().elements == Array(1...100), "the UI lost nothing")
    }

    @Test("current-value: a per-subscriber .unbounded override keeps every value")
    func currentValueOverride() async {
        let subject = AsyncCurrentValueSubject<Int, Never>(0)  // .bufferingNewest(1)
        let all = await SubscriberTask.join { subject.buffering(.unbounded).makeAsyncIterator() }
        let latest = await SubscriberTask.join { subject.makeAsyncIterator() }
        for value in 1...5 { subject.send(value) }
        subject.finish()
        #expect(await all.drain().elements == [0, 1, 2, 3, 4, 5])
        #expect(await latest.drain().elements == [5])
    }

    @Test("subscriberCount follows joining, leaving, cancellation and reaching the end")
    func subscriberCount() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        #expect(subject.subscriberCount == 0)
        let a = await SubscriberTask.join { subject.makeAsyncIterator() }
        #expect(subject.subscriberCount == 1)
        let b = await SubscriberTask.join { subject.makeAsyncIterator() }
        let c = await SubscriberTask.join { subject.buffering(.bufferingOldest(1)).makeAsyncIterator() }
        #expect(subject.subscriberCount == 3)
        await a.leave()
        #expect(subject.subscriberCount == 2)
        b.request()  // waiting in next()
        await b.cancel()
        #expect(subject.subscriberCount == 1)
        subject.finish()
        _ = await c.drain()
        #expect(subject.subscriberCount == 0, "reaching the end leaves")

        let current = AsyncCurrentValueSubject<Int, Never>(0)
        let d = await SubscriberTask.join { current.makeAsyncIterator() }
        #expect(current.subscriberCount == 1)
        await d.leave()
        #expect(current.subscriberCount == 0)
    }
}
