// Scenarios from the articles that motivated the project, written with this library's
// subjects (and, once, multicast()):
// (1) A follow counter migrated from Combine's CurrentValueSubject: screens that open and close.
// (2) The AsyncBroadcast README examples: a 1-to-N channel, subscribers in cancelled tasks,
//     buffering per subscriber.
// (The share() scenarios are in Share/ListenerScenarioTests.swift.)

import Testing

@testable import AsyncMulticast

/// The migrated repository: it used to hold a Combine `CurrentValueSubject<Int, Never>(0)`.
private final class FollowCounterRepository: Sendable {
    private let followers = AsyncCurrentValueSubject<Int, Never>(0)

    /// What a screen iterates: the current count first, then every change.
    func listen() -> AsyncCurrentValueSubject<Int, Never> {
        self.followers
    }

    func follow() {
        self.followers.value += 1
    }

    var listenerCount: Int { self.followers.subscriberCount }
}

@Suite("Scenarios: a follow counter and a broadcast channel, with subjects", .timeLimit(.minutes(2)))
struct SubjectScenarioTests {
    // MARK: (1) The follow counter

    @Test("follow counter: two screens see 0, 1, 2; screen 2 closes; screen 1 keeps counting 3, 4")
    func followCounter() async throws {
        let repository = FollowCounterRepository()
        let log1 = LockedLog<Int>()
        let log2 = LockedLog<Int>()
        let seen1 = Signal<Int>()
        let seen2 = Signal<Int>()

        // Two screens, written the way a screen would: `for await` over listen().
        let screen1 = Task {
            for await count in repository.listen() {
                log1.append(count)
                seen1.send(count)
            }
        }
        let screen2 = Task {
            for await count in repository.listen() {
                log2.append(count)
                seen2.send(count)
            }
        }

        // Gates: each follow happens after both screens showed the previous count.
        #expect(await seen1.next("screen 1 shows 0") == 0)
        #expect(await seen2.next("screen 2 shows 0") == 0)
        #expect(repository.listenerCount == 2)
        repository.follow()
        #expect(await seen1.next() == 1)
        #expect(await seen2.next() == 1)
        repository.follow()
        #expect(await seen1.next() == 2)
        #expect(await seen2.next() == 2)

        // Screen 2 is closed: its task is cancelled.
        screen2.cancel()
        try await withTimeout("screen 2 closing") { await screen2.value }
        #expect(repository.listenerCount == 1)

        repository.follow()
        #expect(await seen1.next() == 3)
        repository.follow()
        #expect(await seen1.next() == 4)

        screen1.cancel()
        try await withTimeout("screen 1 closing") { await screen1.value }
        #expect(log1.values == [0, 1, 2, 3, 4])
        #expect(log2.values == [0, 1, 2])
        #expect(repository.listenerCount == 0)
    }

    // MARK: (2) The AsyncBroadcast README examples

    @Test("broadcast: multiple subscribers each get 1, 2, 3, then finish")
    func broadcastToMultipleSubscribers() async throws {
        let channel = AsyncPassthroughSubject<Int, Never>()
        let subscribers = 3
        let joined = Signal<Void>()
        var tasks: [Task<[Int], Never>] = []
        for _ in 0..<subscribers {
            tasks.append(
                Task {
                    var received: [Int] = []
                    var iterator = channel.makeAsyncIterator()
                    joined.send(())
                    while let value = await iterator.next() { received.append(value) }
                    return received
                })
        }
        for _ in 0..<subscribers { _ = await joined.next("subscriber joined") }
        channel.send(1)
        channel.send(2)
        channel.send(3)
        channel.finish()
        for task in tasks {
            #expect(try await withTimeout("subscriber") { await task.value } == [1, 2, 3])
        }
        #expect(channel.subscriberCount == 0)
    }

    @Test("broadcast of a sequence: multicast subscribers each get 1, 2, 3, then finish")
    func broadcastASequence() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let broadcast = stream.multicast()
        let a = await SubscriberTask.join { broadcast.makeAsyncIterator() }
        let b = await SubscriberTask.join { broadcast.makeAsyncIterator() }
        for value in 1...3 { continuation.yield(value) }
        continuation.finish()
        broadcast.connect()
        #expect(await a.drain().elements == [1, 2, 3])
        #expect(await b.drain().elements == [1, 2, 3])
    }

    @Test("a subscriber created in an already-cancelled task gets nothing: its first next() returns nil")
    func subscriberInCancelledTask() async throws {
        let channel = AsyncPassthroughSubject<Int, Never>()
        let current = AsyncCurrentValueSubject<Int, Never>(42)  // has a value ready
        let gate = Signal<Void>()
        let proceed = AsyncStream.makeStream(of: Void.self)
        let task = Task { () -> (Int?, Int?) in
            withUnsafeCurrentTask { $0?.cancel() }
            var fromChannel = channel.makeAsyncIterator()
            var fromCurrent = current.makeAsyncIterator()
            gate.send(())
            for await _ in proceed.stream { break }  // returns at once: the task is cancelled
            return (await fromChannel.next(), await fromCurrent.next())
        }
        _ = await gate.next("subscribers created")
        channel.send(1)
        channel.send(2)
        proceed.continuation.yield(())
        let results = try await withTimeout("cancelled task") { await task.value }
        #expect(results.0 == nil, "nothing from the channel")
        #expect(results.1 == nil, "not even the current value")
        #expect(channel.subscriberCount == 0)
        #expect(current.subscriberCount == 0)
    }

    @Test("a `for await` loop in an already-cancelled task runs zero times")
    func forAwaitInCancelledTask() async throws {
        let channel = AsyncCurrentValueSubject<Int, Never>(1)
        let task = Task { () -> [Int] in
            withUnsafeCurrentTask { $0?.cancel() }
            var received: [Int] = []
            for await value in channel { received.append(value) }
            return received
        }
        #expect(try await withTimeout("cancelled loop") { await task.value } == [])
        #expect(channel.subscriberCount == 0)
    }

    @Test("buffering per subscriber: lossless, oldest-first and newest-first subscribers of one channel")
    func bufferingPerSubscriber() async {
        let channel = AsyncPassthroughSubject<Int, Never>()  // .unbounded for the default subscriber
        let all = await SubscriberTask.join { channel.makeAsyncIterator() }
        let oldest = await SubscriberTask.join { channel.buffering(.bufferingOldest(2)).makeAsyncIterator() }
        let newest = await SubscriberTask.join { channel.buffering(.bufferingNewest(2)).makeAsyncIterator() }
        for value in 1...10 { channel.send(value) }  // nobody reads meanwhile
        channel.finish()
        #expect(await all.drain().elements == Array(1...10))
        #expect(await oldest.drain().elements == [1, 2])
        #expect(await newest.drain().elements == [9, 10])
    }

    @Test("buffering per subscriber on a shared sequence: share(buffering:) plus buffering(_:) views")
    func bufferingPerSubscriberShared() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        for value in 1...10 { continuation.yield(value) }
        continuation.finish()
        let shared = stream.share(buffering: .unbounded)
        let all = await SubscriberTask.join { shared.makeAsyncIterator() }
        let oldest = await SubscriberTask.join { shared.buffering(.bufferingOldest(2)).makeAsyncIterator() }
        let newest = await SubscriberTask.join { shared.buffering(.bufferingNewest(2)).makeAsyncIterator() }
        // `all` drives the upstream to its end (reading nil means all ten were produced).
        #expect(await all.drain().elements == Array(1...10))
        #expect(await oldest.drain().elements == [1, 2])
        #expect(await newest.drain().elements == [9, 10])
    }
}
