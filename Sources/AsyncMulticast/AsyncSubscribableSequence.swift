/// A sequence whose iterators are subscribers of one shared stream of elements: what every
/// shared sequence and subject of this package is, and what the members they share are
/// declared on, once.
///
/// ``AsyncShareSequence`` (from `share()` and `replay(_:)`), ``AsyncMulticastSequence``,
/// ``AsyncSharedSource``, ``AsyncSharedView`` and the subjects conform. Its requirement is
/// an engine that only the package creates: a type outside the package can conform only by
/// handing on the engine of one of those (a wrapper that returns its `_core`), and then
/// behaves exactly as that one does. So every conforming type behaves as the members below
/// say. Use it to store or pass any of them by what they deliver:
///
/// ```swift
/// struct Dashboard {
///     let prices: any AsyncSubscribableSequence<Double, Never>
/// }
/// let dashboard = Dashboard(prices: AsyncCurrentValueSubject<Double, Never>(100))
/// print(dashboard.prices.subscriberCount)   // 0
/// ```
///
/// - **Each iterator is one subscriber.** Creating it joins; it receives what is produced
///   after it joined (after the replayed elements, if any), in order, buffered as the
///   sequence's ``SharedBufferingPolicy`` says (``buffering(_:)`` picks another).
/// - **Per-subscriber cancellation:** cancelling a subscriber's task makes its waiting
///   `next()` return `nil` at once and removes only that subscriber.
/// - **Terminal events are sticky:** after the end or an error, every subscriber gets what
///   is buffered for it and then `nil` or the error; later subscribers get it at once.
public protocol AsyncSubscribableSequence<Element, Failure>: AsyncSequence, Sendable
where Element: Sendable, AsyncIterator == SharedIterator<Element, Failure> {
    /// The type of element the subscribers receive.
    associatedtype Element
    /// The error that ends the sequence, or `Never`.
    associatedtype Failure

    /// The package's engine behind this sequence: an implementation detail that gives the
    /// shared members their behaviour. Not meant to be used directly.
    var _core: _SharedCore<Element, Failure> { get }
}

/// A shared sequence that replays its latest elements to each new subscriber:
/// `replay(_:)` (and `share()`, whose cache stays empty), ``AsyncMulticastSequence``,
/// ``AsyncSharedSource`` and ``AsyncReplaySubject``.
public protocol AsyncReplayingSequence<Element, Failure>: AsyncSubscribableSequence {}

/// A shared sequence fed by calls instead of an upstream, like Combine's `Subject`:
/// ``AsyncPassthroughSubject``, ``AsyncCurrentValueSubject`` and ``AsyncReplaySubject``.
///
/// After ``finish()`` or ``fail(_:)`` every send and completion is ignored: a subject ends
/// once, and a late call is harmless.
public protocol AsyncSubject<Element, Failure>: AsyncSubscribableSequence {}

/// The engine behind a shared sequence (see ``AsyncSubscribableSequence/_core``): the storage its
/// subscribers share, the buffering policy a new subscriber takes, and how subscribers
/// connect a multicast. Only the package creates one.
public struct _SharedCore<Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let storage: MulticastStorage<Element, Failure>
    /// The policy of new subscribers; `nil`: the storage's own.
    @usableFromInline
    let policy: SharedBufferingPolicy?
    @usableFromInline
    let connectRule: ConnectRule

    @inlinable
    init(
        _ storage: MulticastStorage<Element, Failure>, policy: SharedBufferingPolicy? = nil,
        connectRule: ConnectRule = .never
    ) {
        self.storage = storage
        self.policy = policy
        self.connectRule = connectRule
    }
}

// MARK: - Every shared sequence

extension AsyncSubscribableSequence {
    /// The storage the subscribers share (for the package's own code and tests).
    @usableFromInline
    var storage: MulticastStorage<Element, Failure> { self._core.storage }

    /// Joins: registers a new subscriber, which receives the replayed elements (if any), then
    /// what is produced from now on. For a multicast seen through `autoconnect`, joining
    /// (or waiting) may connect it.
    @inlinable
    public func makeAsyncIterator() -> SharedIterator<Element, Failure> {
        SharedIterator(storage: self._core.storage, policy: self._core.policy, connectRule: self._core.connectRule)
    }

    /// This sequence seen with a buffering policy of its own: each iterator of the result is
    /// a subscriber of this same shared stream that buffers according to `policy`.
    ///
    /// ```swift
    /// let events = source.share(buffering: .bounded(64))
    /// Task { for await e in events { ui.render(e) } }                             // lossless
    /// Task { for await e in events.buffering(.bufferingNewest(10)) { log(e) } }   // may drop
    /// ```
    ///
    /// Note that a `.bounded` subscriber still paces the upstream (or a waiting sender) for
    /// everyone.
    @inlinable
    public func buffering(_ policy: SharedBufferingPolicy) -> AsyncSharedView<Element, Failure> {
        policy.validate(parameter: "buffering(_:)")
        return AsyncSharedView(_SharedCore(self._core.storage, policy: policy, connectRule: self._core.connectRule))
    }

    /// The number of subscribers currently registered, whatever their policy: iterators that
    /// exist and have not left (by cancellation, by reaching the end, or by being released),
    /// and were not evicted. An eviction is a leave for counting: the subscriber stops
    /// counting at the moment it is evicted (here, in ``subscriberCounts``, in
    /// `waitForSubscribers(atLeast:)` and in autoconnect thresholds), not when its iteration
    /// learns of it; for `share()` the eviction of the last subscriber stops the upstream as
    /// its leave would (after the keep-alive window). A server closes the stalled client
    /// through ``SharedSubscription/waitForEviction()->SubscriberEviction?``.
    ///
    /// ```swift
    /// let logs = events.buffering(.bufferingNewest(100))
    /// var logger = logs.makeAsyncIterator()
    /// print(logs.subscriberCount == events.subscriberCount)   // true
    /// ```
    @inlinable
    public var subscriberCount: Int {
        self._core.storage.subscriberCount
    }

    /// Iterates this sequence as a lag-reporting subscriber: besides the elements, it yields
    /// how many elements its policy dropped and where (``SharedEvent/missed(_:)``), and
    /// whether it was evicted (``SharedEvent/evicted(_:)``). `nil` takes this sequence's policy.
    ///
    /// ```swift
    /// for await event in feed.events(buffering: .bufferingNewest(16)) {
    ///     if case .missed(let count) = event { print("this client missed \(count)") }
    /// }
    /// ```
    @inlinable
    public func events(buffering policy: SharedBufferingPolicy? = nil) -> AsyncSharedEvents<Element, Failure> {
        policy?.validate(parameter: "events(buffering:)")
        return AsyncSharedEvents(
            storage: self._core.storage, policy: policy ?? self._core.policy, connectRule: self._core.connectRule)
    }

    /// The number of subscribers, as it changes: the current count first, then every new
    /// count (a slow observer skips to the latest). See ``AsyncSubscriberCounts``.
    ///
    /// ```swift
    /// for await count in feed.subscriberCounts where count == 0 { print("nobody listens") }
    /// ```
    @inlinable
    public var subscriberCounts: AsyncSubscriberCounts {
        AsyncSubscriberCounts(storage: self._core.storage)
    }

    /// Returns once at least `count` subscribers are registered (at once if they already
    /// are), so that a producer can start after its subscribers joined without polling.
    /// Throws `CancellationError` if the task is cancelled first.
    ///
    /// ```swift
    /// let tasks = (0..<3).map { _ in Task { for await x in shared { use(x) } } }
    /// try await shared.waitForSubscribers(atLeast: 3)
    /// continuation.yield(1)   // all three receive it
    /// ```
    @inlinable
    public func waitForSubscribers(atLeast count: Int) async throws(CancellationError) {
        try await self._core.storage.waitForSubscribers(atLeast: count)
    }
}

// MARK: - Replaying sequences

extension AsyncReplayingSequence {
    /// The elements a subscriber joining now would be replayed first, oldest first (empty
    /// for `share()`). For `replay(1)`, the latest element, like Kotlin's `replayCache`.
    ///
    /// ```swift
    /// let state = updates.replay(1)
    /// if let latest = state.replayCache.last { render(latest) }
    /// ```
    @inlinable
    public var replayCache: [Element] {
        self._core.storage.replayCache
    }

    /// Empties the replay cache: subscribers joining from now on are replayed only elements
    /// produced from now on. Subscribers already present keep what they have not read.
    ///
    /// ```swift
    /// session.resetReplayCache()   // the next screen must not see the old user's data
    /// ```
    @inlinable
    public func resetReplayCache() {
        self._core.storage.resetReplayCache()
    }
}

// MARK: - Subjects

extension AsyncSubject {
    /// Delivers `element` to every current subscriber. Never suspends: under `.bounded(n)` it
    /// buffers past `n` (``send(waitingForRoom:)`` waits instead). Ignored after completion.
    @inlinable
    @inline(__always)
    public func send(_ element: Element) {
        self._core.storage.send(element)
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
    /// let lines = AsyncPassthroughSubject<String, Never>(buffering: .bounded(16))
    /// for line in file { await lines.send(waitingForRoom: line) }   // paced by the slowest reader
    /// ```
    @inlinable
    public func send(waitingForRoom element: Element) async {
        await self._core.storage.sendWhenReady(element)
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
    /// when that `next()` does: at once for a sequence that stops on cancellation, such as
    /// `AsyncStream`. After a completion, unless `elements` has ended (returned `nil` or
    /// thrown), the call asks it for one more element in a cancelled task, so that it sees
    /// the cancellation even if the completion came between two `next()` calls (while an
    /// element waited for room, say); what it returns is ignored. So a sequence that ignores
    /// cancellation and returns an element keeps the call until that extra `next()` returns
    /// too. `elements` is iterated on the caller's actor, in a task that ends before the call
    /// returns.
    ///
    /// ```swift
    /// Task { try await chat.send(contentsOf: databaseNotifications) }
    /// Task { try await chat.send(contentsOf: webSocketMessages) }
    /// ```
    @inlinable
    public func send<Elements: AsyncSequence>(
        contentsOf elements: Elements, isolation actor: isolated (any Actor)? = #isolation
    ) async throws(Elements.Failure) where Elements.Element == Element {
        try await self._core.storage.send(contentsOf: elements, isolation: actor)
    }

    /// Ends the subject: subscribers receive what is buffered for them, then `nil`; later
    /// subscribers get the end at once (after the replayed elements, if any). Ignored if the
    /// subject has already completed.
    @inlinable
    public func finish() {
        self._core.storage.complete(failure: nil)
    }

    /// Ends the subject with `error`: subscribers receive what is buffered for them, then
    /// `error`. Ignored if the subject has already completed.
    @inlinable
    public func fail(_ error: Failure) {
        self._core.storage.complete(failure: error)
    }
}
