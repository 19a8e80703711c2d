/// An iterator over a shared sequence. **Each iterator is one subscriber.**
///
/// It is registered when it is created (by `makeAsyncIterator()`, which `for await` calls
/// for you) and receives every element produced from then on, subject to the sequence's
/// ``SharedBufferingPolicy``. It leaves when its task is cancelled, when it has returned
/// `nil` or thrown, or when it is released, whichever comes first.
///
/// Iterate it from one task; it is not meant to be shared between tasks. Do not copy it
/// either: copies are the same subscriber, but each copy holds its own copy of the elements
/// the iterator has already taken, so both would return them.
///
/// ```swift
/// let shared = numbers.share()
/// var iterator = shared.makeAsyncIterator()    // subscribed from here on
/// while let n = await iterator.next() { print(n) }
/// ```
public struct SharedIterator<Element: Sendable, Failure: Error>: AsyncIteratorProtocol {
    @usableFromInline let subscription: Subscription
    /// Ready elements taken in one lock acquisition and not returned yet (see
    /// `ElementBatch`).
    @usableFromInline
    var batch = ElementBatch<Element>()

    @inlinable
    init(
        storage: MulticastStorage<Element, Failure>,
        policy: SharedBufferingPolicy? = nil,
        connectRule: ConnectRule = .never
    ) {
        self.subscription = Subscription(storage: storage, policy: policy, connectRule: connectRule)
    }

    /// The iterator of a subscriber that has already joined (``SharedSubscription``).
    @inlinable
    init(subscription: Subscription) {
        self.subscription = subscription
    }

    /// The next element, `nil` once the sequence finished or this subscriber's task was
    /// cancelled, or the upstream's error.
    ///
    /// Cancelling the calling task while it waits makes this return `nil` at once and
    /// removes only this subscriber. A cancelled task that calls `next()` again gets `nil`
    /// as soon as its iterator has returned the elements it had already taken (at most
    /// `min(n / 2, 64)` under `.bounded(n)`, `.evicting(n)` or `.bufferingNewest(n)`, 64
    /// under `.unbounded`, none under `.bufferingOldest`), as an `AsyncStream` returns what
    /// it buffered. Under `.bufferingNewest(n)` the policy may still drop those it took
    /// ahead: each is returned only if reading it then would have returned it.
    @inlinable @inline(__always)
    public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(Failure) -> Element? {
        // Cancellation is observed when the batch is used up (by `MulticastStorage.refill`,
        // or by `wait`'s cancellation handler when the refill skips its read) and while
        // waiting, not for every element taken: `Task.isCancelled` costs far more than
        // popping an element.
        if let element = self.batch.popFirst() {
            return element
        }
        // The batch is used up: refilled synchronously when something is ready (no async
        // call for that), else wait. Kept out of line so that `next` stays small enough to
        // be inlined into the caller's loop.
        switch self.refillBatch(mayWaitForOffers: actor == nil) {
        case .element(let element):
            return element
        case .ended(let result):
            return try result.get()
        case .nothingReady:
            return try await self.waitForElement(isolation: actor)
        case .gap:
            preconditionFailure("a read reported a gap to an iterator that does not report gaps")
        }
    }

    /// `next()` once the batch is used up: `MulticastStorage.refill`, with an eviction
    /// turned into ``SubscriberEvictedError`` when `Failure` can carry it.
    @inlinable
    mutating func refillBatch(mayWaitForOffers: Bool) -> MulticastStorage<Element, Failure>.Refill {
        var report = ReadReport()
        let refill = self.batch.refill(
            from: self.subscription.storage, subscriber: self.subscription.id, held: self.subscription.held,
            report: &report, mayWaitForOffers: mayWaitForOffers)
        if case .ended(.success(nil)) = refill, report.evicted {
            return .ended(self.endedByEviction(report.evictionCode))
        }
        return refill
    }

    /// `next()` once `refillBatch` found nothing ready.
    ///
    /// Always inlined, as `next(isolation:)` is: with the line that remembers the offer count,
    /// the inliner left this function out of line (4,563 → 4,673 instructions per delivery,
    /// lockstep N = 64, callgrind), and once it was forced in, `next` itself (4,754).
    @inlinable @inline(__always)
    mutating func waitForElement(isolation actor: isolated (any Actor)?) async throws(Failure) -> Element? {
        var report = ReadReport()
        let element = try await self.subscription.storage.wait(
            self.subscription.id, report: &report,
            isolation: actor)
        // Resumed at the tail: its next refill may skip its read (`ReadReport.offersWhenParked`).
        self.batch.offersWhenCaughtUp = report.offersWhenParked
        if element == nil, report.evicted { return try self.endedByEviction(report.evictionCode).get() }
        return element
    }

    /// The iteration learned that its subscriber was evicted: records it (for a
    /// ``SharedSubscription``'s `waitForEviction()`), and ends with ``SubscriberEvictedError``
    /// when `Failure` can carry it, else with `nil`. Out of line, and given the report's
    /// one-word `evictionCode` rather than the report: the usual `next()` must stay small
    /// enough to be inlined into the caller's loop (passing the whole report made
    /// `waitForElement` an async function of its own: 4,528 → 4,951 instructions per
    /// delivery, lockstep N=64, `compare --instructions`).
    @inlinable
    @inline(never)
    func endedByEviction(_ evictionCode: UInt64) -> Result<Element?, Failure> {
        guard let eviction = ReadReport.eviction(from: evictionCode) else { return .success(nil) }
        self.subscription.recordEviction(eviction)
        if let error = SubscriberEvictedError(eviction) as? Failure { return .failure(error) }
        return .success(nil)
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
        /// Where a ``SharedSubscription`` learns that this subscriber's iteration ended by its
        /// eviction (`recordEviction()`), after it has left; `nil` for a plain iterator.
        @usableFromInline
        let evictionRecord: Lock<SubscriberEviction?>?
        /// Under `.bufferingNewest(n)`, `n` of 2 or more: where its iterator keeps the batch it
        /// took ahead, which the policy may still drop (`HeldBatch`); `nil` otherwise.
        @usableFromInline
        let held: HeldBatchSlot<Element>

        /// Subscribes to `storage`; see ``ConnectRule`` for `connectRule`.
        @inlinable
        init(
            storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy?, connectRule: ConnectRule,
            evictionRecord: Lock<SubscriberEviction?>? = nil
        ) {
            self.storage = storage
            self.evictionRecord = evictionRecord
            self.held = .heldBatchSlot(for: policy, of: storage)
            // The machine keeps the connect rule in the subscriber's slot.
            self.id = storage.subscribe(policy: policy, connectRule: connectRule)
        }

        /// The subscriber `id`, which has already joined `storage` with `policy` (a resumed
        /// subscriber, `MulticastStorage.subscribe(after:policy:connectRule:)`).
        @inlinable
        init(
            storage: MulticastStorage<Element, Failure>, joined id: SubscriberID,
            policy: SharedBufferingPolicy?, evictionRecord: Lock<SubscriberEviction?>?
        ) {
            self.storage = storage
            self.evictionRecord = evictionRecord
            self.held = .heldBatchSlot(for: policy, of: storage)
            self.id = id
        }

        /// The iteration learned that the subscriber was evicted (it is leaving).
        @inlinable
        func recordEviction(_ eviction: SubscriberEviction) {
            self.evictionRecord?.withLock { $0 = eviction }
        }

        deinit {
            // Through the storage's closure: it calls the specialized `unsubscribe`.
            self.storage.leave(self.storage, self.id)
        }
    }
}

/// How the subscribers of a multicast seen through `autoconnect` connect it.
@usableFromInline
enum ConnectRule: Sendable, Hashable {
    /// They never connect it (`share()` and subjects have no connection; plain `multicast()`).
    case never
    /// `autoconnect()`: waiting in `next()` connects it.
    case onDemand
    /// `autoconnect(minimumSubscribers:)`: joining connects it once at least this many
    /// subscribers are present.
    case atSubscriberCount(Int)
}
