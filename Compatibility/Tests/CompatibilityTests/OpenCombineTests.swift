import AsyncMulticast
import Clocks
import CombineBridge
import OpenCombine
import Synchronization
import Testing

/// An OpenCombine publisher bridged into the library's `AsyncSharedSource` (its
/// subscription is the session: made for the first subscriber, cancelled after the last)
/// and a shared sequence bridged out into OpenCombine sinks.
///
/// The subjects here are `CurrentValueSubject`s: a new subscription receives the current
/// value as soon as it has demand, so a subscriber that has read it knows the Combine
/// subscription is live. A `PassthroughSubject` would drop a value sent before then, and
/// nothing tells the test when that moment has passed.
@Suite("OpenCombine", .timeLimit(.minutes(2)))
struct OpenCombineTests {
    @Test("a subject as a shared source: subscribed with the first demand, cancelled after the last subscriber")
    func subjectAsSharedSource() async {
        let subject = CurrentValueSubject<Int, Never>(0)
        let subscriptions = SubscriptionLog()
        let source = subscriptions.observing(subject).sharedSource()

        do {
            var first = source.makeAsyncIterator()
            var second = source.makeAsyncIterator()
            #expect(subscriptions.subscriptions == 0, "joining alone subscribes to nothing")
            #expect(await first.next() == 0)  // the first demand subscribes
            #expect(await second.next() == 0)
            subject.send(1)
            #expect(await first.next() == 1)
            #expect(await second.next() == 1)
            do {
                _ = consume first  // one leaves; the other keeps the subscription
            }
            subject.send(2)
            #expect(await second.next() == 2)
            #expect(subscriptions.log.events == [.subscribed(1)])
        }
        await subscriptions.log.expect(.cancelled(1))

        subject.send(3)  // nobody subscribes: goes nowhere
        do {  // a new session subscribes again, greeted by the subject's current value
            var third = source.makeAsyncIterator()
            #expect(await third.next() == 3)
        }
        await subscriptions.log.expect(.cancelled(2))
        #expect(subscriptions.log.events == [.subscribed(1), .cancelled(1), .subscribed(2), .cancelled(2)])
    }

    @Test("keepAlive on a TestClock keeps the Combine subscription across a quick leave and return")
    func keepAliveKeepsTheSubscription() async {
        let clock = TestClock()
        let subject = CurrentValueSubject<String, Never>("idle")
        let subscriptions = SubscriptionLog()
        let status = subscriptions.observing(subject).sharedSource(replay: 1, keepAlive: .seconds(2), clock: clock)

        do {
            var screen = status.makeAsyncIterator()
            #expect(await screen.next() == "idle")
        }
        await clock.advance(by: .seconds(1))
        subject.send("busy")  // still subscribed: reaches the replay cache
        do {
            var screen = status.makeAsyncIterator()
            #expect(await screen.next() == "busy")
        }
        #expect(subscriptions.subscriptions == 1)
        await clock.advance(by: .seconds(3))
        await subscriptions.log.expect(.cancelled(1))
        #expect(subscriptions.subscriptions == 1)
    }

    @Test("a publisher's completion ends the source for good: no second subscription")
    func completionEndsTheSource() async {
        let subscriptions = SubscriptionLog()
        let numbers = subscriptions.observing([1, 2, 3].publisher).sharedSource()
        var elements: [Int] = []
        for await number in numbers { elements.append(number) }
        #expect(elements == [1, 2, 3])

        var late = numbers.makeAsyncIterator()
        #expect(await late.next() == nil)
        #expect(subscriptions.subscriptions == 1)
    }

    @Test("a publisher's failure reaches every subscriber as its typed error")
    func failureIsTyped() async throws {
        let subject = CurrentValueSubject<Int, Broken>(0)
        let source = subject.sharedSource()
        var first = source.makeAsyncIterator()
        var second = source.makeAsyncIterator()
        #expect(try await first.next() == 0)
        #expect(try await second.next() == 0)
        subject.send(completion: .failure(Broken()))
        #expect(await nextFailure(&first) == Broken())
        #expect(await nextFailure(&second) == Broken())
        var late = source.makeAsyncIterator()
        #expect(await nextFailure(&late) == Broken(), "a later subscriber gets the sticky error at once")
    }

    @Test("a shared sequence as a publisher: each sink is a subscriber, the last cancel stops the upstream")
    func sharedSequenceAsPublisher() async {
        let probe = UpstreamProbe()
        let shared = probe.sequence.share()
        let received = EventLog<Received>()

        let sinkA = shared.publisher().sink { received.record(.a($0)) }
        let sinkB = shared.publisher().sink { received.record(.b($0)) }
        #expect(shared.subscriberCount == 2, "a sink has subscribed when it returns")
        await received.expect(.a(1))
        await received.expect(.b(1))

        probe.send(2, toRun: 1)
        await received.expect(.a(2))
        await received.expect(.b(2))

        sinkA.cancel()
        probe.send(3, toRun: 1)
        await received.expect(.b(3))
        #expect(!received.events.contains(.a(3)), "a cancelled sink received a value")
        #expect(probe.log.events == [.started(run: 1)])

        sinkB.cancel()
        await probe.log.expect(.ended(run: 1))
        #expect(shared.subscriberCount == 0)
    }

    @Test("a Combine operator that cancels upstream (prefix) makes its shared subscriber leave")
    func prefixCancelsTheSharedSubscriber() async {
        let probe = UpstreamProbe()
        let shared = probe.sequence.share()
        let received = EventLog<Received>()
        let sink = shared.publisher().prefix(2).sink(
            receiveCompletion: { _ in received.record(.finished) },
            receiveValue: { received.record(.a($0)) })
        await probe.log.expect(.started(run: 1))
        probe.send(2, toRun: 1)
        await received.expect(.a(2))
        // OpenCombine 0.14's `prefix` (`Publishers.Output`) finishes when the element after
        // its last arrives, not right after its last as Apple's Combine does.
        probe.send(3, toRun: 1)
        await received.expect(.finished)
        #expect(received.events == [.a(1), .a(2), .finished])
        await probe.log.expect(.ended(run: 1))
        sink.cancel()
    }

    @Test("a library subject as a publisher: the current value first, then only what the subscriber demanded")
    func subjectAsPublisherHonoursDemand() async {
        let volume = AsyncCurrentValueSubject<Int, Never>(5, buffering: .unbounded)
        let received = EventLog<Received>()
        let subscription = Mutex<UncheckedSubscription?>(nil)
        // A subscriber that asks for one value, then for more only when told to.
        let subscriber = AnySubscriber<Int, Never>(
            receiveSubscription: { granted in
                subscription.withLock { $0 = UncheckedSubscription(granted) }
                granted.request(.max(1))
            },
            receiveValue: { value in
                received.record(.a(value))
                return .none
            },
            receiveCompletion: { _ in received.record(.finished) })
        volume.publisher().subscribe(subscriber)
        #expect(volume.subscriberCount == 1, "subscribing joined the subject")

        volume.send(6)
        volume.send(7)
        await received.expect(.a(5))
        #expect(received.events == [.a(5)], "more values were delivered than demanded")

        subscription.withLock { $0 }?.value.request(.max(2))
        await received.expect(.a(7))
        volume.finish()
        await received.expect(.finished)
        #expect(received.events == [.a(5), .a(6), .a(7), .finished])
    }

    @Test("round trip: subject, shared source, publisher, sinks; the sinks' cancels end the subscription")
    func roundTrip() async {
        let subject = CurrentValueSubject<Int, Never>(0)
        let subscriptions = SubscriptionLog()
        let shared = subscriptions.observing(subject).sharedSource(replay: 1)
        let received = EventLog<Received>()

        let sinkA = shared.publisher().sink { received.record(.a($0)) }
        await received.expect(.a(0))  // the first demand subscribed to the subject
        let sinkB = shared.publisher().sink { received.record(.b($0)) }
        await received.expect(.b(0))  // replayed to the later sink
        subject.send(1)
        await received.expect(.a(1))
        await received.expect(.b(1))
        #expect(subscriptions.subscriptions == 1)

        sinkA.cancel()
        sinkB.cancel()
        await subscriptions.log.expect(.cancelled(1))
    }
}

private struct Broken: Error, Equatable {}

/// A Combine subscription kept by a test to request more later; Combine lets a subscription
/// be used from any thread.
private struct UncheckedSubscription: @unchecked Sendable {
    let value: any Subscription

    init(_ value: any Subscription) {
        self.value = value
    }
}

/// The error `iterator`'s next `next()` throws, typed (`next()` throws `Broken`, not `any
/// Error`); `nil` if it returned instead.
private func nextFailure(_ iterator: inout SharedIterator<Int, Broken>) async -> Broken? {
    do {
        _ = try await iterator.next()
        return nil
    } catch {
        return error
    }
}

/// What the sinks of a test received, told apart by sink.
private enum Received: Sendable, Equatable, CustomStringConvertible {
    case a(Int)
    case b(Int)
    case finished

    var description: String {
        switch self {
        case .a(let value): "a(\(value))"
        case .b(let value): "b(\(value))"
        case .finished: "finished"
        }
    }
}
