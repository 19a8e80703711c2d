// Resuming after an element's own id: `subscribe(after:id:buffering:)` gives the history's
// elements after the id, then the live ones, exactly once each; when the history no longer
// reaches back to the id, a gap from that id to the next element's first. Ids come from the
// elements (a database's row ids here: every tenth number), so they survive an upstream
// restart and are the same on every instance; they need not be contiguous.

import Testing

@testable import AsyncMulticast

/// A subject keeping its latest `count` rows, after rows 10, 20, …, `10 * sent` were sent.
private func rows(keeping count: Int, sent: Int) -> AsyncReplaySubject<Int, Never> {
    let subject = AsyncReplaySubject<Int, Never>(replay: count)
    for n in 1...sent { subject.send(10 * n) }
    return subject
}

@Suite("Resumption by id: subscribe(after:id:) resumes from the history by the elements' ids", .timeLimit(.minutes(2)))
struct ResumptionByIDTests {
    @Test("resuming within the history: the elements after the id, then the live ones, seamless")
    func resumeWithinTheHistoryHasAnExactSeam() async {
        let subject = rows(keeping: 4, sent: 10)  // 70, 80, 90, 100 kept
        var resumed = subject.subscribe(after: 80, id: { $0 }).makeAsyncIterator()
        var between = subject.subscribe(after: 75, id: { $0 }).makeAsyncIterator()  // an id never sent
        subject.send(110)
        subject.finish()
        #expect(
            await take(10, from: &resumed) == [
                .element(90, position: 90), .element(100, position: 100), .element(110, position: 110),
            ])
        #expect(
            await take(10, from: &between) == [
                .element(80, position: 80), .element(90, position: 90), .element(100, position: 100),
                .element(110, position: 110),
            ], "70 is kept, so nothing after 75 was lost")
    }

    @Test("resuming before the history: a gap from the id to the first element kept, then the rest")
    func resumePastTheHistoryReportsTheGapFirst() async {
        let subject = rows(keeping: 4, sent: 10)
        var late = subject.subscribe(after: 20, id: { $0 }).makeAsyncIterator()
        subject.send(110)
        subject.finish()
        #expect(
            await take(10, from: &late) == [
                .gap(after: 20, before: 70), .element(70, position: 70), .element(80, position: 80),
                .element(90, position: 90), .element(100, position: 100), .element(110, position: 110),
            ])
    }

    @Test("a history that holds everything since the first element: no gap, whatever the id")
    func completeHistoryHasNoGap() async {
        let subject = rows(keeping: 100, sent: 3)  // 10, 20, 30: nothing lost
        var resumed = subject.subscribe(after: 5, id: { $0 }).makeAsyncIterator()
        subject.finish()
        #expect(
            await take(10, from: &resumed) == [
                .element(10, position: 10), .element(20, position: 20), .element(30, position: 30),
            ])
    }

    @Test("without a history a resumption is a gap from the id to the next element, which may be empty")
    func noHistoryGivesAGapToTheNextElement() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        subject.send(10)  // nobody keeps it
        var resumed = subject.subscribe(after: 10, id: { $0 }).makeAsyncIterator()
        subject.send(20)
        subject.finish()
        #expect(
            await take(10, from: &resumed) == [.gap(after: 10, before: 20), .element(20, position: 20)],
            "the library cannot know that nothing came between 10 and 20: the store says")
    }

    @Test("a subscriber that knows no id joins as subscribe() does, replay included, and learns the ids")
    func nilJoinsWithTheReplay() async {
        let subject = rows(keeping: 2, sent: 5)  // 40, 50 kept
        var fresh = subject.subscribe(after: nil, id: { $0 }).makeAsyncIterator()
        subject.send(60)
        subject.finish()
        #expect(
            await take(10, from: &fresh) == [
                .element(40, position: 40), .element(50, position: 50), .element(60, position: 60),
            ])
    }

    @Test("a dropping policy's later drops are gaps between the ids around them")
    func droppedElementsAreGapsBetweenIds() async {
        let subject = rows(keeping: 1, sent: 1)  // 10 kept
        var newest = subject.subscribe(after: 10, id: { $0 }, buffering: .bufferingNewest(2)).makeAsyncIterator()
        for n in 2...6 { subject.send(10 * n) }  // it keeps 50 and 60
        subject.finish()
        #expect(
            await take(10, from: &newest) == [
                .gap(after: 10, before: 50), .element(50, position: 50), .element(60, position: 60),
            ])
    }

    @Test("ids survive an upstream restart: a client resumes by the id it saw in the previous run")
    func resumeAfterAnUpstreamRestart() async throws {
        let source = FedSource()
        let replayed = source.replay(3, buffering: .unbounded, replayExpiration: .seconds(Int64.max))
        let firstRun = reading(3, from: replayed.subscribe(after: nil, id: { $0 }))
        await source.control.waitForStart(of: 0)
        source.control.yield(10, 20, 30)
        #expect(await firstRun.value == [10, 20, 30].map { .element($0, position: $0) })
        _ = await source.control.waitForEnd()  // its subscriber left: the upstream stopped

        let resumed = reading(2, from: replayed.subscribe(after: 20, id: { $0 }))
        await source.control.waitForStart(of: 1)  // the resumed subscriber restarted it
        source.control.yield(40)
        #expect(await resumed.value == [.element(30, position: 30), .element(40, position: 40)])
    }

    @Test("a concurrent producer during resumptions by id: each resumer gets every id after its own once, in order")
    func resumeDuringConcurrentSendsLosesAndDuplicatesNothing() async throws {
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
                // Each resumes after an id already sent, some within the history, some before it.
                let after = 10 * Swift.max(0, sent.count - 1 - (index % 6) * 30)
                var events = subject.subscribe(after: after, id: { $0 }).makeAsyncIterator()
                var expected = after + 10
                var first = true
                while let event = await events.next() {
                    defer { first = false }
                    switch event {
                    case .gap(let gapAfter, let before):
                        guard first, gapAfter == after, before > expected else {
                            return "resumer after \(after): unexpected \(event), expecting \(expected)"
                        }
                        expected = before
                    case .element(let value, let id):
                        guard value == id, id == expected else {
                            return "resumer after \(after): \(value) with id \(id), expecting \(expected)"
                        }
                        expected += 10
                    case .evicted:
                        return "resumer after \(after): evicted"
                    }
                }
                return expected == 10 * total ? nil : "resumer after \(after): ended before \(expected)"
            }
        }
        await producer.value
        for resumer in resumers {
            let failure = try await withTimeout(seconds: 50) { await resumer.value }
            #expect(failure == nil, "\(failure ?? "")")
        }
    }
}
