// An `.evicting(n)` subscriber's replayed elements are a greeting that counts against no
// limit: only what is produced after it joined can evict it (Guides/Replay.md). The greeting
// is read like any buffer, released at once with an evicted subscriber, and its copy lives no
// longer than its readers.

import Testing

@testable import AsyncMulticast

/// A class element, to see when the library lets go of one.
private final class Token: Sendable {
    let value: Int
    init(_ value: Int) { self.value = value }
}

/// A weak reference that can cross tasks: set once, as it is made (`weak let`).
private final class WeakBox: Sendable {
    weak let token: Token?
    init(_ token: Token) { self.token = token }
}

/// Sends a fresh `Token(value)` to `subject`, keeping no strong reference to it: the box says
/// when the subject let it go.
private func sendWatched(_ value: Int, to subject: AsyncReplaySubject<Token, Never>) -> WeakBox {
    let token = Token(value)
    subject.send(token)
    return WeakBox(token)
}

@Suite("Eviction: an .evicting(n) subscriber's greeting", .serialized, .timeLimit(.minutes(15)))
struct EvictionGreetingTests {
    @Test(
        "AsyncReplaySubject(replay: k, .evicting(n)): the whole replay, n live ones more, and n + 1 evict",
        arguments: [(2, 4), (3, 3), (5, 2), (5, 1), (1, 1), (8, 8)])
    func replaySubjectGreeting(_ sizes: (k: Int, n: Int)) async {
        let (k, n) = sizes
        let subject = AsyncReplaySubject<Int, Never>(replay: k, buffering: .evicting(n))
        for value in 1...k + 3 { subject.send(value) }
        let replayed = Array(4...k + 3)
        #expect(subject.replayCache == replayed)
        var keeping = subject.events().makeAsyncIterator()
        var stalled = subject.events().makeAsyncIterator()
        for value in 100..<100 + n { subject.send(value) }
        // `stalled` read nothing, and neither did `keeping`: both hold n live ones, and the
        // greeting counts against nothing.
        #expect(subject.subscriberCount == 2)
        let keepingFirst = await keeping.next()
        #expect(keepingFirst == .element(replayed[0]), "k \(k), n \(n)")
        var kept = [keepingFirst]
        while kept.count < k + n, let event = await keeping.next() { kept.append(event) }
        #expect(kept == (replayed + Array(100..<100 + n)).map { .element($0) }, "k \(k), n \(n)")
        subject.send(1_000)  // `keeping` holds 1; `stalled` would hold n + 1
        #expect(subject.subscriberCount == 1, "an evicted subscriber stops counting at its eviction")
        #expect(await stalled.next() == .evicted(.hardLimit(n)), "k \(k), n \(n)")
        #expect(await stalled.next() == nil)
        #expect(subject.subscriberCount == 1)
        subject.finish()
        #expect(await drain(&keeping) == [.element(1_000)])
        #expect(subject.subscriberCount == 0)
    }

    @Test("eviction after the greeting was partly read: what the iterator took comes first, then .evicted")
    func evictionAfterPartOfTheGreeting() async {
        // .evicting(2) takes one extra element per read (batch of min(2 / 2, 64) = 1).
        let subject = AsyncReplaySubject<Int, Never>(replay: 5, buffering: .evicting(2))
        for value in 1...5 { subject.send(value) }
        var reader = subject.events().makeAsyncIterator()
        #expect(await reader.next() == .element(1))  // takes 2 as well
        subject.send(6)
        subject.send(7)  // two live ones: the limit, not past it
        #expect(await reader.next() == .element(2))
        #expect(await reader.next() == .element(3))  // takes 4 as well
        subject.send(8)  // three live ones not taken: evicted
        #expect(await reader.next() == .element(4), "already taken by the iterator")
        #expect(await reader.next() == .evicted(.hardLimit(2)))
        #expect(await reader.next() == nil)

        // .evicting(1) takes nothing extra: after the greeting's first element, two live ones evict.
        let one = AsyncReplaySubject<Int, Never>(replay: 3, buffering: .evicting(1))
        for value in 1...3 { one.send(value) }
        var single = one.events().makeAsyncIterator()
        #expect(await single.next() == .element(1))
        one.send(4)
        #expect(await single.next() == .element(2))
        one.send(5)
        #expect(await single.next() == .evicted(.hardLimit(1)))
    }

    @Test("the batch that ends the greeting goes on into the live elements, which then no longer count")
    func batchAcrossTheSeam() async {
        // .evicting(4) takes up to 2 extra elements per read.
        let subject = AsyncReplaySubject<Int, Never>(replay: 1, buffering: .evicting(4))
        subject.send(0)
        var reader = subject.events().makeAsyncIterator()
        subject.send(1)
        subject.send(2)
        #expect(await reader.next() == .element(0))  // the greeting, then 1 and 2 taken
        for value in 3...6 { subject.send(value) }  // four more live: the limit
        #expect(await reader.next() == .element(1))
        #expect(await reader.next() == .element(2))
        #expect(await reader.next() == .element(3), "not evicted: 1 and 2 had been taken")
        // That read took 4 and 5 too: it holds 6 only. Four more make five: evicted.
        for value in 7...10 { subject.send(value) }
        #expect(await reader.next() == .element(4))
        #expect(await reader.next() == .element(5))
        #expect(await reader.next() == .evicted(.hardLimit(4)))
    }

    @Test("AsyncCurrentValueSubject(_, buffering: .evicting(1)): the current value greets, two live ones evict")
    func currentValueEvictingOne() async throws {
        let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .evicting(1))
        var reading = subject.events().makeAsyncIterator()
        var stalled = subject.events().makeAsyncIterator()
        subject.send(1)
        #expect(await reading.next() == .element(0))
        #expect(await reading.next() == .element(1))
        subject.send(2)
        #expect(subject.value == 2)
        #expect(subject.subscriberCount == 1, "evicted: it stopped counting")
        #expect(await stalled.next() == .evicted(.hardLimit(1)), "1 and 2 arrived after it joined")
        #expect(await stalled.next() == nil)
        #expect(subject.subscriberCount == 1)
        var late = subject.makeAsyncIterator()
        #expect(await late.next() == 2, "the current value, as a greeting")
        subject.finish()
        #expect(await drain(&reading) == [.element(2)])
        #expect(await late.next() == nil)

        // With `any Error`, a plain iteration throws SubscriberEvictedError.
        let throwing = AsyncCurrentValueSubject<Int, any Error>(0, buffering: .evicting(1))
        var plain = throwing.makeAsyncIterator()
        throwing.send(1)
        throwing.send(2)
        await #expect(throws: SubscriberEvictedError.self) { _ = try await plain.next() }
        #expect(throwing.subscriberCount == 0)
    }

    @Test("AsyncReplaySubject<_, any Error>: a plain iteration of an evicted subscriber throws, after its greeting")
    func replayAnyErrorThrows() async throws {
        let subject = AsyncReplaySubject<Int, any Error>(replay: 3, buffering: .evicting(1))
        for value in 1...3 { subject.send(value) }
        var reader = subject.makeAsyncIterator()
        #expect(try await reader.next() == 1)
        subject.send(4)
        #expect(try await reader.next() == 2)
        #expect(try await reader.next() == 3)
        #expect(try await reader.next() == 4)
        subject.send(5)
        subject.send(6)
        await #expect(throws: SubscriberEvictedError.self) { _ = try await reader.next() }
        #expect(subject.subscriberCount == 0)
    }

    @Test("replay(k, buffering: .evicting(n)) on a sequence: the greeting while running and after the end")
    func replayOnASequence() async throws {
        try await withTimeout(seconds: 300) {
            let source = FedSource()
            let shared = source.replay(3, buffering: .evicting(2))
            let first = await SubscriberTask.join { shared.buffering(.unbounded).makeAsyncIterator() }
            #expect(await first.startIteration(of: source, yielding: 1, 2, 3, 4, 5, 6) == 1)
            #expect(await first.take(5) == [2, 3, 4, 5, 6])
            var late = shared.events().makeAsyncIterator()  // greeted with 4, 5, 6
            var stalled = shared.events().makeAsyncIterator()
            source.control.yield(7, 8)
            #expect(await first.take(2) == [7, 8])
            #expect(await late.next() == .element(4))
            for value in 5...8 { #expect(await late.next() == .element(value)) }
            source.control.yield(9, 10, 11)
            #expect(await first.take(3) == [9, 10, 11])
            #expect(await stalled.next() == .evicted(.hardLimit(2)), "five live ones")
            #expect(await late.next() == .evicted(.hardLimit(2)), "9, 10, 11: three live ones not taken")
            source.control.finish()
            #expect(await first.next() == nil)

            // After the end: the whole window, whatever the limit, then nil.
            var afterEnd = shared.buffering(.evicting(1)).makeAsyncIterator()
            let received = await afterEnd.readAll()
            #expect(received == [9, 10, 11])
        }
    }

    @Test("resetReplayCache() between joins: each subscriber keeps the greeting it joined with")
    func resetBetweenJoins() async {
        let subject = AsyncReplaySubject<Int, Never>(replay: 3, buffering: .evicting(2))
        for value in 1...3 { subject.send(value) }
        var before = subject.makeAsyncIterator()
        var alsoBefore = subject.makeAsyncIterator()  // the same position: one shared copy
        #expect(await alsoBefore.next() == 1)
        subject.resetReplayCache()
        #expect(subject.replayCache.isEmpty)
        var afterReset = subject.makeAsyncIterator()
        subject.send(4)
        var afterFour = subject.makeAsyncIterator()
        subject.resetReplayCache()
        subject.send(5)
        var afterSecondReset = subject.makeAsyncIterator()
        subject.send(6)
        subject.finish()
        var received: [[Int]] = []
        for index in 0..<5 {
            var values: [Int] = []
            switch index {
            case 0: while let v = await before.next() { values.append(v) }
            case 1: while let v = await alsoBefore.next() { values.append(v) }
            case 2: while let v = await afterReset.next() { values.append(v) }
            case 3: while let v = await afterFour.next() { values.append(v) }
            default: while let v = await afterSecondReset.next() { values.append(v) }
            }
            received.append(values)
        }
        // `before` and `alsoBefore` each hold 4, 5, 6 live: three, past the limit of two.
        #expect(received[0] == [], "evicted: 4, 5 and 6 came after it joined, and it read none")
        #expect(received[1] == [2], "evicted after taking 2 (its batch)")
        #expect(received[2] == [], "evicted by 4, 5, 6 too")
        #expect(received[3] == [4, 5, 6], "greeted with 4, then 5 and 6 live")
        #expect(received[4] == [5, 6])
    }

    @Test("twenty subscribers joining at one position share the greeting: each reads it on its own")
    func manySubscribersOneGreeting() async {
        let subject = AsyncReplaySubject<Int, Never>(replay: 4, buffering: .evicting(3))
        for value in 1...6 { subject.send(value) }
        let greeting = [3, 4, 5, 6]
        var early = (0..<20).map { _ in subject.events().makeAsyncIterator() }
        var readBefore: [[Int]] = []
        for index in early.indices {
            var values: [Int] = []
            for _ in 0..<index % 5 {
                if case .element(let v)? = await early[index].next() { values.append(v) }
            }
            readBefore.append(values)
            #expect(values == Array(greeting.prefix(index % 5)), "subscriber \(index)")
        }
        subject.send(7)
        subject.send(8)
        subject.send(9)  // three live: nobody evicted yet
        var late = (0..<10).map { _ in subject.events().makeAsyncIterator() }  // greeted with 6…9
        // The even ones catch up to 9; the odd ones read nothing more.
        for index in early.indices where index % 2 == 0 {
            while true {
                let event = await early[index].next()
                if event == .element(9) { break }
                guard case .element = event else {
                    Issue.record("subscriber \(index): \(String(describing: event))")
                    break
                }
            }
        }
        subject.send(10)  // the odd ones now hold four live ones
        subject.finish()
        for index in early.indices {
            let rest = await drain(&early[index])
            if index % 2 == 0 {
                #expect(rest == [.element(10)], "subscriber \(index)")
            } else {
                // What its iterator had taken ahead (a batch of one), then the eviction.
                let read = index % 5
                let taken = read % 2 == 1 ? [SharedEvent.element(greeting[read])] : []
                #expect(rest == taken + [.evicted(.hardLimit(3))], "subscriber \(index), read \(read)")
            }
        }
        for index in late.indices {
            #expect(await drain(&late[index]) == [6, 7, 8, 9, 10].map { .element($0) }, "late \(index)")
        }
        #expect(subject.subscriberCount == 0)
    }

    @Test("subscribers joining while another task sends: greeting and live elements meet with no gap or repeat")
    func joiningWhileSending() async throws {
        try await withTimeout(seconds: 300) {
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(replay: 1 + round % 4, buffering: .evicting(100_000))
                let total = 3_000
                let sender = startSending(1...total, to: subject, yieldingEvery: 50)
                var readers: [Task<[Int], Never>] = []
                for _ in 0..<8 {
                    await Task.yield()
                    let iterator = subject.makeAsyncIterator()
                    readers.append(
                        Task {
                            var iterator = iterator
                            let values = await iterator.readAll()
                            return values
                        })
                }
                await sender.value
                for reader in readers {
                    let values = await reader.value
                    #expect(isConsecutive(values), "round \(round)")
                    #expect(values.isEmpty || values.last == total, "round \(round)")
                }
            }
        }
    }

    @Test("multicast cancel() with a greeting not yet read: each subscriber keeps exactly what it was owed")
    func multicastCancelKeepsTheGreeting() async throws {
        try await withTimeout(seconds: 300) {
            let source = FedSource()
            let multicast = source.multicast(replay: 3, buffering: .evicting(2))
            var witness = multicast.buffering(.unbounded).makeAsyncIterator()
            let connection = multicast.connect()
            await source.control.waitForStart(of: 0)
            source.control.yield(1, 2, 3, 4, 5)
            for value in 1...5 { #expect(await witness.next() == value) }
            var partly = multicast.events().makeAsyncIterator()
            var unread = multicast.events().makeAsyncIterator()
            #expect(await partly.next() == .element(3))  // takes 4 as well
            source.control.yield(6)
            #expect(await witness.next() == 6)
            connection.cancel()
            #expect(await drain(&partly) == [4, 5, 6].map { .element($0) })
            #expect(await drain(&unread) == [3, 4, 5, 6].map { .element($0) })

            // Joined while disconnected: the window, at once, then the next connection's.
            var between = multicast.events().makeAsyncIterator()
            for value in 4...6 { #expect(await between.next() == .element(value)) }
            let second = multicast.connect()
            await source.control.waitForStart(of: 1)
            source.control.yield(7)
            #expect(await between.next() == .element(7))
            #expect(await witness.next() == nil, "the witness belonged to the first connection")

            // Evicted before the cancel: it ends as evicted, with nothing of its greeting.
            var evicted = multicast.events().makeAsyncIterator()  // greeted with 5, 6, 7
            var evictedPlain = multicast.makeAsyncIterator()
            var witness2 = multicast.buffering(.unbounded).makeAsyncIterator()
            source.control.yield(8, 9, 10)
            for value in 5...10 { #expect(await witness2.next() == value, "replayed 5…7, then live") }
            second.cancel()
            #expect(await drain(&evicted) == [.evicted(.hardLimit(2))])
            #expect(await evictedPlain.next() == nil)
            #expect(multicast.subscriberCount == 1, "`witness2` has not read its end yet; `between` was evicted")
            #expect(await drain(&between) == [.evicted(.hardLimit(2))])
        }
    }

    @Test("an evicted subscriber's greeting is released at once, like the rest of its buffer")
    func evictedGreetingIsReleased() async {
        // Baseline: without a greeting, an evicted subscriber's elements are released at once.
        let plain = AsyncPassthroughSubject<Token, Never>(buffering: .evicting(1))
        var plainReader: SharedIterator<Token, Never>? = plain.makeAsyncIterator()
        var plainBoxes: [WeakBox] = []
        do {
            let tokens = [Token(1), Token(2)]
            plainBoxes = tokens.map(WeakBox.init)
            for token in tokens { plain.send(token) }
        }
        #expect(plainBoxes.allSatisfy { $0.token == nil }, "evicted: its buffer was released")
        #expect(plainReader != nil)
        plainReader = nil

        let subject = AsyncReplaySubject<Token, Never>(replay: 2, buffering: .evicting(1))
        var boxes: [WeakBox] = []
        do {
            let tokens = [Token(1), Token(2)]
            boxes = tokens.map(WeakBox.init)
            for token in tokens { subject.send(token) }
        }
        var reader: SharedIterator<Token, Never>? = subject.makeAsyncIterator()  // greeted with 1, 2
        subject.resetReplayCache()  // only the greeting holds them now
        #expect(boxes.allSatisfy { $0.token != nil }, "owed to the subscriber")
        subject.send(Token(3))
        subject.send(Token(4))  // two live ones: evicted
        // "Its buffer is released at once": the greeting too, before the subscriber notices.
        #expect(boxes.allSatisfy { $0.token == nil }, "evicted: its greeting goes with its buffer")
        #expect(reader != nil)
        reader = nil
        #expect(boxes.allSatisfy { $0.token == nil }, "released with the subscriber")
    }

    @Test("an element that left the replay window and was read by every subscriber is released")
    func greetingCopyOutlivesItsUse() async {
        // Baseline: the same with `.unbounded`, which replays from the shared buffer.
        let baseline = AsyncReplaySubject<Token, Never>(replay: 1, buffering: .unbounded)
        let baselineBox = sendWatched(1, to: baseline)
        do {
            var reader = baseline.makeAsyncIterator()
            #expect(await reader.next()?.value == 1)
            baseline.send(Token(2))
            #expect(await reader.next()?.value == 2)
        }
        #expect(baselineBox.token == nil, "out of the window, read, and its reader gone")

        let subject = AsyncReplaySubject<Token, Never>(replay: 1, buffering: .evicting(4))
        let box = sendWatched(1, to: subject)
        do {
            var reader = subject.makeAsyncIterator()  // greeted with 1
            #expect(await reader.next()?.value == 1)
            subject.send(Token(2))  // the window now holds 2 only
            #expect(await reader.next()?.value == 2)
        }  // the reader leaves
        #expect(subject.replayCache.map(\.value) == [2])
        #expect(subject.subscriberCount == 0)
        #expect(box.token == nil, "out of the window, read, and its reader gone: nothing keeps it")
    }

    @Test("evicting readers joining a replay subject while it is fed: lossless up to the eviction, no seam gap")
    func evictingReadersWhileSending() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0xE71C)
            var evictions = 0
            var completions = 0
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(replay: 5, buffering: .evicting(3))
                let total = 2_000
                let sender = startSending(1...total, to: subject, yieldingEvery: 16)
                var readers: [Task<[SharedEvent<Int>], Never>] = []
                for index in 0..<8 {
                    for _ in 0..<Int(rng.next() % 30) { await Task.yield() }
                    let iterator = subject.events().makeAsyncIterator()
                    let pace = 1 + index % 4
                    readers.append(
                        Task {
                            var iterator = iterator
                            var events: [SharedEvent<Int>] = []
                            while let event = await iterator.next() {
                                events.append(event)
                                if events.count % pace == 0 { await Task.yield() }
                            }
                            return events
                        })
                }
                await sender.value
                for reader in readers {
                    let events = await reader.value
                    let summary = LagSummary(events)
                    #expect(summary.missedCounts.isEmpty, "round \(round): an evicting reader misses nothing")
                    #expect(isConsecutive(summary.elements), "round \(round): \(summary.elements.prefix(20))")
                    if summary.evicted {
                        evictions += 1
                        #expect(events.last == .evicted(.hardLimit(3)))
                    } else {
                        completions += 1
                        #expect(summary.elements.last == total, "round \(round)")
                    }
                }
            }
            #expect(evictions + completions == 80)
            #expect(evictions > 0, "the runs reached evictions")
        }
    }

    @Test("replay(2, buffering: .evicting(1)) of an AsyncThrowingStream: an evicted plain iteration throws")
    func replayOfAThrowingStreamEvicts() async throws {
        try await withTimeout(seconds: 300) { () async throws -> Void in
            let (updates, input) = AsyncThrowingStream.makeStream(of: Int.self)
            let shared = updates.replay(2, buffering: .evicting(1))
            var driver = shared.buffering(.unbounded).makeAsyncIterator()
            input.yield(1)
            #expect(try await driver.next() == 1)  // this wait started the upstream
            input.yield(2)
            input.yield(3)
            #expect(try await driver.next() == 2)
            #expect(try await driver.next() == 3)
            var greeted = shared.makeAsyncIterator()  // greeted with 2, 3
            var stalled = shared.makeAsyncIterator()
            #expect(try await greeted.next() == 2)
            #expect(try await greeted.next() == 3)
            input.yield(4)
            #expect(try await driver.next() == 4)
            #expect(try await greeted.next() == 4, "one live element: the limit")
            input.yield(5)
            #expect(try await driver.next() == 5)
            await #expect(throws: SubscriberEvictedError.self) {
                _ = try await stalled.next()  // 4 and 5 came after it joined
            }
            #expect(shared.subscriberCount == 2)
            input.finish()
            #expect(try await greeted.next() == 5)
            #expect(try await greeted.next() == nil)
        }
    }

    @Test("what an evicting subscriber keeps alive: its greeting, on top of the n live elements it may hold")
    func evictingSubscriberMemoryWithAGreeting() async {
        let subject = AsyncReplaySubject<Token, Never>(replay: 4, buffering: .evicting(1))
        var boxes: [WeakBox] = []
        do {
            let tokens = (1...4).map(Token.init)
            boxes = tokens.map(WeakBox.init)
            for token in tokens { subject.send(token) }
        }
        var reader = subject.makeAsyncIterator()  // greeted with 1…4
        subject.resetReplayCache()  // the cache no longer holds them
        do {
            let live = Token(5)
            boxes.append(WeakBox(live))
            subject.send(live)  // one live element: the limit
        }
        let alive = boxes.filter { $0.token != nil }.count
        #expect(alive == 5, "the greeting (4) and the live element (1) are all owed")
        // The Serving clients guide's memory bound: `n`, plus a greeting not read yet.
        var received: [Int] = []
        subject.finish()
        while let token = await reader.next() { received.append(token.value) }
        #expect(received == [1, 2, 3, 4, 5])
    }

    @Test("an .evicting(2) client greeted with a replay of 8: the greeting never evicts; the third new element does")
    func evictingClientWithAGreeting() async throws {
        let subject = AsyncReplaySubject<Int, Never>(replay: 8)
        for value in 0..<8 { subject.send(value) }
        var keeping = subject.events(buffering: .evicting(2)).makeAsyncIterator()
        var stalled = subject.events(buffering: .evicting(2)).makeAsyncIterator()
        subject.send(100)
        subject.send(101)
        var events: [SharedEvent<Int>] = []
        for _ in 0..<10 { if let event = await keeping.next() { events.append(event) } }
        #expect(events == (Array(0..<8) + [100, 101]).map { .element($0) }, "greeting and 2 new: nothing lost")
        subject.send(102)  // `stalled` holds 2 new ones (and its greeting): evicted
        subject.send(103)
        subject.finish()
        let rest = await keeping.readAll()
        #expect(rest == [.element(102), .element(103)])
        let stalledEvents = await stalled.readAll()
        #expect(stalledEvents.last == .evicted(.hardLimit(2)), "\(stalledEvents)")
        #expect(!stalledEvents.contains { if case .missed = $0 { return true } else { return false } })
    }
}
