import AsyncMulticast
import CoreMetrics

/// Reports a shared sequence's subscribers, evictions, missed elements and backlogs through
/// swift-metrics, where operators watch them (a Prometheus `/metrics`, StatsD, OpenTelemetry):
///
/// | metric | kind | what |
/// |---|---|---|
/// | `<label>_subscribers` | meter (a gauge) | the subscriber count, as it changes (``trackSubscribers(of:)``) |
/// | `<label>_evictions_total` | counter, dimension `reason` (`hardLimit`, `softLimit`) | subscribers evicted |
/// | `<label>_missed_elements_total` | counter | elements a lossy policy dropped for a subscriber (`.missed(n)`) |
/// | `<label>_backlog_high_water_mark` | recorder (a histogram) | a subscriber's most held: at its eviction, or when sampled |
///
/// Every metric carries `dimensions` too: the feed, the room, the instance; whatever you
/// label it with. The library has no global hook for evictions (each subscription learns its
/// own), so you report each one where your code learns it: in the task that waits in
/// `waitForEviction()`, or where an iteration meets `.evicted`. Count each eviction once,
/// where you act on it.
///
/// ```swift
/// let metrics = SharedSequenceMetrics(label: "chat", dimensions: [("room", "lobby")])
/// let room = AsyncPassthroughSubject<String, Never>(buffering: .evicting(4096))
/// Task { await metrics.trackSubscribers(of: room) }   // until the task is cancelled
/// let client = room.subscribe()
/// Task {
///     if let eviction = await client.waitForEviction() {
///         metrics.recordEviction(eviction)   // chat_evictions_total{room="lobby",reason="hardLimit"} + 1
///     }
/// }
/// ```
public struct SharedSequenceMetrics: Sendable {
    /// The prefix of every metric's name.
    public let label: String
    /// The dimensions every metric carries, besides its own.
    public let dimensions: [(String, String)]

    let subscribers: Meter
    let hardLimitEvictions: Counter
    let softLimitEvictions: Counter
    let missedElements: Counter
    let highWaterMarks: Recorder

    /// Metrics named `<label>_…`, each with `dimensions`, made by `factory` (by default the
    /// one `MetricsSystem.bootstrap(_:)` installed). Give every `SharedSequenceMetrics` of
    /// one `label` the same dimension names (`feed`, say, with a value per feed): Prometheus
    /// refuses one name with two sets of label names. `reason` is taken (the evictions).
    ///
    /// ```swift
    /// let metrics = SharedSequenceMetrics(label: "prices", dimensions: [("symbol", "AAPL")])
    /// ```
    public init(label: String, dimensions: [(String, String)] = [], factory: any MetricsFactory = MetricsSystem.factory)
    {
        precondition(!label.isEmpty, "SharedSequenceMetrics(label:): the label must not be empty")
        // The evictions counter adds its own `reason` dimension: a second one would make two
        // label sets of one name, which backends such as Prometheus refuse.
        precondition(
            !dimensions.contains { $0.0 == "reason" },
            "SharedSequenceMetrics(dimensions:): \"reason\" is the evictions counter's own dimension; name yours otherwise"
        )
        self.label = label
        self.dimensions = dimensions
        self.subscribers = Meter(label: "\(label)_subscribers", dimensions: dimensions, factory: factory)
        self.hardLimitEvictions = Counter(
            label: "\(label)_evictions_total",
            dimensions: dimensions + [("reason", SubscriberEviction.Reason.hardLimit.description)], factory: factory)
        self.softLimitEvictions = Counter(
            label: "\(label)_evictions_total",
            dimensions: dimensions + [("reason", SubscriberEviction.Reason.softLimit.description)], factory: factory)
        self.missedElements = Counter(
            label: "\(label)_missed_elements_total", dimensions: dimensions, factory: factory)
        self.highWaterMarks = Recorder(
            label: "\(label)_backlog_high_water_mark", dimensions: dimensions, aggregate: true, factory: factory)
    }

    /// Counts an eviction under its reason, and records the subscriber's high-water mark.
    ///
    /// ```swift
    /// if let eviction = await client.waitForEviction() { metrics.recordEviction(eviction) }
    /// ```
    public func recordEviction(_ eviction: SubscriberEviction) {
        switch eviction.reason {
        case .hardLimit: self.hardLimitEvictions.increment()
        case .softLimit: self.softLimitEvictions.increment()
        }
        self.highWaterMarks.record(eviction.highWaterMark)
    }

    /// Counts `count` elements a lossy policy dropped for a subscriber.
    ///
    /// ```swift
    /// for await event in prices.events(buffering: .bufferingNewest(8)) {
    ///     if case .missed(let count) = event { metrics.recordMissed(count) }
    /// }
    /// ```
    public func recordMissed(_ count: Int) {
        precondition(count >= 0, "recordMissed(_:): count must not be negative, got \(count)")
        self.missedElements.increment(by: Int64(count))
    }

    /// Records a live subscriber's high-water mark: sample your clients' backlogs (on each
    /// scrape, say) to size their limits from what they really hold. The samples share the
    /// histogram with the evictions' high-water marks, so its count grows with the sampling:
    /// read its buckets and maximum, not its rate.
    ///
    /// ```swift
    /// if let backlog = client.backlog { metrics.recordBacklog(backlog) }
    /// ```
    public func recordBacklog(_ backlog: SubscriberBacklog) {
        self.highWaterMarks.record(backlog.highWaterMark)
    }

    /// Records what a lag-reporting event says: a `.missed(n)` counts `n` missed elements, an
    /// `.evicted` counts the eviction (``recordEviction(_:)``); an element records nothing.
    /// Use it in the one loop that reads the events, and do not count the same eviction again
    /// from `waitForEviction()`.
    ///
    /// ```swift
    /// for await event in client.events {
    ///     metrics.record(event)
    ///     if case .element(let line) = event { try await connection.write(line) }
    /// }
    /// ```
    public func record<Element>(_ event: SharedEvent<Element>) {
        switch event {
        case .element: break
        case .missed(let count): self.recordMissed(count)
        case .evicted(let eviction): self.recordEviction(eviction)
        }
    }

    /// Sets `<label>_subscribers` to `sequence`'s subscriber count and keeps it current
    /// (`subscriberCounts`: an eviction counts as a leave at once), until the calling task is
    /// cancelled; the gauge then keeps its last value. Run it in a task, or as a service
    /// beside the feed, stopped after the feed.
    ///
    /// ```swift
    /// let tracking = Task { await metrics.trackSubscribers(of: room) }
    /// // ...
    /// tracking.cancel()
    /// ```
    public func trackSubscribers<Shared: AsyncSubscribableSequence>(of sequence: Shared) async {
        for await count in sequence.subscriberCounts {
            self.subscribers.set(count)
        }
    }
}
