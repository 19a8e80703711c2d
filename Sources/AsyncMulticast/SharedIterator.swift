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
    @usableFromInline
    let connectsOnDemand: Bool
    /// Ready elements taken in one lock acquisition and not returned yet; the shared buffer
    /// counts them as pending for this subscriber until the next refill commits them.
    @usableFromInline
    var batch: [Element] = []
    @usableFromInline
    var batchIndex = 0

    @inlinable
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
    @inlinable
    public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(Failure) -> Element? {
        if self.batchIndex < self.batch.count, !Task.isCancelled {
            defer { self.batchIndex &+= 1 }
            return self.batch[self.batchIndex]
        }
        let consumed = self.batchIndex
        self.batch.removeAll(keepingCapacity: true)
        self.batchIndex = 0
        return try await self.subscription.storage.next(
            self.subscription.id, committing: consumed, batch: &self.batch,
            connectOnDemand: self.connectsOnDemand, isolation: actor)
    }

    /// The next element; see ``next(isolation:)``.
    @inlinable
    public mutating func next() async throws(Failure) -> Element? {
        try await self.next(isolation: nil)
    }

    /// Ties the subscriber's lifetime to the iterator: releasing the last copy leaves.
    @usableFromInline
    final class Subscription: Sendable {
        @usableFromInline
        let storage: MulticastStorage<Element, Failure>
        @usableFromInline
        let id: SubscriberID

        @inlinable
        init(storage: MulticastStorage<Element, Failure>, id: SubscriberID) {
            self.storage = storage
            self.id = id
        }

        deinit {
            self.storage.unsubscribe(self.id)
        }
    }
}
