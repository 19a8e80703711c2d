/// A subject that keeps the latest `bufferSize` elements sent and gives them to each new
/// subscriber before the live ones, like RxSwift's `ReplaySubject` or Kotlin's
/// `MutableSharedFlow(replay:)`, for Swift Concurrency.
///
/// ``send(_:)`` puts the element in the replay cache before it returns, so a subscriber
/// created right after a `send` receives it: there is no upstream task to wait for (unlike
/// a subject behind `multicast(replay:)` and `connect()`).
///
/// ```swift
/// let messages = AsyncReplaySubject<String, Never>(bufferSize: 2)
/// messages.send("a")
/// messages.send("b")
/// messages.send("c")
/// messages.finish()
/// for await m in messages { print(m) }   // b, c: the cache, then the end
/// ```
///
/// ``replayCache`` reads the cache and ``resetReplayCache()`` empties it. After ``finish()``
/// or ``fail(_:)`` further sends and completions are ignored; a subscriber created after
/// completion receives the cache, then the terminal event.
public final class AsyncReplaySubject<Element: Sendable, Failure: Error>: AsyncSequence, Sendable {
    public typealias AsyncIterator = SharedIterator<Element, Failure>

    @usableFromInline
    let storage: MulticastStorage<Element, Failure>

    /// Creates a subject that replays the latest `bufferSize` elements to new subscribers.
    ///
    /// - Parameters:
    ///   - bufferSize: how many of the latest elements a new subscriber receives first;
    ///     at least 0 (0 makes it a passthrough subject).
    ///   - buffering: how each subscriber keeps elements it has not consumed yet. Under
    ///     `.bounded(n)` the synchronous ``send(_:)`` buffers past `n` (it cannot wait);
    ///     ``send(waitingForRoom:)`` waits instead. A dropping policy's limit below
    ///     `bufferSize` also limits what a new subscriber is replayed. Under `.evicting(n)` a
    ///     new subscriber gets the whole replay, which counts against no limit: only what is
    ///     sent after it joined can evict it.
    @inlinable
    public init(bufferSize: Int, buffering: SharedBufferingPolicy = .unbounded) {
        precondition(
            bufferSize >= 0, "AsyncReplaySubject(bufferSize:): bufferSize must be at least 0, got \(bufferSize)")
        buffering.validate(parameter: "buffering")
        self.storage = MulticastStorage(policy: buffering, replay: bufferSize, mode: .push, upstream: nil)
    }

    /// The elements a subscriber joining now would receive first, oldest first: the latest
    /// `bufferSize` sent since the cache was last reset.
    ///
    /// ```swift
    /// let recent = messages.replayCache   // ["b", "c"]
    /// ```
    @inlinable
    public var replayCache: [Element] {
        self.storage.replayCache
    }

    /// Empties the replay cache: subscribers created from now on receive only what is sent
    /// from now on. Subscribers already present keep what they have not read.
    ///
    /// ```swift
    /// messages.resetReplayCache()   // a new room: nobody sees the old messages
    /// ```
    @inlinable
    public func resetReplayCache() {
        self.storage.resetReplayCache()
    }

    /// Registers a new subscriber: it receives the replay cache first, then what is sent.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self.storage)
    }

    /// Delivers `element` to every current subscriber. Never suspends; ignored after completion.
    @inlinable
    public func send(_ element: Element) {
        self.storage.send(element)
    }

    /// Delivers `element` to every current subscriber. If a `.bounded(n)` subscriber holds
    /// `n` unconsumed elements, it first waits until every subscriber is down to half of `n`
    /// (see ``SharedBufferingPolicy/bounded(_:)``). Senders that wait go in first in, first
    /// out: in the order they began waiting, and before a later call of this method. If the
    /// calling task is cancelled while waiting, it stops waiting and sends at once, past the
    /// bound and ahead of the senders still waiting, so the element is not lost. Ignored
    /// after completion, also by a sender waiting when the subject completes.
    ///
    /// ```swift
    /// let lines = AsyncReplaySubject<String, Never>(bufferSize: 1, buffering: .bounded(16))
    /// for line in file { await lines.send(waitingForRoom: line) }   // paced by the slowest reader
    /// ```
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
