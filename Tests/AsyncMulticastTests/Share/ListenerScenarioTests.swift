// Scenarios from the articles that motivated the project: several parts of an app listening
// to one producer. With a plain AsyncStream they split the elements between them, a cancelled
// listener ends the stream for everyone, and a late listener cannot join. With share() each
// listener sees everything from when it joined, and the producer ends only when the last
// listener is gone. (The same needs met with subjects and multicast():
// Subjects/SubjectScenarioTests.swift.)

import Testing

@testable import AsyncMulticast

@Suite("Scenarios: several listeners of one producer, with share()")
struct ListenerScenarioTests {
    @Test func twoSubscribersOfOneProducerBothSeeEverything() async throws {
        try await withTimeout {
            let (stream, producer) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            var first = shared.makeAsyncIterator()
            var second = shared.makeAsyncIterator()
            let a = Task {
                let received = await first.readAll()
                return received
            }
            let b = Task {
                let received = await second.readAll()
                return received
            }
            let feeding = Task {
                for n in 1...9 {
                    producer.yield(n)
                    await Task.yield()
                }
                producer.finish()
            }
            await feeding.value
            #expect(await a.value == Array(1...9), "not split between the subscribers")
            #expect(await b.value == Array(1...9))
        }
    }

    @Test func cancellingOneSubscriberHalfwayLeavesTheOtherAndTheProducerAlone() async throws {
        try await withTimeout {
            let (stream, producer, terminations) = TerminationRecorder.recordedStream()
            let shared = stream.share()
            let halfway = Signal<Void>()
            var cancelledIterator = shared.makeAsyncIterator()
            var stayingIterator = shared.makeAsyncIterator()
            let cancelled = Task { await cancelledIterator.readAll(announcing: 5, to: halfway) }
            let staying = Task {
                let received = await stayingIterator.readAll()
                return received
            }
            for n in 1...5 { producer.yield(n) }
            _ = await halfway.next("the subscriber to be cancelled to reach 5")
            cancelled.cancel()
            #expect(await cancelled.value == [1, 2, 3, 4, 5])
            #expect(shared.subscriberCount == 1)
            for n in 6...9 { producer.yield(n) }
            #expect(terminations.all.isEmpty, "the producer is not told to stop while someone listens")
            producer.finish()
            #expect(await staying.value == Array(1...9))
            #expect(terminations.all == [.finished], "the producer ended by finishing, at the end")
        }
    }

    @Test func lateSubscriberStartsFromTheCurrentElement() async throws {
        try await withTimeout {
            let (stream, producer) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            var early = shared.makeAsyncIterator()
            for n in 1...5 { producer.yield(n) }
            for n in 1...5 { #expect(await early.next() == n) }
            var late = shared.makeAsyncIterator()
            for n in 6...9 { producer.yield(n) }
            producer.finish()
            let lateReceived = await late.readAll()
            #expect(lateReceived == [6, 7, 8, 9], "not from 1")
            let earlyRest = await early.readAll()
            #expect(earlyRest == [6, 7, 8, 9])
        }
    }
}
