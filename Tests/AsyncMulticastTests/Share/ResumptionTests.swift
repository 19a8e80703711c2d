// Resuming after the last element seen: `subscribe(after:buffering:)` by the library's
// position, `subscribe(after:id:buffering:)` (ResumptionByIDTests.swift) by the element's own id.
// Both give the history after it, then the live elements, exactly once each; or, when the
// history no longer reaches back, a gap with its bounds first. The cases they share run once
// for each key (`ResumptionKey`, Support/Resumptions.swift). Positions are the library's
// numbering, per sequence, which an upstream restart does not reset. (The decision itself is
// model-tested in Engine/ResumptionModelTests.swift.)

import Testing

@testable import AsyncMulticast

/// A subject keeping its latest `count` elements, after the elements sent 0-th to `last`-th
/// (10 × n each: `ResumptionKey`'s numbering) were sent.
private func replaySubject(keeping count: Int, sentUpTo last: Int) -> AsyncReplaySubject<Int, Never> {
    let subject = AsyncReplaySubject<Int, Never>(replay: count)
    for n in 0...last { subject.send(10 * n) }
    return subject
}

@Suite(
    "Resumption: subscribe(after:) and subscribe(after:id:) resume from the history, or report the gap first",
    .timeLimit(.minutes(2)))
struct ResumptionTests {
    // MARK: - By position or by id

    @Test(
        "resuming within the history: the elements after the key, then the live ones, seamless",
        arguments: ResumptionKey.allCases)
    func resumeWithinTheHistoryHasAnExactSeam(_ key: ResumptionKey) async {
        let subject = replaySubject(keeping: 4, sentUpTo: 9)  // 6...9 kept
        var resumed = key.subscribe(subject, after: 7).makeAsyncIterator()
        subject.send(100)
        subject.send(110)
        subject.finish()
        #expect(await take(10, from: &resumed) == key.elements(8...11))
    }

    @Test(
        "resuming before the history: the gap with its bounds first, then the history and the live ones",
        arguments: ResumptionKey.allCases)
    func resumePastTheHistoryReportsTheGapFirst(_ key: ResumptionKey) async {
        let subject = replaySubject(keeping: 4, sentUpTo: 9)
        var late = key.subscribe(subject, after: 2).makeAsyncIterator()
        var fromScratch = key.subscribe(subject, after: -1).makeAsyncIterator()  // everything wanted
        subject.send(100)
        subject.finish()
        #expect(await take(20, from: &late) == [key.gap(after: 2, before: 6)] + key.elements(6...10))
        #expect(await take(20, from: &fromScratch) == [key.gap(after: -1, before: 6)] + key.elements(6...10))
    }

    @Test(
        "without a history (share(), a passthrough subject) a resumption is a gap up to the next element",
        arguments: ResumptionKey.allCases)
    func resumeWithoutAHistoryIsAGapToTheNextElement(_ key: ResumptionKey) async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        for n in 0...4 { subject.send(10 * n) }  // to nobody, but numbered
        var resumed = key.subscribe(subject, after: 1).makeAsyncIterator()
        subject.send(50)
        subject.finish()
        #expect(
            await take(10, from: &resumed) == [key.gap(after: 1, before: 5), key.element(5)],
            "the library cannot know whether anything came between: the store says")
    }

    @Test(
        "a subscriber that knows no key joins as subscribe() does, replay included, and learns the keys",
        arguments: ResumptionKey.allCases)
    func joiningWithoutAKeyNumbersTheReplay(_ key: ResumptionKey) async {
        let subject = replaySubject(keeping: 2, sentUpTo: 4)
        var fresh = key.subscribe(subject, after: nil).makeAsyncIterator()
        subject.send(50)
        subject.finish()
        #expect(await take(10, from: &fresh) == key.elements(3...5))
    }

    @Test(
        "a dropping policy holds only its newest: the rest of the history is in the gap; later drops are gaps too",
        arguments: ResumptionKey.allCases)
    func aDroppingPolicyWidensTheGapAndReportsLaterDropsAsGaps(_ key: ResumptionKey) async {
        let subject = replaySubject(keeping: 8, sentUpTo: 9)  // 2...9 kept
        var newest = key.subscribe(subject, after: 3, buffering: .bufferingNewest(2)).makeAsyncIterator()
        #expect(await take(3, from: &newest) == [key.gap(after: 3, before: 8)] + key.elements(8...9))
        for n in 10...14 { subject.send(10 * n) }  // it holds 13, 14
        subject.finish()
        #expect(await take(10, from: &newest) == [key.gap(after: 9, before: 13)] + key.elements(13...14))
    }

    @Test(
        "keys survive an upstream restart: a client resumes by the key it saw in the previous run, seamlessly",
        arguments: ResumptionKey.allCases)
    func resumeAfterAnUpstreamRestart(_ key: ResumptionKey) async throws {
        let source = FedSource()
        let replayed = source.replay(3, buffering: .unbounded, replayExpiration: .seconds(Int64.max))
        let firstRun = reading(5, from: key.subscribe(replayed, after: nil))
        await source.control.waitForStart(of: 0)
        source.control.yield(0, 10, 20, 30, 40)
        #expect(await firstRun.value == key.elements(0...4))
        _ = await source.control.waitForEnd()  // its subscriber left: the upstream stopped

        let resumed = reading(3, from: key.subscribe(replayed, after: 2))  // 2...4 kept
        await source.control.waitForStart(of: 1)  // the resumed subscriber restarted it
        source.control.yield(50)
        #expect(
            await resumed.value == key.elements(3...5),
            "the restarted upstream's first element is numbered after the previous run's")
    }

    @Test(
        "a concurrent producer during resumptions: each resumer gets every element after its key once, in order, after its gap",
        arguments: ResumptionKey.allCases)
    func resumeDuringConcurrentSendsLosesAndDuplicatesNothing(_ key: ResumptionKey) async throws {
        let total = 3_000
        let subject = AsyncReplaySubject<Int, Never>(replay: 64)
        let sent = Tally()
        let producer = Task {
            for n in 0..<total {
                subject.send(10 * n)
                sent.add()
                if n % 16 == 0 { await Task.yield() }
            }
            subject.finish()
        }
        let resumers = (0..<24).map { index in
            Task { () -> String? in
                // Each resumes after an element already sent, some within the history, some before it.
                let after = Swift.max(-1, sent.count - 1 - (index % 6) * 30)
                var events = key.subscribe(subject, after: after).makeAsyncIterator()
                var expected = after + 1  // the number of the element expected next
                var first = true
                while let event = await events.next(isolation: nil) {
                    defer { first = false }
                    switch event {
                    case .gap(let gapAfter, let before):
                        guard first, gapAfter == key.key(after), before > key.key(expected) else {
                            return "resumer after \(after): unexpected \(event), expecting \(key.element(expected))"
                        }
                        expected = key.number(ofKey: before)
                    case .element:
                        guard event == key.element(expected) else {
                            return "resumer after \(after): \(event), expecting \(key.element(expected))"
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

    // MARK: - By position only

    @Test("resuming after the newest element: only the live ones, without a gap")
    func resumeAtTheNewestElementGetsOnlyLiveOnes() async {
        let subject = replaySubject(keeping: 4, sentUpTo: 9)
        var atTail = subject.subscribe(after: 9).makeAsyncIterator()
        var ahead = subject.subscribe(after: 1_000).makeAsyncIterator()  // another process's number
        subject.send(100)
        subject.finish()
        #expect(await take(10, from: &atTail) == [.element(100, position: 10)])
        #expect(await take(10, from: &ahead) == [.element(100, position: 10)])
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
}
