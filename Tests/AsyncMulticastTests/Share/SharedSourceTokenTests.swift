// AsyncSharedSource's documented pattern with a token that is not Sendable (Combine's
// `AnyCancellable` is not): `start` creates it and returns a `stop` closure that captures it.
// This file compiles in Swift 6 language mode without `nonisolated(unsafe)` or
// `@unchecked Sendable` because `stop` need not be Sendable: it is called in the task that
// called `start`. The test checks that `stop` runs, with that session's token.

import Testing

@testable import AsyncMulticast

/// A fake publisher (think Combine's `PassthroughSubject`): `sink` registers a handler and
/// returns a token that removes it. It records which tokens were cancelled.
private final class Publisher: Sendable {
    private struct State: Sendable {
        var handlers: [Int: @Sendable (Int) -> Void] = [:]
        var nextToken = 1
        var cancelled: [Int] = []
    }
    private let state = Lock(State())
    /// The number of each token when `sink` hands it out.
    let subscribed = Signal<Int>()
    /// The number of each token when it is cancelled.
    let cancellations = Signal<Int>()

    func sink(_ handler: @escaping @Sendable (Int) -> Void) -> Cancellable {
        let token = self.state.withLock { state -> Int in
            defer { state.nextToken += 1 }
            state.handlers[state.nextToken] = handler
            return state.nextToken
        }
        self.subscribed.send(token)
        return Cancellable(token: token, publisher: self)
    }

    fileprivate func remove(_ token: Int) {
        self.state.withLock { state in
            state.handlers[token] = nil
            state.cancelled.append(token)
        }
        self.cancellations.send(token)
    }

    func publish(_ value: Int) {
        let handlers = self.state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(value) }
    }

    var cancelled: [Int] { self.state.withLock { $0.cancelled } }
}

/// Like `AnyCancellable`: a class that is not `Sendable` (mutable state, no lock).
private final class Cancellable {
    let token: Int
    private let publisher: Publisher
    private var isCancelled = false

    init(token: Int, publisher: Publisher) {
        self.token = token
        self.publisher = publisher
    }

    func cancel() {
        guard !self.isCancelled else { return }
        self.isCancelled = true
        self.publisher.remove(self.token)
    }
}

@Suite("AsyncSharedSource: a stop closure holding a non-Sendable token", .timeLimit(.minutes(2)))
struct SharedSourceTokenTests {
    @Test("the documented pattern compiles without unsafe annotations, and stop cancels that session's token")
    func stopCancelsTheSessionToken() async throws {
        let publisher = Publisher()
        // The documented shape, verbatim apart from the names.
        let prices = AsyncSharedSource<Int, Never> { emitter in
            let subscription = publisher.sink { emitter.send($0) }  // not Sendable
            return { subscription.cancel() }
        }

        /// Session `n`: a subscriber starts it (a new token) and reads the price published.
        func session(_ n: Int) async -> SubscriberTask<Int, Never> {
            let subscriber = await SubscriberTask.join { prices.makeAsyncIterator() }
            subscriber.request()
            #expect(await publisher.subscribed.next("session \(n) starting") == n)
            publisher.publish(10 * n)
            #expect(await subscriber.answer() == 10 * n)
            return subscriber
        }

        await session(1).leave()
        #expect(await publisher.cancellations.next("session 1 stopping") == 1, "stop cancelled the token start created")

        // Session 2: a new token, cancelled in its turn.
        await session(2).cancel()
        #expect(await publisher.cancellations.next("session 2 stopping") == 2)
        #expect(publisher.cancelled == [1, 2], "each token cancelled once, in order")
    }

    @Test("when the producer finishes, stop still cancels the token")
    func stopAfterFinish() async throws {
        let publisher = Publisher()
        let emitters = Signal<AsyncSharedSource<Int, Never>.Emitter>()
        let source = AsyncSharedSource<Int, Never> { emitter in
            let subscription = publisher.sink { emitter.send($0) }
            emitters.send(emitter)
            return { subscription.cancel() }
        }
        let reader = await SubscriberTask.join { source.makeAsyncIterator() }
        reader.request()
        let emitter = try #require(await emitters.next("the session starting"))
        publisher.publish(1)
        emitter.finish()
        #expect(await reader.answer() == 1)
        #expect(await reader.next() == nil)
        #expect(await publisher.cancellations.next("the session stopping") == 1)
        await reader.leave()
    }
}
