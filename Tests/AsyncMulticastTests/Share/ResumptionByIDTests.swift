// Resuming after an element's own id: `subscribe(after:id:buffering:)` gives the history's
// elements after the id, then the live ones, exactly once each; when the history no longer
// reaches back to the id, a gap from that id to the next element's first. Ids come from the
// elements (a database's row ids here: every tenth number), so they survive an upstream
// restart and are the same on every instance; they need not be contiguous. The cases it
// shares with resuming by position run in ResumptionTests.swift, once for each; here, what
// only ids have: ids never sent, and ids before the first element.

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
    @Test("resuming after an id never sent: the elements whose ids come after it, nothing lost")
    func anIdNeverSentResumesAfterTheIdsBelowIt() async {
        let subject = rows(keeping: 4, sent: 10)  // 70, 80, 90, 100 kept
        var between = subject.subscribe(after: 75, id: { $0 }).makeAsyncIterator()
        subject.send(110)
        subject.finish()
        #expect(
            await take(10, from: &between) == [
                .element(80, position: 80), .element(90, position: 90), .element(100, position: 100),
                .element(110, position: 110),
            ], "70 is kept, so nothing after 75 was lost")
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
}
