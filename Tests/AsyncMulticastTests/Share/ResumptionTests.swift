// Resuming after a position: `subscribe(after:buffering:)` gives the history after the
// position, then the live elements, exactly once each; or, when the history no longer reaches
// back, a gap with its bounds first. Positions are the library's numbering, per sequence,
// which an upstream restart does not reset. (The decision itself is model-tested in
// Engine/ResumptionModelTests.swift.)

import Testing

@testable import AsyncMulticast

/// A subject keeping its latest `count` elements: the history a resumption reads.
private func replaySubject(_ count: Int) -> AsyncReplaySubject<Int, Never> {
    AsyncReplaySubject(replay: count)
}

@Suite("Resumption: subscribe(after:) resumes from the history, or reports the gap first", .timeLimit(.minutes(2)))
struct ResumptionTests {
    @Test("resuming within the history: the elements after the position, then the live ones, seamless")
    func resumeWithinTheHistoryHasAnExactSeam() async {
        let subject = replaySubject(4)
        for n in 0...9 { subject.send(n) }  // positions 0...9; 6...9 kept
        var resumed = subject.subscribe(after: 7).makeAsyncIterator()
        subject.send(10)
        subject.send(11)
        subject.finish()
        #expect(
            await take(10, from: &resumed) == [
                .element(8, position: 8), .element(9, position: 9), .element(10, position: 10),
                .element(11, position: 11),
            ])
    }

    @Test("resuming after the newest element: only the live ones, without a gap")
    func resumeAtTheNewestElementGetsOnlyLiveOnes() async {
        let subject = replaySubject(4)
        for n in 0...9 { subject.send(n) }
        var atTail = subject.subscribe(after: 9).makeAsyncIterator()
        var ahead = subject.subscribe(after: 1_000).makeAsyncIterator()  // another process's number
        subject.send(10)
        subject.finish()
        #expect(await take(10, from: &atTail) == [.element(10, position: 10)])
        #expect(await take(10, from: &ahead) == [.element(10, position: 10)])
    }

    @Test("resuming before the history: the gap with its bounds first, then the history and the live ones")
    func resumePastTheHistoryReportsTheGapFirst() async {
        let subject = replaySubject(4)
        for n in 0...9 { subject.send(n) }
        var late = subject.subscribe(after: 2).makeAsyncIterator()
        var fromScratch = subject.subscribe(after: -1).makeAsyncIterator()
        subject.send(10)
        subject.finish()
        let rest: [PositionedEvent<Int, Int>] = (6...10).map { .element($0, position: $0) }
        #expect(await take(20, from: &late) == [.gap(after: 2, before: 6)] + rest)
        #expect(await take(20, from: &fromScratch) == [.gap(after: -1, before: 6)] + rest)
    }

    @Test("without a history (share(), a passthrough subject) a resumption is a gap up to the next element")
    func resumeWithoutAHistoryIsAGapToTheTail() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        for n in 0...4 { subject.send(n) }  // to nobody, but numbered
        var resumed = subject.subscribe(after: 1).makeAsyncIterator()
        subject.send(5)
        subject.finish()
        #expect(await take(10, from: &resumed) == [.gap(after: 1, before: 5), .element(5, position: 5)])
    }

    @Test("a subscriber that knows no position joins as subscribe() does, replay included, and learns positions")
    func joiningWithoutAPositionNumbersTheReplay() async {
        let subject = replaySubject(2)
        for n in 0...4 { subject.send(n) }
        var fresh = subject.subscribe(after: nil).makeAsyncIterator()
        subject.finish()
        #expect(await take(10, from: &fresh) == [.element(3, position: 3), .element(4, position: 4)])
    }

    @Test("a dropping policy holds only its newest: the rest of the history is in the gap; later drops are gaps too")
    func aDroppingPolicyWidensTheGapAndReportsLaterDropsAsGaps() async {
        let subject = replaySubject(8)
        for n in 0...9 { subject.send(n) }  // 2...9 kept
        var newest = subject.subscribe(after: 3, buffering: .bufferingNewest(2)).makeAsyncIterator()
        #expect(
            await take(3, from: &newest) == [
                .gap(after: 3, before: 8), .element(8, position: 8), .element(9, position: 9),
            ])
        for n in 10...14 { subject.send(n) }  // it holds 13, 14
        subject.finish()
        #expect(
            await take(10, from: &newest) == [
                .gap(after: 9, before: 13), .element(13, position: 13), .element(14, position: 14),
            ]
        )
    }

    @Test("positions survive an upstream restart: the history kept across it resumes seamlessly")
    func resumeAfterAnUpstreamRestartKeepsTheNumbering() async throws {
        let source = FedSource()
        let replayed = source.replay(3, buffering: .unbounded, replayExpiration: .seconds(Int64.max))
        let firstRun = reading(5, from: replayed.subscribe(after: nil))
        await source.control.waitForStart(of: 0)
        source.control.yield(10, 11, 12, 13, 14)
        #expect(await firstRun.value == (0...4).map { .element($0 + 10, position: $0) })
        _ = await source.control.waitForEnd()  // its subscriber left: the upstream stopped

        let resumed = reading(3, from: replayed.subscribe(after: 2))  // 2...4 kept
        await source.control.waitForStart(of: 1)  // the resumed subscriber restarted it
        source.control.yield(20)
        #expect(
            await resumed.value == [.element(13, position: 3), .element(14, position: 4), .element(20, position: 5)],
            "the restarted upstream's first element is numbered after the previous run's")
    }

    @Test("positions survive an upstream restart whose replay expired: the expired elements are the gap")
    func resumeAfterAnUpstreamRestartWithAnExpiredHistoryReportsTheGap() async throws {
        let source = FedSource()
        let replayed = source.replay(3, buffering: .unbounded)  // expires when the upstream stops
        let firstRun = reading(5, from: replayed.subscribe(after: nil))
        await source.control.waitForStart(of: 0)
        source.control.yield(10, 11, 12, 13, 14)
        #expect(await firstRun.value == (0...4).map { .element($0 + 10, position: $0) })
        _ = await source.control.waitForEnd()

        let resumed = reading(2, from: replayed.subscribe(after: 2))
        await source.control.waitForStart(of: 1)
        source.control.yield(20)
        #expect(await resumed.value == [.gap(after: 2, before: 5), .element(20, position: 5)])
    }

    @Test("a concurrent producer during resumptions: each resumer gets every position once, in order, after its gap")
    func resumeDuringConcurrentSendsLosesAndDuplicatesNothing() async throws {
        let total = 3_000
        let subject = replaySubject(64)
        let sent = Tally()
        let producer = Task {
            for n in 0..<total {
                subject.send(n)  // element n is at position n
                sent.add()
                if n % 16 == 0 { await Task.yield() }
            }
            subject.finish()
        }
        let resumers = (0..<24).map { index in
            Task { () -> String? in
                // Each resumes after a position already sent, some within the history, some before it.
                let after = Swift.max(-1, sent.count - 1 - (index % 6) * 30)
                var events = subject.subscribe(after: after).makeAsyncIterator()
                var expected = after + 1
                var first = true
                while let event = await events.next() {
                    defer { first = false }
                    switch event {
                    case .gap(let gapAfter, let before):
                        guard first, gapAfter == after, before > after + 1 else {
                            return "resumer after \(after): unexpected \(event), expecting position \(expected)"
                        }
                        expected = before
                    case .element(let value, let position):
                        guard value == position, position == expected else {
                            return "resumer after \(after): \(value) at \(position), expecting position \(expected)"
                        }
                        expected += 1
                    case .evicted:
                        return "resumer after \(after): evicted"
                    }
                }
                return expected == total ? nil : "resumer after \(after): ended before \(expected) of \(total)"
            }
        }
        await producer.value
        for resumer in resumers {
            let failure = try await withTimeout(seconds: 50) { await resumer.value }
            #expect(failure == nil, "\(failure ?? "")")
        }
    }
}
