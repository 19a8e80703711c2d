import AsyncAlgorithms
import AsyncMulticast
import Clocks
import Testing

/// swift-async-algorithms' operators on shared sequences (after `share()`) and on the
/// sequence a shared sequence iterates (before it): the elements arrive as the operator
/// promises, and the upstream runs stop once the operator's consumer is gone.
@Suite("swift-async-algorithms", .timeLimit(.minutes(2)))
struct AsyncAlgorithmsTests {
    @Test("share() resolves to AsyncMulticast's when AsyncAlgorithms, which has its own, is imported")
    func shareResolvesToAsyncMulticast() {
        let probe = UpstreamProbe()
        // Each line compiles only with AsyncMulticast's result type.
        let plain: AsyncShareSequence<Int, Never> = probe.sequence.share()
        let buffered: AsyncShareSequence<Int, Never> = probe.sequence.share(buffering: .bounded(1))
        #expect(plain.subscriberCount == 0)
        #expect(buffered.subscriberCount == 0)
        #expect(probe.runCount == 0, "AsyncMulticast's share() iterates nothing before a subscriber asks")
        // swift-async-algorithms' spelling still reaches its own operator, which differs: it
        // makes the base's iterator at once, and iterates that one for its whole life.
        _ = probe.sequence.share(bufferingPolicy: .bounded(1))
        #expect(probe.runCount == 1)
    }

    @Test("debounce after share(), on a TestClock: a quiet period emits, a burst keeps its last element")
    func debounceAfterShare() async {
        let clock = TestClock()
        let probe = UpstreamProbe()
        let shared = probe.sequence.share()
        let received = EventLog<Int>()
        let reader = Task {
            var elements: [Int] = []
            for await element in shared.debounce(for: .seconds(1), clock: clock) {
                elements.append(element)
                received.record(element)
            }
            return elements
        }
        // Debounce sleeps on the clock once it holds run 1's first element; only then does
        // advancing the clock mean "a quiet second after that element".
        await waitUntilSleeping(on: clock)
        await clock.advance(by: .seconds(1))
        await received.expect(1)

        // A burst at one instant (the clock does not move), then the end: debounce hands
        // over the burst's last element when its upstream finishes.
        probe.send(11, toRun: 1)
        probe.send(12, toRun: 1)
        probe.send(13, toRun: 1)
        probe.finish(run: 1)
        #expect(await reader.waitValue() == [1, 13])
    }

    @Test("cancelling a debounce consumer stops the shared upstream")
    func debounceConsumerCancelled() async {
        let probe = UpstreamProbe()
        let shared = probe.sequence.share()
        let consumer = Task {
            for await _ in shared.debounce(for: .seconds(3600), clock: TestClock()) {}
        }
        await probe.log.expect(.started(run: 1))
        consumer.cancel()
        await probe.log.expect(.ended(run: 1))
        #expect(shared.subscriberCount == 0)
    }

    @Test("merge of two shared sequences: every element of both, and both upstreams stop after")
    func mergeOfShared() async {
        let left = UpstreamProbe(firstElement: 100)
        let right = UpstreamProbe(firstElement: 200)
        let leftShared = left.sequence.share()
        let rightShared = right.sequence.share()
        do {
            var merged = merge(leftShared, rightShared).makeAsyncIterator()
            var alsoLeft = leftShared.makeAsyncIterator()  // a second subscriber of one side
            let firsts: Set = [await merged.next(), await merged.next()]
            #expect(firsts == [101, 201])
            #expect(await alsoLeft.next() == 101)
            #expect(left.send(102, toRun: 1))
            #expect(await merged.next() == 102)
            #expect(await alsoLeft.next() == 102)
            #expect(right.send(202, toRun: 1))
            #expect(await merged.next() == 202)
        }
        // The merged iterator and the other subscriber are gone: merge cancels its tasks, so
        // each shared sequence loses its last subscriber.
        await left.log.expect(.ended(run: 1))
        await right.log.expect(.ended(run: 1))
        #expect(left.runCount == 1 && right.runCount == 1)
    }

    @Test("combineLatest of two shared sequences pairs the latest of each, and both upstreams stop after")
    func combineLatestOfShared() async {
        let left = UpstreamProbe(firstElement: 100)
        let right = UpstreamProbe(firstElement: 200)
        let leftShared = left.sequence.replay(1)
        let rightShared = right.sequence.replay(1)
        do {
            var combined = combineLatest(leftShared, rightShared).makeAsyncIterator()
            #expect(await combined.next().map(Pair.init) == Pair(101, 201))
            left.send(102, toRun: 1)
            #expect(await combined.next().map(Pair.init) == Pair(102, 201))
            right.send(202, toRun: 1)
            #expect(await combined.next().map(Pair.init) == Pair(102, 202))
            // A late subscriber of one side is replayed its latest, as combineLatest saw it.
            var late = rightShared.makeAsyncIterator()
            #expect(await late.next() == 202)
        }
        await left.log.expect(.ended(run: 1))
        await right.log.expect(.ended(run: 1))
    }

    @Test("merge before share(): one merged run shared by two subscribers, both upstreams stop after")
    func mergeThenShare() async {
        let left = UpstreamProbe(firstElement: 100)
        let right = UpstreamProbe(firstElement: 200)
        let shared = merge(left.sequence, right.sequence).share()
        do {
            var first = shared.makeAsyncIterator()
            var second = shared.makeAsyncIterator()
            let firstReads: Set = [await first.next(), await first.next()]
            let secondReads: Set = [await second.next(), await second.next()]
            #expect(firstReads == [101, 201])
            #expect(secondReads == [101, 201])
            left.send(102, toRun: 1)
            #expect(await first.next() == 102)
            #expect(await second.next() == 102)
        }
        await left.log.expect(.ended(run: 1))
        await right.log.expect(.ended(run: 1))
        #expect(left.runCount == 1 && right.runCount == 1)
    }

    @Test("chunks and removeDuplicates before share(): every subscriber gets the same chunks")
    func chunksAndRemoveDuplicatesThenShare() async {
        let probe = UpstreamProbe()
        let shared = probe.sequence.removeDuplicates().chunks(ofCount: 2).share()
        let first = shared.makeAsyncIterator()
        var second = shared.makeAsyncIterator()
        let reader = Task {
            var first = first
            var chunks: [[Int]] = []
            while let chunk = await first.next() { chunks.append(chunk) }
            return chunks
        }
        // Both joined above; the reader's first demand starts run 1.
        await probe.log.expect(.started(run: 1))
        for element in [1, 2, 2, 3, 3, 3, 4, 5] { probe.send(element, toRun: 1) }
        probe.finish(run: 1)
        var secondChunks: [[Int]] = []
        while let chunk = await second.next() { secondChunks.append(chunk) }
        // Run 1 starts with 1, so the 1 sent next is a duplicate too.
        #expect(secondChunks == [[1, 2], [3, 4], [5]])
        #expect(await reader.waitValue() == secondChunks)
        var late = shared.makeAsyncIterator()
        #expect(await late.next() == nil, "a finished shared sequence stays finished")
        #expect(probe.runCount == 1)
    }
}

/// A pair that can be compared, as `combineLatest`'s tuples cannot.
private struct Pair: Equatable {
    let left: Int
    let right: Int

    init(_ left: Int, _ right: Int) {
        self.left = left
        self.right = right
    }

    init(_ pair: (Int, Int)) {
        self.init(pair.0, pair.1)
    }
}

/// Waits until something sleeps on `clock`. swift-clocks 1.1.1's `TestClock` tells whether
/// any sleep is pending only through `checkSuspension()` throwing, so this checks that
/// condition until it holds, under a hang guard.
private func waitUntilSleeping(
    on clock: TestClock<Duration>, sourceLocation: SourceLocation = #_sourceLocation
) async {
    let asleep = await withHangGuard { () -> Bool in
        while (try? await clock.checkSuspension()) != nil {
            guard !Task.isCancelled else { return false }
        }
        return true
    }
    if asleep != true { Issue.record("nothing slept on the clock", sourceLocation: sourceLocation) }
}
