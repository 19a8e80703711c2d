// AsyncSubjectTopics: when a key's subject is created and freed. Created by its first
// subscriber (or by a send, for a key that keeps a replay), freed after its last subscriber
// left (an eviction is a leave) and its keep-alive window passed on the topics' clock, and
// fresh when it is joined again.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSubjectTopics lifetime", .timeLimit(.minutes(2)))
struct SubjectTopicsLifetimeTests {
    @Test("the first subscriber of a key creates its subject; later ones join it")
    func firstSubscriberCreatesTheKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        #expect(topics.keyCount == 0)
        #expect(!topics.isLive("a"))
        let first = topics.subscribe(to: "a")
        #expect(topics.isLive("a"))
        #expect(topics.keyCount == 1)
        #expect(topics.subscriberCount(of: "a") == 1)
        let second = topics.subscribe(to: "a")
        #expect(topics.keyCount == 1, "the second subscriber joined the same subject")
        #expect(topics.subscriberCount(of: "a") == 2)
        let other = topics.subscribe(to: "b")
        #expect(topics.keyCount == 2)
        #expect(topics.subscriberCount(of: "b") == 1)
        topics.send(1, to: "a")
        topics.finish()
        #expect(await first.reduce(into: []) { $0.append($1) } == [1])
        #expect(await second.reduce(into: []) { $0.append($1) } == [1])
        #expect(await other.reduce(into: []) { $0.append($1) } == [])
    }

    @Test("a key is freed when its last subscriber leaves, not before")
    func freedAfterTheLastLeave() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let first = HeldSubscription(topics.subscribe(to: "a"))
        let second = HeldSubscription(topics.subscribe(to: "a"))
        first.release()
        #expect(topics.isLive("a"), "one subscriber is left")
        #expect(topics.subscriberCount(of: "a") == 1)
        second.release()
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        #expect(!topics.isLive("a"))
        #expect(topics.keyCount == 0)
        #expect(topics.subscriberCount(of: "a") == 0)
    }

    @Test("a reader whose task is cancelled leaves, and frees its key")
    func cancelledReaderFreesTheKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let subscription = topics.subscribe(to: "a")
        let received = Signal<Int>()
        let reader = Task {
            for await n in subscription { received.send(n) }
        }
        topics.send(7, to: "a")
        #expect(await received.next("the reader's element") == 7)
        reader.cancel()
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        #expect(topics.keyCount == 0)
        await reader.value
    }

    @Test("a key joined again after it was freed is a fresh subject: nothing of the old one")
    func rejoinedKeyIsFresh() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>(replay: 4)
        let first = HeldSubscription(topics.subscribe(to: "a"))
        topics.send(1, to: "a")
        topics.send(2, to: "a")
        first.release()
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        let second = topics.subscribe(to: "a")
        topics.send(3, to: "a")
        topics.finish()
        #expect(await second.reduce(into: []) { $0.append($1) } == [3], "the old replay went with the old subject")
    }

    @Test("keep-alive: a key outlives its last subscriber by the window on the clock")
    func freedAfterKeepAliveOnTheClock() async throws {
        let clock = ManualClock()
        let topics = AsyncSubjectTopics<String, Int, Never>(keepAlive: .seconds(5), clock: clock)
        let subscriber = HeldSubscription(topics.subscribe(to: "a"))
        subscriber.release()
        #expect(await clock.waitForSleepers(count: 1), "the window's timer sleeps")
        #expect(clock.sleeperDeadlines == [.init(offset: .seconds(5))])
        #expect(topics.isLive("a"), "kept during the window")
        clock.advance(by: .seconds(4))
        #expect(topics.isLive("a"))
        #expect(clock.sleeperCount == 1, "the timer still sleeps")
        clock.advance(by: .seconds(1))
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        #expect(topics.keyCount == 0)
    }

    @Test("keep-alive: a subscriber joining during the window keeps the subject and stops its timer")
    func joinDuringKeepAliveKeepsTheSubject() async throws {
        let clock = ManualClock()
        let topics = AsyncSubjectTopics<String, Int, Never>(replay: 2, keepAlive: .seconds(5), clock: clock)
        let first = HeldSubscription(topics.subscribe(to: "a"))
        topics.send(1, to: "a")
        topics.send(2, to: "a")
        first.release()
        #expect(await clock.waitForSleepers(count: 1))
        let second = HeldSubscription(topics.subscribe(to: "a"))
        try await waitUntil("the cancelled timer gone") { clock.sleeperCount == 0 }
        clock.advance(by: .seconds(10))
        #expect(topics.isLive("a"), "a subscriber holds it")
        topics.send(3, to: "a")
        let replayed = topics.subscribe(to: "a")
        second.release()
        topics.finish()
        #expect(await replayed.reduce(into: []) { $0.append($1) } == [2, 3], "the same subject: its replay")
    }

    @Test("keep-alive: a new window opens with each last leave, timed from that leave")
    func eachLastLeaveOpensAWindow() async throws {
        let clock = ManualClock()
        let topics = AsyncSubjectTopics<String, Int, Never>(keepAlive: .seconds(5), clock: clock)
        HeldSubscription(topics.subscribe(to: "a")).release()
        #expect(await clock.waitForSleepers(count: 1))
        clock.advance(by: .seconds(3))
        let back = HeldSubscription(topics.subscribe(to: "a"))
        try await waitUntil("the first timer cancelled") { clock.sleeperCount == 0 }
        back.release()
        #expect(await clock.waitForSleepers(count: 1))
        #expect(clock.sleeperDeadlines == [.init(offset: .seconds(8))], "5 s from the second leave")
        clock.advance(by: .seconds(4))
        #expect(topics.isLive("a"))
        clock.advance(by: .seconds(1))
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
    }

    /// Topics that keep a replay of `replay` elements for 10 s on a manual clock, and key "a"
    /// created by a send of 1 that nobody subscribed to: its window's timer asleep.
    private static func keyCreatedBySend(
        replay: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> (AsyncSubjectTopics<String, Int, Never>, ManualClock) {
        let clock = ManualClock()
        let topics = AsyncSubjectTopics<String, Int, Never>(replay: replay, keepAlive: .seconds(10), clock: clock)
        topics.send(1, to: "a")
        #expect(await clock.waitForSleepers(count: 1, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
        return (topics, clock)
    }

    @Test("replay: a send to a key without subscribers creates it, kept for the window from that send")
    func sendCreatesAReplayingKey() async throws {
        let (topics, clock) = await Self.keyCreatedBySend(replay: 2)
        #expect(topics.isLive("a"))
        #expect(topics.subscriberCount(of: "a") == 0)
        #expect(clock.sleeperDeadlines == [.init(offset: .seconds(10))], "its window, from the send")
        topics.send(2, to: "a")
        topics.send(3, to: "a")
        let late = topics.subscribe(to: "a")
        topics.send(4, to: "a")
        let held = HeldSubscription(late)
        var iterator = late.makeAsyncIterator()
        #expect(await iterator.next() == 2)
        #expect(await iterator.next() == 3)
        #expect(await iterator.next() == 4)
        _ = consume iterator
        held.release()
        try await waitUntil("the second window's timer") {
            clock.sleeperCount == 1 && clock.sleeperDeadlines.count == 1
        }
        clock.advance(by: .seconds(10))
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
    }

    @Test("replay: later sends to an idle key do not restart its window")
    func sendsDoNotRestartTheWindow() async throws {
        let (topics, clock) = await Self.keyCreatedBySend(replay: 1)
        clock.advance(by: .seconds(9))
        topics.send(2, to: "a")
        clock.advance(by: .seconds(1))
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        let late = topics.subscribe(to: "a")
        topics.finish()
        #expect(await late.reduce(into: []) { $0.append($1) } == [], "the replay expired with the key")
    }

    @Test("no replay, or no keep-alive: a send to a key without subscribers reaches nobody and creates nothing")
    func sendToAnAbsentKeyCreatesNothing() async throws {
        let passthrough = AsyncSubjectTopics<String, Int, Never>(keepAlive: .seconds(60))
        passthrough.send(1, to: "a")
        #expect(passthrough.keyCount == 0)
        let replayWithoutWindow = AsyncSubjectTopics<String, Int, Never>(replay: 3)
        replayWithoutWindow.send(1, to: "a")
        #expect(replayWithoutWindow.keyCount == 0)
        let late = replayWithoutWindow.subscribe(to: "a")
        replayWithoutWindow.finish()
        #expect(await late.reduce(into: []) { $0.append($1) } == [])
    }

    @Test("a keep-alive of 2^40 seconds or longer keeps every key for good, without a timer")
    func foreverKeepsKeys() async throws {
        let clock = ManualClock()
        let topics = AsyncSubjectTopics<String, Int, Never>(keepAlive: .seconds(Int64.max), clock: clock)
        HeldSubscription(topics.subscribe(to: "a")).release()
        #expect(topics.isLive("a"))
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(1 << 41))
        #expect(topics.isLive("a"))
    }

    @Test("an evicted subscriber leaves: the last one's eviction frees the key")
    func evictionFreesTheKey() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        let slow = topics.subscribe(to: "a", buffering: .evicting(2))
        let other = topics.subscribe(to: "b")
        topics.send(1, to: "a")
        topics.send(2, to: "a")
        #expect(topics.isLive("a"))
        topics.send(3, to: "a")  // past the limit: evicted
        #expect(await slow.waitForEviction()?.reason == .hardLimit)
        try await withTimeout("key freed") { try await topics.waitUntilFreed("a") }
        #expect(topics.subscriberCount(of: "a") == 0)
        #expect(topics.isLive("b"), "another key's subscriber is untouched")
        topics.finish()
        #expect(await other.reduce(into: []) { $0.append($1) } == [])
    }

    @Test("waitUntilFreed returns at once for a key without a subject, and throws when cancelled")
    func waitUntilFreedEdges() async throws {
        let topics = AsyncSubjectTopics<String, Int, Never>()
        try await withTimeout("absent key") { try await topics.waitUntilFreed("nobody") }
        let held = topics.subscribe(to: "a")
        let waiter = Task { () -> Bool in
            do {
                try await topics.waitUntilFreed("a")
                return false
            } catch {
                return true
            }
        }
        waiter.cancel()
        #expect(await waiter.value, "cancelled: CancellationError")
        #expect(topics.isLive("a"))
        _ = held
    }
}
