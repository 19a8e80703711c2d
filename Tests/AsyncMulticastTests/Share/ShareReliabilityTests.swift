// Reliability of share() and replay(_:): behaviour at the edges of the public API, with
// real tasks.
//
// - Extreme keep-alive windows (the largest `Duration`, `.seconds(Int64.max)`, the longest
//   timed window, `.nanoseconds(1)` and `.zero`) work as documented.
// - Extreme arguments (`Int.max` limits on `share()`, and on `multicast()` beside it;
//   `replay(Int.max)`) work as documented.
//
// Every test body runs under `withTimeout`, so a hang is reported as a failure.

import Testing

@testable import AsyncMulticast

@Suite("Reliability: share and replay", .timeLimit(.minutes(3)))
struct ShareReliabilityTests {
    // MARK: - keepAlive at the extremes

    @Test(
        "share(keepAlive: .seconds(Int64.max)): leaving opens the window without trapping, and a new subscriber continues the same iteration"
    )
    func hugeKeepAliveInSeconds() async throws {
        try await withTimeout(seconds: 150) {
            try await Self.checkKeepAliveContinues(.seconds(Int64.max), timed: false)
        }
    }

    @Test(
        "share(keepAlive:) with the largest Duration: leaving opens the window without trapping, and a new subscriber continues the same iteration"
    )
    func largestDurationKeepAlive() async throws {
        try await withTimeout(seconds: 150) {
            try await Self.checkKeepAliveContinues(
                Duration(secondsComponent: .max, attosecondsComponent: 999_999_999_999_999_999), timed: false)
        }
    }

    @Test(
        "share(keepAlive:) with the longest timed window: the timer sleeps a day at most on the real clock, and a new subscriber continues the same iteration"
    )
    func longestTimedKeepAlive() async throws {
        try await withTimeout(seconds: 150) {
            try await Self.checkKeepAliveContinues(
                MulticastStateMachine<Int, Never>.longestWindow - .nanoseconds(1), timed: true)
        }
    }

    /// One subscriber starts the upstream, reads an element and leaves; if the window is
    /// `timed`, the keep-alive timer sleeps on the real clock toward the extreme deadline,
    /// else (a window as long as forever) there is no timer; a new subscriber must continue
    /// the same base iteration.
    private static func checkKeepAliveContinues(
        _ keepAlive: Duration, timed: Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let relay = Relay()
        let clock = ObservedContinuousClock()
        let shared = relay.share(keepAlive: keepAlive, clock: clock)
        let first = SubscriberBox(shared.makeAsyncIterator())
        let firstRead = first.startNext()
        try await waitUntil("the upstream to start", sourceLocation: sourceLocation) { relay.iterations == 1 }
        relay.yield(1, to: 0)
        #expect(await firstRead.value == 1, sourceLocation: sourceLocation)
        first.release()
        #expect(shared.subscriberCount == 0, sourceLocation: sourceLocation)
        #expect(shared.storage.isLingering, "the keep-alive window is open", sourceLocation: sourceLocation)

        if timed {
            // The timer task computes its deadline and asks the real clock to sleep until it
            // (a day at most at once): the step that used to trap.
            let sleep = await clock.sleeps.next("the keep-alive timer's sleep", sourceLocation: sourceLocation)
            #expect(
                sleep.map { $0 > .seconds(86_000) && $0 <= .seconds(86_400) } == true,
                "a day at most: \(String(describing: sleep))", sourceLocation: sourceLocation)
        } else {
            #expect(
                shared.storage.state.withLock { $0.timerTask } == nil, "a window as long as forever is not timed",
                sourceLocation: sourceLocation)
        }
        await letOthersRun()

        let second = SubscriberBox(shared.makeAsyncIterator())
        relay.yield(2, to: 0)
        #expect(await second.next() == 2, "the same iteration goes on", sourceLocation: sourceLocation)
        #expect(relay.iterations == 1, "no restart inside the window", sourceLocation: sourceLocation)
        second.release()
        // End the upstream so that nothing lingers after the test.
        relay.finish(0)
        try await waitUntil("the upstream to end", sourceLocation: sourceLocation) {
            shared.storage.upstreamState == .terminated(.finished)
        }
    }

    @Test(
        "share(keepAlive:) with .nanoseconds(1) or .zero: after the last subscriber left and the upstream stopped, a new subscriber restarts it",
        arguments: [Duration.nanoseconds(1), .zero])
    func tinyKeepAliveRestarts(keepAlive: Duration) async throws {
        try await withTimeout(seconds: 150) {
            let relay = Relay()
            let shared = relay.share(keepAlive: keepAlive)
            let first = SubscriberBox(shared.makeAsyncIterator())
            let firstRead = first.startNext()
            try await waitUntil("the upstream to start") { relay.iterations == 1 }
            relay.yield(1, to: 0)
            #expect(await firstRead.value == 1)
            first.release()
            try await waitUntil("the upstream to stop") { shared.storage.upstreamState == .idle }

            let second = SubscriberBox(shared.makeAsyncIterator())
            let secondRead = second.startNext()
            try await waitUntil("the upstream to restart") { relay.iterations == 2 }
            relay.yield(7, to: 1)
            #expect(await secondRead.value == 7, "the new iteration's element")
            second.release()
            try await waitUntil("the upstream to stop again") { shared.storage.upstreamState == .idle }
            #expect(relay.iterations == 2)
        }
    }

    // MARK: - Extreme arguments

    @Test(
        "share() and multicast() with an Int.max limit (policy or view) deliver the whole base in order",
        arguments: SharedBufferingPolicy.effectivelyUnbounded)
    func sharedSequencesWithExtremeLimits(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 150) {
            let values = Array(0..<500)
            let shared = Counter(limit: 500).share(buffering: policy)
            let sharedView = Counter(limit: 500).share().buffering(policy)
            for sequence in [AnyIterable(shared), AnyIterable(sharedView)] {
                var iterator = sequence.make()
                let received = await iterator.readAll()
                #expect(received == values, "share, \(policy)")
            }

            let multicast = Counter(limit: 500).multicast(buffering: policy)
            var a = multicast.makeAsyncIterator()
            var b = multicast.buffering(policy).makeAsyncIterator()
            multicast.connect()
            let receivedA = await a.readAll()
            let receivedB = await b.readAll()
            #expect(receivedA == values, "multicast, \(policy)")
            #expect(receivedB == values, "multicast view, \(policy)")
        }
    }

    @Test(
        "replay(Int.max): a late subscriber receives everything produced so far, in order, then the live elements; after the end, everything then nil",
        arguments: [SharedBufferingPolicy.bounded(64)] + SharedBufferingPolicy.effectivelyUnbounded)
    func replayEverything(policy: SharedBufferingPolicy) async throws {
        try await withTimeout(seconds: 150) {
            let relay = Relay()
            let replayed = relay.replay(Int.max, buffering: policy)
            let early = SubscriberBox(replayed.makeAsyncIterator())
            let firstRead = early.startNext()
            try await waitUntil("the upstream to start") { relay.iterations == 1 }
            for value in 0..<10 { relay.yield(value, to: 0) }
            var earlyReceived: [Int] = []
            if let element = await firstRead.value { earlyReceived.append(element) }
            while earlyReceived.count < 10, let element = await early.next() { earlyReceived.append(element) }
            #expect(earlyReceived == Array(0..<10))

            let late = SubscriberBox(replayed.makeAsyncIterator())
            var lateReceived: [Int] = []
            for _ in 0..<10 {
                guard let element = await late.next() else { break }
                lateReceived.append(element)
            }
            #expect(lateReceived == Array(0..<10), "everything produced so far")

            for value in 10..<15 { relay.yield(value, to: 0) }
            relay.finish(0)
            while let element = await early.next() { earlyReceived.append(element) }
            while let element = await late.next() { lateReceived.append(element) }
            #expect(earlyReceived == Array(0..<15))
            #expect(lateReceived == Array(0..<15))

            var afterEnd = replayed.makeAsyncIterator()
            let afterEndReceived = await afterEnd.readAll()
            #expect(afterEndReceived == Array(0..<15), "the whole history, then nil")
            #expect(relay.iterations == 1)
            #expect(replayed.subscriberCount == 0)
        }
    }
}

// MARK: - Helpers

/// `ContinuousClock`, reporting the length of each sleep before it starts: shows that the
/// keep-alive timer sleeps on the real clock, without waiting for anything.
private struct ObservedContinuousClock: Clock {
    let base = ContinuousClock()
    /// The length of each sleep, from the moment it was asked for.
    let sleeps = Signal<Duration>()

    var now: ContinuousClock.Instant { self.base.now }
    var minimumResolution: Duration { self.base.minimumResolution }

    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
        self.sleeps.send(self.base.now.duration(to: deadline))
        try await self.base.sleep(until: deadline, tolerance: tolerance)
    }
}

/// Makes iterators of a shared sequence or of a view, so both can be checked in one loop.
private struct AnyIterable: Sendable {
    let make: @Sendable () -> SharedIterator<Int, Never>

    init(_ shared: AsyncShareSequence<Int, Never>) { self.make = { shared.makeAsyncIterator() } }
    init(_ view: AsyncSharedView<Int, Never>) { self.make = { view.makeAsyncIterator() } }
}

extension MulticastStorage {
    /// Whether the keep-alive window is open (no subscriber, the upstream still running).
    fileprivate var isLingering: Bool {
        if case .lingering = self.upstreamState { return true }
        return false
    }
}
