/// A subject that holds a current value and broadcasts every change, like Combine's
/// `CurrentValueSubject`, for Swift Concurrency.
///
/// Each iterator is a subscriber that first receives the current value, then every value
/// sent after it was created. Setting ``value`` sends it.
///
/// ```swift
/// let count = AsyncCurrentValueSubject<Int, Never>(0)
/// var screen = count.makeAsyncIterator()       // subscribed: it holds the current value, 0
/// count.update { $0 + 1 }                      // atomic read-modify-send
/// count.finish()
/// while let n = await screen.next() { print("count:", n) }   // count: 1 (it replaced the unread 0)
/// ```
///
/// The default policy, `.bufferingNewest(1)`, makes a slow subscriber skip to the latest
/// value, which is what a state holder wants. After ``finish()`` or ``fail(_:)`` further
/// sends are ignored and ``value`` keeps the last value; a subscriber created after
/// completion receives the last value, then the terminal event.
public final class AsyncCurrentValueSubject<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    @usableFromInline
    let storage: MulticastStorage<Element, Failure>

    /// Creates a subject holding `value`.
    ///
    /// - Parameters:
    ///   - value: the current value until the first ``send(_:)``; each new subscriber
    ///     receives the current value first.
    ///   - buffering: how each subscriber keeps values it has not consumed yet.
    ///     Under `.bounded(n)` the synchronous ``send(_:)`` buffers past `n` (it cannot wait).
    ///     With `.bufferingNewest(0)` or `.bufferingOldest(0)` a subscriber only receives
    ///     values sent while it waits in `next()`, so it does not receive the current value.
    @inlinable
    public init(_ value: Element, buffering: SharedBufferingPolicy = .bufferingNewest(1)) {
        buffering.validate(parameter: "buffering")
        self.storage = MulticastStorage(policy: buffering, replay: 1, mode: .push, upstream: nil)
        self.storage.send(value)
    }

    /// The current value: the last one sent. Setting it sends the new value (ignored after
    /// completion).
    ///
    /// Reading and setting are two separate operations: `value += 1` or
    /// `value.append(x)` compiles, but it reads, then sends, and a send from another task
    /// between the two is lost. Use ``update(_:)`` to change the value based on the current
    /// one atomically, or make every change from one place that runs them one at a time
    /// (an actor).
    @inlinable
    public var value: Element {
        get {
            guard let value = self.storage.latestElement else {
                preconditionFailure("a current-value subject always holds a value")
            }
            return value
        }
        set {
            self.storage.send(newValue)
        }
    }

    /// Replaces the current value with `transform(value)` and sends it, atomically: no
    /// other send can slip between reading the value and sending the new one (unlike
    /// `value += 1`, which reads and then sends). Ignored after completion.
    ///
    /// `transform` runs while the subject is locked: keep it short, and do not use this
    /// subject (or anything that waits for it) inside it.
    ///
    /// ```swift
    /// followers.update { $0 + 1 }
    /// ```
    public func update(_ transform: (Element) -> Element) {
        self.storage.updateLatest(transform)
    }

    /// Registers a new subscriber; it receives the current value first.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage)
    }

    /// Makes `element` the current value and delivers it to every subscriber. Never
    /// suspends; ignored after completion.
    @inlinable
    public func send(_ element: Element) {
        self.storage.send(element)
    }

    /// Like ``send(_:)``, but if a `.bounded(n)` subscriber holds `n` unconsumed values it
    /// first waits until every subscriber is down to half of `n`. Senders that wait go in
    /// first in, first out. A cancelled task stops waiting and sends at once, ahead of the
    /// senders still waiting.
    @inlinable
    public func send(waitingForRoom element: Element) async {
        await self.storage.sendWhenReady(element)
    }

    /// Sends every element of `elements`, in order, as ``send(waitingForRoom:)`` does (so a
    /// `.bounded` subscriber paces it), until `elements` ends, the calling task is cancelled
    /// or the subject completes: Combine's `publisher.subscribe(subject)`. It does not
    /// complete the subject when `elements` ends (call ``finish()``), so several sources can
    /// feed one subject; an error of `elements` is thrown to the caller, not sent.
    ///
    /// If the subject has already completed, it returns at once without iterating
    /// `elements`. If the subject completes, or the task is cancelled, while the call waits
    /// for the next element, the iteration of `elements` is cancelled and the call returns
    /// as soon as that `next()` does: at once for a sequence that stops on cancellation, such
    /// as `AsyncStream`. A completion that comes while an element waits for room cancels the
    /// iteration too: the call asks `elements` for one more element in a cancelled task, so
    /// it sees the cancellation (what it returns is ignored). `elements` is iterated on the
    /// caller's actor, in a task that ends before the call returns.
    ///
    /// ```swift
    /// Task { try await chat.send(contentsOf: databaseNotifications) }
    /// Task { try await chat.send(contentsOf: webSocketMessages) }
    /// ```
    @inlinable
    public func send<Elements: AsyncSequence>(
        contentsOf elements: Elements, isolation actor: isolated (any Actor)? = #isolation
    ) async throws(Elements.Failure) where Elements.Element == Element {
        try await self.storage.send(contentsOf: elements, isolation: actor)
    }

    /// Ends the subject: subscribers receive what is buffered for them, then `nil`.
    @inlinable
    public func finish() {
        self.storage.complete(failure: nil)
    }

    /// Ends the subject with an error: subscribers receive what is buffered, then `error`.
    @inlinable
    public func fail(_ error: Failure) {
        self.storage.complete(failure: error)
    }

    /// This subject seen with a buffering policy of its own; see ``AsyncSharedView``.
    @inlinable
    public func buffering(_ policy: SharedBufferingPolicy) -> AsyncSharedView<Element, Failure> {
        policy.validate(parameter: "buffering(_:)")
        return AsyncSharedView(storage: self.storage, policy: policy)
    }

    /// The number of subscribers currently registered.
    @inlinable
    public var subscriberCount: Int {
        self.storage.subscriberCount
    }

    /// Iterates this subject as a lag-reporting subscriber: besides the elements, it yields
    /// how many elements its policy dropped and where (``SharedEvent/missed(_:)``), and
    /// whether it was evicted (``SharedEvent/evicted``). `nil` takes the subject's own policy.
    ///
    /// ```swift
    /// for await event in feed.events(buffering: .bufferingNewest(16)) {
    ///     if case .missed(let count) = event { print("this client missed \(count)") }
    /// }
    /// ```
    @inlinable
    public func events(buffering policy: SharedBufferingPolicy? = nil) -> AsyncSharedEvents<Element, Failure> {
        policy?.validate(parameter: "events(buffering:)")
        return AsyncSharedEvents(storage: self.storage, policy: policy)
    }

    /// The number of subscribers, as it changes: the current count first, then every new
    /// count (a slow observer skips to the latest). See ``AsyncSubscriberCounts``.
    ///
    /// ```swift
    /// for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
    /// ```
    @inlinable
    public var subscriberCounts: AsyncSubscriberCounts {
        AsyncSubscriberCounts(storage: self.storage)
    }

    /// Returns once at least `count` subscribers are registered (at once if they already
    /// are), so that a producer can start after its subscribers joined without polling.
    /// Throws `CancellationError` if the task is cancelled first.
    ///
    /// ```swift
    /// let tasks = (0..<3).map { _ in Task { for await x in subject { use(x) } } }
    /// try await subject.waitForSubscribers(atLeast: 3)
    /// subject.send(1)   // all three receive it
    /// ```
    @inlinable
    public func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        try await self.storage.waitForSubscribers(atLeast: count)
    }
}
