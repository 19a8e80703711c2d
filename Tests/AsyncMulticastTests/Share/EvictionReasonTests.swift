// Why a subscriber was evicted, and how far behind it was (`SubscriberEviction`): the same
// value from every place that tells it (`waitForEviction()`, the `.evicted` event,
// `SubscriberEvictedError`), for the hard limit and the soft limit, on the producer's pass and
// on the soft deadline's timer, for groups evicted together at different distances, and with
// a high-water mark above the backlog.
//
// Time is a `ManualClock`; order comes from gates (the clock's sleepers, stored watchers).

import Testing

@testable import AsyncMulticast

@Suite("Evictions say why and how far behind", .timeLimit(.minutes(2)))
struct EvictionReasonTests {
    @Test("a hard limit: the watcher, the event and the error carry the same eviction")
    func hardLimitEverywhere() async throws {
        let subject = AsyncPassthroughSubject<Int, any Error>(buffering: .evicting(5))
        let watched = subject.subscribe()
        var events = subject.events().makeAsyncIterator()
        var plain = subject.makeAsyncIterator()
        let watcher = Task { await watched.waitForEviction() }
        try await waitUntil("the watcher is stored") { subject.storage.evictionWatcherCount == 1 }
        for n in 1...5 { subject.send(n) }
        #expect(watched.backlog == SubscriberBacklog(count: 5, highWaterMark: 5), "at the limit: kept")
        subject.send(6)

        let expected = SubscriberEviction(reason: .hardLimit, backlog: 5, highWaterMark: 5)
        #expect(await watcher.value == expected, "told at the eviction, before anyone read")
        #expect(try await events.next() == .evicted(expected))
        do {
            _ = try await plain.next()
            Issue.record("an evicted subscriber's next element")
        } catch let error as SubscriberEvictedError {
            #expect(error.eviction == expected)
            #expect("\(error)" == "SubscriberEvictedError: evicted \(expected)")
        }
        #expect(await watched.waitForEviction() == expected, "a late watcher gets it too")
    }

    @Test("an iteration that learnt its eviction leaves; the subscription still answers with it")
    func rememberedAfterTheIterationLeft() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))
        let subscription = subject.subscribe()
        for n in 1...3 { subject.send(n) }
        var events = subscription.events.makeAsyncIterator()
        #expect(await events.next() == .evicted(.hardLimit(2)))
        #expect(subject.subscriberCount == 0)
        #expect(subscription.backlog == nil, "an evicted subscriber holds nothing")
        #expect(await subscription.waitForEviction() == .hardLimit(2))
    }

    @Test("an iterator released before it learned its eviction: waitForEviction() still answers with it")
    func releasedBeforeLearning() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(2))
        let subscription = subject.subscribe()
        do {
            // Taken, then released without reading: it leaves as any released iterator does.
            let iterator = subscription.makeAsyncIterator()
            for n in 1...3 { subject.send(n) }
            _ = iterator
        }
        #expect(subject.storage.departedEvictionCount == 1)
        #expect(await subscription.waitForEviction() == .hardLimit(2))
        #expect(subject.storage.invariantViolation == nil)
        // A new subscriber takes its place: the departed eviction goes with the old slot.
        let next = subject.subscribe()
        #expect(subject.storage.departedEvictionCount == 0)
        #expect(await subscription.waitForEviction() == nil, "forgotten once its place was taken")
        #expect(next.backlog == SubscriberBacklog(count: 0, highWaterMark: 0))
    }

    @Test("several policies on one subject: each lane's hard limit, on the producer's general pass")
    func hardLimitsOfSeveralLanes() async {
        let subject = AsyncPassthroughSubject<Int, Never>()
        var small = subject.events(buffering: .evicting(2)).makeAsyncIterator()
        var large = subject.events(buffering: .evicting(4)).makeAsyncIterator()
        var keeping = subject.events(buffering: .unbounded).makeAsyncIterator()
        for n in 1...5 { subject.send(n) }
        subject.finish()
        #expect(await small.next() == .evicted(.hardLimit(2)))
        #expect(await large.next() == .evicted(.hardLimit(4)))
        for n in 1...5 { #expect(await keeping.next() == .element(n)) }
        #expect(await keeping.next() == nil)
    }

    @Test("a soft limit of zero duration: evicted by the element that takes it past the count")
    func softLimitWithoutDuration() async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .evicting(10, softLimit: .above(2, for: .zero)))
        let stalled = subject.subscribe()
        for n in 1...2 { subject.send(n) }
        #expect(stalled.backlog?.count == 2, "at the soft count: kept")
        subject.send(3)
        #expect(
            await stalled.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 3, highWaterMark: 3))
    }

    /// A subject evicting at 64, or after 10 seconds above `backlog`, on a manual clock.
    static func subjectEvictingAfterTenSeconds(
        above backlog: Int
    ) -> (ManualClock, AsyncPassthroughSubject<Int, Never>) {
        let clock = ManualClock()
        let subject = AsyncPassthroughSubject<Int, Never>(
            buffering: .evicting(64, softLimit: .above(backlog, for: .seconds(10))), clock: clock)
        return (clock, subject)
    }

    @Test("a soft deadline: the backlog at the deadline, and the high-water mark of an earlier burst")
    func softDeadlineKeepsTheHighWaterMark() async {
        let (clock, subject) = Self.subjectEvictingAfterTenSeconds(above: 3)
        let client = subject.subscribe()
        var events = client.events.makeAsyncIterator()
        // A burst of 10 it reads whole, within the duration.
        for n in 1...10 { subject.send(n) }
        for n in 1...10 { #expect(await events.next() == .element(n)) }
        #expect(client.backlog == SubscriberBacklog(count: 0, highWaterMark: 10))
        // Then it stops reading 5 behind: past 3, for the whole duration, with nothing sent.
        for n in 11...15 { subject.send(n) }
        await expectEvictedAtTheSoftDeadline(
            client, events: &events, clock: clock, after: .seconds(10),
            SubscriberEviction(reason: .softLimit, backlog: 5, highWaterMark: 10))
    }

    @Test("members evicted together at one deadline each get their own distance")
    func oneDeadlineSeveralDistances() async {
        let (clock, subject) = Self.subjectEvictingAfterTenSeconds(above: 1)
        let far = subject.subscribe()
        for n in 1...3 { subject.send(n) }
        let near = subject.subscribe()
        for n in 4...5 { subject.send(n) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        #expect(await far.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 5, highWaterMark: 5))
        #expect(await near.waitForEviction() == SubscriberEviction(reason: .softLimit, backlog: 2, highWaterMark: 2))
        #expect(subject.subscriberCount == 0)
        #expect(subject.storage.invariantViolation == nil)
    }

    @Test("a multicast whose connection ends after the eviction: the eviction survives the end")
    func evictionSurvivesTheConnection() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let multicast = stream.multicast(buffering: .evicting(2))
        let stalled = multicast.subscribe()
        var reader = multicast.makeAsyncIterator()
        let connection = multicast.connect()
        for n in 1...3 {
            feed.yield(n)
            #expect(await reader.next() == n)
        }
        #expect(await stalled.waitForEviction() == .hardLimit(2))
        connection.cancel()
        var events = stalled.events.makeAsyncIterator()
        #expect(await events.next() == .evicted(.hardLimit(2)))
    }
}
