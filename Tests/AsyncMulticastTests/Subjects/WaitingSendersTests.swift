// A subject's senders waiting for room (`send(waitingForRoom:)`): they go in first in, first
// out, whatever their tasks' priorities; a cancelled one goes in at once; completion releases
// them; a reader answering into its own bounded subject never waits for itself.
//
// A few gates read the storage (`@testable`, `producersWaitingForRoom`) to know that a sender
// has parked: the public API has no way to tell, and the order the tests check depends on it.

import Testing

@testable import AsyncMulticast

@Suite("Subjects: senders waiting for room", .serialized, .timeLimit(.minutes(15)))
struct WaitingSendersTests {
    @Test("cancelled waiting senders go in at once, in the order they were cancelled, ahead of those still waiting")
    func cancelledSendersGoAhead() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0x5E4D)
            for round in 0..<30 {
                let subject = AsyncReplaySubject<Int, Never>(replay: 100, buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)  // full
                let values = Array(1...8)
                let senders = try await parkInOrder(values, storage: subject.storage) {
                    await subject.send(waitingForRoom: $0)
                }
                var cancelled: [Int] = []
                for index in values.indices.shuffled(using: &rng).prefix(Int(rng.next() % 5)) {
                    senders[index].cancel()
                    // It returns without anyone reading: it stopped waiting.
                    try await withTimeout("cancelled sender \(values[index])", seconds: 300) {
                        await senders[index].value
                    }
                    cancelled.append(values[index])
                    #expect(subject.replayCache == [0] + cancelled, "round \(round): in at once, past the bound")
                }
                let waiting = values.filter { !cancelled.contains($0) }
                let received = await reader.take(values.count + 1)
                #expect(received == [0] + cancelled + waiting, "round \(round)")
                for sender in senders { await sender.value }
                #expect(subject.replayCache == received)
                await reader.leave()
            }
        }
    }

    @Test(
        "a waiting sender goes in as soon as a read makes room; a later one waits behind; a synchronous send goes first"
    )
    func laterSenderWaitsBehind() async throws {
        try await withTimeout(seconds: 300) {
            // .bounded(4): room below 4; a read takes up to 2 extra elements.
            let subject = AsyncReplaySubject<Int, Never>(replay: 100, buffering: .bounded(4))
            let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
            for value in 1...6 { subject.send(value) }  // holds 6, past the bound
            let first = try await parkInOrder([7], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            #expect(await reader.next() == 1)  // takes 2 and 3: holds 3, room for one: 7 goes in
            await first[0].value
            #expect(subject.replayCache.last == 7, "the waiting sender went in with the read that made room")
            let second = try await parkInOrder([8], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            subject.send(9)
            #expect(subject.replayCache.last == 9, "the synchronous send went in at once, ahead of 8")
            #expect(await reader.take(8) == [2, 3, 4, 5, 6, 7, 9, 8])
            await second[0].value
            await reader.leave()
        }
    }

    @Test(
        "after finish() or fail() waiting senders return at once; their elements are ignored",
        arguments: [false, true])
    func completionReleasesWaitingSenders(_ fails: Bool) async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncPassthroughSubject<Int, TestError>(buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()
            subject.send(0)
            let tasks = (1...6).map { value in Task { await subject.send(waitingForRoom: value) } }
            let (lines, input) = AsyncStream.makeStream(of: Int.self)
            for value in 10...12 { input.yield(value) }
            let contents = Task { await subject.send(contentsOf: lines) }
            try await waitUntil("all senders parked") { subject.storage.producersWaitingForRoom == 7 }
            if fails { subject.fail(.boom) } else { subject.finish() }
            for task in tasks { await task.value }
            await contents.value
            await subject.send(waitingForRoom: 99)  // after the end: returns at once
            let (received, failure) = await collect(&reader)
            #expect(received == [0])
            #expect(failure == (fails ? .boom : nil))
            input.finish()
        }
    }

    @Test(
        "the last bounded subscriber leaving releases the waiting senders in order; an earlier one leaving does not",
        arguments: 0..<3)
    func lastBoundedSubscriberLeaving(_ how: Int) async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncReplaySubject<Int, Never>(replay: 100, buffering: .bounded(1))
            let first = await SubscriberTask.join { subject.makeAsyncIterator() }
            let second = await SubscriberTask.join { subject.buffering(.bounded(2)).makeAsyncIterator() }
            var lossy = subject.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            subject.send(0)
            subject.send(1)  // both full
            let senders = try await parkInOrder(Array(2...7), storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            await first.leave()
            #expect(subject.replayCache == [0, 1], "the other is still full")
            switch how {
            case 0: await second.leave()
            case 1: await second.cancel()
            default:
                // It reads: room comes back two at a time, in order.
                #expect(await second.take(8) == Array(0...7))
                await second.leave()
            }
            for sender in senders { await sender.value }
            #expect(subject.replayCache == Array(0...7), "first in, first out")
            subject.finish()
            let summary = LagSummary(await drain(&lossy))
            #expect(summary.elements.isEmpty && summary.missed == 8)
        }
    }

    @Test("a lone reader answering into its own bounded subject never waits for itself, for bursts up to the bound")
    func echoLoopsWithBurstsUpToTheBound() async throws {
        try await withTimeout(seconds: 300) {
            for bound in 1...8 {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
                var echo = subject.makeAsyncIterator()
                // A bystander that does not count against the bound watches everything.
                let bystander = subject.buffering(.unbounded).makeAsyncIterator()
                let watching = Task {
                    var bystander = bystander
                    let values = await bystander.readAll()
                    return values
                }
                for value in 0..<bound { subject.send(value) }  // a burst of exactly the bound
                var seen: [Int] = []
                while seen.count < 300, let value = await echo.next() {
                    seen.append(value)
                    await subject.send(waitingForRoom: value + bound)
                }
                subject.finish()
                #expect(seen == Array(0..<300), "bound \(bound)")
                let watched = await watching.value
                #expect(watched == Array(0..<300 + bound), "bound \(bound)")
            }
        }
    }

    @Test("an answering reader next to a second bounded reader: its answer waits for itself once the other was full")
    func echoNextToASecondBoundedReader() async throws {
        try await withTimeout(seconds: 300) {
            // .bounded(4): room while a subscriber holds at most 3, resume at 2; a read takes
            // up to 2 extra elements. A burst of 4 (the bound, not past it), no other sender.
            let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
            var echo = subject.makeAsyncIterator()
            var other = subject.makeAsyncIterator()  // reads whenever it likes
            for value in 0...3 { subject.send(value) }
            #expect(await echo.next() == 0)  // takes 0, 1, 2
            #expect(await other.next() == 0)  // takes 0, 1, 2
            await subject.send(waitingForRoom: 4)  // the answer to 0
            #expect(await echo.next() == 1)
            for value in 1...3 { #expect(await other.next() == value) }  // 3 takes 4 as well
            await subject.send(waitingForRoom: 5)  // the answer to 1
            #expect(await echo.next() == 2)
            await subject.send(waitingForRoom: 6)  // the answer to 2
            #expect(await echo.next() == 3)  // takes 3, 4, 5: it holds 6
            await subject.send(waitingForRoom: 7)  // the answer to 3
            #expect(await echo.next() == 4)
            await subject.send(waitingForRoom: 8)  // the answer to 4
            #expect(await echo.next() == 5)
            // The echo holds 6, 7, 8 (room for one more); the other holds 5…8: full.
            let answered = LockedFlag()
            let answer = Task {
                await subject.send(waitingForRoom: 9)  // the answer to 5
                answered.set()
            }
            try await waitUntil("the answer waits for room") { subject.storage.producersWaitingForRoom == 1 }
            // The other reads everything it holds and waits for more.
            let otherIterator = SubscriberBox(other)
            for value in 4...8 { #expect(await otherIterator.next() == value) }  // 4 from its batch
            // Subjects guide: "every number it reads makes room for its answer and it never waits
            // for itself". The other reader made room, so the answer went in, although the echo
            // (holding 3 of 4) is above half the bound: the echo did not have to read first.
            await answer.value
            #expect(answered.isSet)
            #expect(await otherIterator.next() == 9)
            #expect(await echo.next() == 6)  // takes 6, 7, 8
            subject.finish()
        }
    }

    @Test("ping-pong between two .bounded(1) subjects, each reader answering into the other: no deadlock")
    func pingPong() async throws {
        try await withTimeout(seconds: 300) {
            let ping = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let pong = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
            let pingReader = ping.makeAsyncIterator()
            let pongReader = pong.makeAsyncIterator()
            let a = Task {
                var reader = pingReader
                var last = -1
                while let value = await reader.next() {
                    last = value
                    if value >= 2_000 { pong.finish() } else { await pong.send(waitingForRoom: value + 1) }
                }
                return last
            }
            let b = Task {
                var reader = pongReader
                while let value = await reader.next() {
                    if value >= 2_000 { break }
                    await ping.send(waitingForRoom: value + 1)
                }
                ping.finish()
            }
            ping.send(0)
            await b.value
            #expect(await a.value == 2_000)
        }
    }

    @Test("waiting senders from many tasks, a reader, cancellations and finish() racing: nothing twice, order kept")
    func sendersRacingEverything() async throws {
        try await withTimeout(seconds: 300) {
            var rng = LCG(seed: 0xFEED)
            for round in 0..<40 {
                let bound = 1 + Int(rng.next() % 3)
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(bound))
                let iterator = subject.makeAsyncIterator()
                let reader = Task {
                    var iterator = iterator
                    var values: [Int] = []
                    while let value = await iterator.next() {
                        values.append(value)
                        if values.count % 5 == 0 { await Task.yield() }
                    }
                    return values
                }
                let cancelledSenders = Set((0..<6).filter { _ in rng.next() % 3 == 0 })
                let attempted = LockedLog<Int>()
                let senders = (0..<6).map { s in
                    Task {
                        for i in 0..<60 {
                            attempted.append(s * senderStride + i)
                            await subject.send(waitingForRoom: s * senderStride + i)
                        }
                    }
                }
                let yields = Int(rng.next() % 200)
                for _ in 0..<yields { await Task.yield() }
                for s in cancelledSenders { senders[s].cancel() }
                for _ in 0..<Int(rng.next() % 100) { await Task.yield() }
                let finishedEarly = rng.next() % 2 == 0
                if finishedEarly { subject.finish() }
                for sender in senders { await sender.value }
                subject.finish()
                let received = await reader.value
                #expect(Set(received).count == received.count, "round \(round): nothing twice")
                #expect(isIncreasingPerSender(received), "round \(round)")
                #expect(Set(received).isSubset(of: Set(attempted.values)))
                if !finishedEarly {
                    #expect(received.count == 360, "round \(round): nothing lost without an early finish")
                }
            }
        }
    }

    @Test("waiting senders go in first in, first out whatever their tasks' priorities")
    func fifoWhateverThePriorities() async throws {
        try await withTimeout(seconds: 300) {
            let priorities: [TaskPriority] = [.background, .high, .low, .userInitiated, .utility, .medium]
            for round in 0..<10 {
                let subject = AsyncReplaySubject<Int, Never>(replay: 100, buffering: .bounded(3))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                for value in 0...2 { subject.send(value) }  // full
                var senders: [Task<Void, Never>] = []
                for (index, value) in (3...14).enumerated() {
                    let priority = priorities[(index + round) % priorities.count]
                    senders.append(Task(priority: priority) { await subject.send(waitingForRoom: value) })
                    try await waitUntil("sender of \(value) parked") {
                        subject.storage.producersWaitingForRoom == index + 1
                    }
                }
                #expect(await reader.take(15) == Array(0...14), "round \(round)")
                for sender in senders { await sender.value }
                #expect(subject.replayCache == Array(0...14))
                await reader.leave()
            }
        }
    }

    @Test("a current-value subject's waiting senders after finish(): ignored, and `value` stays the last sent")
    func currentValueWaitingSendersAfterFinish() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncCurrentValueSubject<Int, Never>(0, buffering: .bounded(1))
            var reader = subject.makeAsyncIterator()  // holds the current value: full
            let senders = try await parkInOrder([1, 2, 3], storage: subject.storage) {
                await subject.send(waitingForRoom: $0)
            }
            #expect(subject.value == 0, "nothing went in")
            subject.finish()
            for sender in senders { await sender.value }
            #expect(subject.value == 0)
            #expect(await reader.next() == 0)
            #expect(await reader.next() == nil)
        }
    }

    @Test("send(waitingForRoom:) returns at once with only evicting, dropping and unbounded subscribers")
    func waitingForRoomWithoutBoundedSubscribers() async throws {
        try await withTimeout(seconds: 300) {
            let subject = AsyncReplaySubject<Int, Never>(replay: 8, buffering: .evicting(1))
            for value in 1...8 { subject.send(value) }
            var greeted = subject.makeAsyncIterator()  // a greeting of 8: past its limit of 1
            var newest = subject.events(buffering: .bufferingNewest(0)).makeAsyncIterator()
            var unbounded = subject.buffering(.unbounded).makeAsyncIterator()
            for value in 9...20 { await subject.send(waitingForRoom: value) }
            #expect(subject.replayCache == Array(13...20))
            subject.finish()
            #expect(await greeted.next() == nil, "evicted by the live ones, not by the greeting")
            #expect(await newest.next() == .missed(12))
            let received = await unbounded.readAll()
            #expect(received == Array(1...20))
        }
    }

    @Test("released senders' elements reach a subscriber waiting in next() in their order, by a read or a leave")
    func releasedElementsReachWaitingSubscribers() async throws {
        try await withTimeout(seconds: 300) {
            for leaves in [false, true] {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
                let full = await SubscriberTask.join { subject.makeAsyncIterator() }
                let watching = (0..<3).map { _ in
                    let iterator = subject.buffering(.unbounded).makeAsyncIterator()
                    return Task {
                        var iterator = iterator
                        let values = await iterator.readAll()
                        return values
                    }
                }
                subject.send(0)  // `full` is full; the watchers take 0 and wait again
                try await waitUntil("the watchers wait") { subject.storage.waitingCount == 3 }
                let senders = try await parkInOrder(Array(1...6), storage: subject.storage) {
                    await subject.send(waitingForRoom: $0)
                }
                if leaves {
                    await full.leave()
                } else {
                    #expect(await full.take(7) == Array(0...6))
                }
                for sender in senders { await sender.value }
                subject.finish()
                for task in watching {
                    #expect(await task.value == Array(0...6), "leaves: \(leaves)")
                }
                if !leaves { #expect(await full.next() == nil) }
            }
        }
    }

    @Test("waiting senders (FIFO) racing the reader and finish(), 60 times: what got in is a prefix of their order")
    func fifoSendersRacingFinish() async throws {
        try await withTimeout(seconds: 300) {
            var generator = LCG(seed: 47)
            for round in 0..<60 {
                let subject = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(1))
                let reader = await SubscriberTask.join { subject.makeAsyncIterator() }
                subject.send(0)
                var senders: [Task<Void, Never>] = []
                for value in 1...6 {
                    senders.append(Task { await subject.send(waitingForRoom: value) })
                    try await waitUntil("sender \(value) parked") { subject.storage.producersWaitingForRoom == value }
                }
                let k = Int.random(in: 0...7, using: &generator)
                let start = Latch()
                let finisher = Task {
                    await start.wait()
                    subject.finish()
                }
                start.release()
                var received = await reader.take(k)
                await finisher.value
                received += await reader.drain().elements
                for sender in senders { await sender.value }
                #expect(received == Array(0..<received.count), "round \(round): \(received)")
            }
        }
    }
}
