// The share() contract: joining, lazy start with one upstream iterator, and sticky terminal
// events with the base's typed failure.

import Testing

@testable import AsyncMulticast

@Suite("share() semantics")
struct ShareSemanticsTests {
    // MARK: 1. Join

    @Test func subscriberReceivesEveryElementFromItsCreationOn() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            var early = shared.makeAsyncIterator()
            for i in 0..<3 { upstream.yield(i) }
            // Once `early` has received 0..<3 they are in the shared buffer; 3 is not produced yet.
            for i in 0..<3 { #expect(await early.next() == i) }
            var late = shared.makeAsyncIterator()
            for i in 3..<6 { upstream.yield(i) }
            upstream.finish()
            let lateElements = await late.readAll()
            let earlyRest = await early.readAll()
            #expect(lateElements == [3, 4, 5])
            #expect(earlyRest == [3, 4, 5])
        }
    }

    @Test func registrationHappensAtCreationNotAtFirstNext() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            var reader = shared.makeAsyncIterator()
            var idle = shared.makeAsyncIterator()  // created now, first next() much later
            #expect(shared.subscriberCount == 2)
            for i in 0..<5 { upstream.yield(i) }
            for i in 0..<5 { #expect(await reader.next() == i) }
            upstream.finish()
            let received = await idle.readAll()
            #expect(received == [0, 1, 2, 3, 4])
        }
    }

    @Test func everySubscriberSeesUpstreamOrder() async throws {
        try await withTimeout {
            let shared = (0..<2_000).async.share(buffering: .bounded(5))
            let results = await shared.iterateTogether(4) { iterator in
                var received: [Int] = []
                while let element = await iterator.next() { received.append(element) }
                return received
            }
            for received in results { #expect(received == Array(0..<2_000)) }
        }
    }

    // MARK: 2. Lazy start, one upstream iterator

    @Test func nothingIsIteratedBeforeTheFirstNext() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share()
            var first = shared.makeAsyncIterator()
            let second = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 2)
            await letOthersRun()  // a stray task, if share() had started one, would run now
            #expect(probe.iterators == 0)
            #expect(probe.pulls == 0)
            #expect(shared.storage.upstreamState == .idle)

            #expect(await first.next() == 0)
            #expect(probe.iterators == 1)
            #expect(shared.storage.upstreamState == .running(epoch: 0))
            _ = second
        }
    }

    @Test func manyConcurrentSubscribersShareOneUpstreamIterator() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(limit: 300), probe: probe).share(buffering: .bounded(4))
            let results = await shared.iterateTogether(8) { iterator in
                var received: [Int] = []
                while let element = await iterator.next() { received.append(element) }
                return received
            }
            for received in results { #expect(received == Array(0..<300)) }
            let stats = probe.snapshot
            #expect(stats.iterators == 1)
            #expect(stats.maxLiveIterators == 1)
            #expect(stats.maxActivePulls == 1, "never two concurrent next() calls on the base")
            #expect(stats.pulls == 301)
        }
    }

    // MARK: 6. Terminal events are sticky

    @Test func finishIsDeliveredAfterTheBufferAndToLateSubscribers() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Scripted(elements: [0, 1, 2], failure: nil), probe: probe).share()
            var fast = shared.makeAsyncIterator()
            var slow = shared.makeAsyncIterator()
            let fastResult = await collect(&fast)
            #expect(fastResult.elements == [0, 1, 2] && fastResult.error == nil)
            let slowResult = await collect(&slow)  // its buffer first, then nil
            #expect(slowResult.elements == [0, 1, 2] && slowResult.error == nil)
            #expect(shared.subscriberCount == 0)

            var late = shared.makeAsyncIterator()
            let first = try await late.next()
            #expect(first == nil, "nil at once")
            let second = try await late.next()
            #expect(second == nil)
            #expect(probe.iterators == 1, "a terminated sequence never restarts its upstream")
            #expect(shared.storage.upstreamState == .terminated(.finished))
        }
    }

    @Test func typedErrorIsDeliveredAfterTheBufferThenNil() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Scripted(elements: [0, 1, 2], failure: .boom), probe: probe).share()
            // Statically: the shared sequence's failure is the base's.
            #expect(type(of: shared) == AsyncShareSequence<Int, TestError>.self)
            var fast = shared.makeAsyncIterator()
            var slow = shared.makeAsyncIterator()
            let fastResult = await collect(&fast)
            #expect(fastResult.elements == [0, 1, 2])
            #expect(fastResult.error == .boom)
            let fastAfterError = try await fast.next()
            #expect(fastAfterError == nil, "after the error: nil")

            let slowResult = await collect(&slow)
            #expect(slowResult.elements == [0, 1, 2])
            #expect(slowResult.error == .boom)
            let slowAfterError = try await slow.next()
            #expect(slowAfterError == nil)

            for _ in 0..<2 {
                var late = shared.makeAsyncIterator()
                let lateResult = await collect(&late)
                #expect(lateResult.elements.isEmpty)
                #expect(lateResult.error == .boom, "every later subscriber gets the error at once")
                let afterEnd = try await late.next()
                #expect(afterEnd == nil)
            }
            #expect(probe.iterators == 1)
        }
    }

    @Test func errorReachesAWaitingSubscriberAndABufferedOne() async throws {
        try await withTimeout {
            let source = PushSource()
            let shared = source.share(buffering: .unbounded)
            let waiting = SubscriberBox(shared.makeAsyncIterator())
            var buffered = shared.makeAsyncIterator()
            source.yield(0)
            source.yield(1)
            let zero = try await waiting.next()
            #expect(zero == 0)
            let one = try await waiting.next()
            #expect(one == 1)
            let pending = Task { () async throws(TestError) -> Int? in try await waiting.next() }
            try await shared.waitForWaiting(1)
            source.fail(.boom)
            let result = await pending.result
            #expect(throws: TestError.boom) { try result.get() }
            let bufferedResult = await collect(&buffered)
            #expect(bufferedResult.elements == [0, 1])
            #expect(bufferedResult.error == .boom)
        }
    }

    @Test func finishReachesAWaitingSubscriber() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            let waiting = SubscriberBox(shared.makeAsyncIterator())
            let pending = try await shared.startWaitingRead(of: waiting, waiting: 1)
            upstream.finish()
            #expect(await pending.value == nil)
            #expect(shared.subscriberCount == 0)
        }
    }

    @Test func subscriberCountTracksIteratorsThatHaveNotLeft() async throws {
        try await withTimeout {
            let shared = [1, 2].async.share()
            #expect(shared.subscriberCount == 0)
            var a = shared.makeAsyncIterator()
            do {
                let b = shared.makeAsyncIterator()
                #expect(shared.subscriberCount == 2)
                _ = b
            }
            #expect(shared.subscriberCount == 1)
            while await a.next() != nil {}
            #expect(shared.subscriberCount == 0, "a subscriber that reached the end has left")
        }
    }
}
