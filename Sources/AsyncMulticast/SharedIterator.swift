/// An iterator over a shared sequence. **Each iterator is one subscriber.**
///
/// It is registered when it is created (by `makeAsyncIterator()`, which `for await` calls
/// for you) and receives every element produced from then on, subject to the sequence's
/// ``SharedBufferingPolicy``. It leaves when its task is cancelled, when it has returned
/// `nil` or thrown, or when it is released, whichever comes first.
///
/// Iterate it from one task; it is not meant to be shared between tasks.
///
/// ```swift
/// let shared = numbers.share()
/// var iterator = shared.makeAsyncIterator()    // subscribed from here on
/// while let n = await iterator.next() { print(n) }
/// ```
public struct SharedIterator<Element: Sendable, Failure: Error>: AsyncIteratorProtocol {
    @usableFromInline let subscription: Subscription
    /// Set for iterators of an autoconnecting multicast: waiting connects it.
    let connectsOnDemand: Bool

    init(
        storage: MulticastStorage<Element, Failure>,
        policy: SharedBufferingPolicy? = nil,
        connectsOnDemand: Bool = false
    ) {
        self.subscription = Subscription(storage: storage, id: storage.subscribe(policy: policy))
        self.connectsOnDemand = connectsOnDemand
    }

    /// The next element, `nil` once the sequence finished or this subscriber's task was
    /// cancelled, or the upstream's error.
    ///
    /// Cancelling the calling task while it waits makes this return `nil` at once and
    /// removes only this subscriber.
    public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(Failure) -> Element? {
        try await self.subscription.storage.next(
            self.subscription.id, connectOnDemand: self.connectsOnDemand, isolation: actor)
    }

    /// The next element; see ``next(isolation:)``.
    public mutating func next() async throws(Failure) -> Element? {
        try await self.subscription.storage.next(
            self.subscription.id, connectOnDemand: self.connectsOnDemand, isolation: nil)
    }

    /// Ties the subscriber's lifetime to the iterator: releasing the last copy leaves.
    @usableFromInline
    final class Subscription: Sendable {
        let storage: MulticastStorage<Element, Failure>
        let id: SubscriberID

        init(storage: MulticastStorage<Element, Failure>, id: SubscriberID) {
            self.storage = storage
            self.id = id
        }

        deinit {
            self.storage.unsubscribe(self.id)
        }
    }
}
