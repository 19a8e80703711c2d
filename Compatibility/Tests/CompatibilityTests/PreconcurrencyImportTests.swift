import AsyncMulticast
@preconcurrency import OpenCombine
import Synchronization
import Testing

/// `AsyncSharedSource`'s documented Combine example, as a user writes it: Combine's
/// publishers are not `Sendable`, and `start` is `@Sendable`, so the example compiles in
/// Swift 6 mode only after `@preconcurrency import` of the Combine module (without it: "capture
/// of 'pricePublisher' with non-Sendable type … in a '@Sendable' closure"). No box needed.
@Suite("@preconcurrency import OpenCombine", .timeLimit(.minutes(2)))
struct PreconcurrencyImportTests {
    @Test("the doc comment's example compiles as written, subscribes with the first demand and cancels after the last")
    func docExampleWithPreconcurrencyImport() async {
        let pricePublisher = CurrentValueSubject<Double, Never>(100)
        let subscriptions = Mutex(0)
        let observed = pricePublisher.handleEvents(receiveSubscription: { _ in subscriptions.withLock { $0 += 1 } })

        let prices = AsyncSharedSource<Double, Never> { emitter in
            let subscription = observed.sink { emitter.send($0) }  // AnyCancellable
            return { subscription.cancel() }
        }

        var screen = prices.makeAsyncIterator()
        #expect(subscriptions.withLock { $0 } == 0, "joining alone subscribes to nothing")
        #expect(await screen.next() == 100)  // the first demand subscribes
        pricePublisher.send(101)
        #expect(await screen.next() == 101)
        #expect(subscriptions.withLock { $0 } == 1)
    }
}
