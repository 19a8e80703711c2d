/// The number of subscribers of a shared sequence or subject, as it changes: the current
/// count first, then each new count.
///
/// Like a `StateFlow` (Kotlin's `subscriptionCount`): an observer that is slower than the
/// changes skips to the latest count, so it never falls behind and never sees a count that
/// is out of date by the time it reads the next one. The sequence does not end by itself;
/// it ends when the observing task is cancelled. Get it from `subscriberCounts` on any
/// shared sequence or subject.
///
/// ```swift
/// let location = locationUpdates.share()
/// Task {
///     for await count in location.subscriberCounts {
///         print("screens showing the location: \(count)")
///     }
/// }
/// ```
public struct AsyncSubscriberCounts: AsyncSequence, Sendable {
    public typealias Element = Int
    public typealias Failure = Never

    /// Registers an observer; erased so that the sequence does not carry the element type.
    @usableFromInline
    let observe: @Sendable () -> Observation

    @inlinable
    init<Element: Sendable, Failure: Error>(storage: MulticastStorage<Element, Failure>) {
        self.observe = {
            let cell = storage.observeSubscriberCount()
            return Observation(cell: cell) { storage.stopObservingSubscriberCount(cell) }
        }
    }

    /// Starts observing: the first `next()` returns the current count.
    @inlinable
    public func makeAsyncIterator() -> Iterator {
        Iterator(observation: self.observe())
    }

    /// An observer of the subscriber count. It stops observing when released, when its
    /// task is cancelled, or once it has returned `nil`.
    public struct Iterator: AsyncIteratorProtocol {
        @usableFromInline
        let observation: Observation

        @inlinable
        init(observation: Observation) {
            self.observation = observation
        }

        /// The current count the first time, then the next count that differs from the
        /// last one returned; `nil` once the task is cancelled.
        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async -> Int? {
            guard let count = await self.observation.cell.next(isolation: actor) else {
                self.observation.stop()
                return nil
            }
            return count
        }

        /// See ``next(isolation:)``.
        @inlinable
        public mutating func next() async -> Int? {
            await self.next(isolation: nil)
        }
    }

    /// Ties the observer's registration to the iterator's lifetime.
    @usableFromInline
    final class Observation: Sendable {
        @usableFromInline
        let cell: SubscriberCountCell
        @usableFromInline
        let stop: @Sendable () -> Void

        @inlinable
        init(cell: SubscriberCountCell, stop: @escaping @Sendable () -> Void) {
            self.cell = cell
            self.stop = stop
        }

        deinit {
            self.stop()
        }
    }
}
