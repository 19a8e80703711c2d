import AsyncMulticast
import CoreMetrics
import MulticastMetrics
import Prometheus
import Synchronization

/// A message posted to `POST /messages`.
public struct Message: Sendable, Hashable, Codable {
    /// Assigned in posting order, from 0: the message's position in the messages subject,
    /// which the library numbers the same way, and so its SSE `id:`.
    public let id: Int
    public let text: String
}

/// The server's shared state: ONE upstream of ticks that every client shares, the subject
/// that fans messages out, who is connected, and the counters `GET /stats` reports.
public final class BroadcastHub: Sendable {
    public let configuration: BroadcastConfiguration

    /// The upstream's starts and stops, as they happen.
    public let upstreamStates = AsyncCurrentValueSubject<UpstreamState, Never>(UpstreamState())

    /// Presence: how many `GET /events` handlers run, as it changes. A client counts from
    /// its `: connected` until its handler ends, which an eviction makes happen at once.
    public let connectedClients = AsyncCurrentValueSubject<Int, Never>(0)

    /// The shared ticks, a structured sharing: the upstream runs inside `ticks.run()`, which
    /// the service group runs (see ``serviceGroup(logger:gracefulShutdownSignals:onServerRunning:)``)
    /// and cancels at graceful shutdown; every client then receives the ticks buffered for it,
    /// then the end of the feed. `replay: 1`: a client that connects late gets the latest
    /// count first. `.whileSubscribed()`: the upstream starts with the first client and is
    /// cancelled when the last one leaves; the replayed count expires with it, so a restart
    /// counts from 1 again.
    public let ticks: AsyncSharedService<Int, Never>

    /// The messages posted to `POST /messages`, sent to every connected client. Finished at
    /// graceful shutdown: every client receives the messages buffered for it, then the end.
    /// It keeps the latest `configuration.history` messages (its replay cache): the history a
    /// client that reconnects with `Last-Event-ID` resumes from (``subscribeToMessages(after:)``).
    public let messages: AsyncReplaySubject<Message, Never>

    /// Where `GET /metrics` reads from: the feeds' metrics (``FeedMetrics``), in
    /// Prometheus's text format. One registry per hub, so that tests do not share one.
    public let metricsRegistry = PrometheusCollectorRegistry()

    /// Each feed's subscribers, evictions (by reason) and backlog high-water marks, through
    /// the library's swift-metrics adapter (`MulticastMetrics`): `broadcast_…{feed="ticks"}`
    /// and `broadcast_…{feed="messages"}`.
    let metrics: FeedMetrics

    private let counters = Mutex(Counters())

    struct Counters {
        var messagesPosted = 0
        var evictions = 0
        var writeTimeouts = 0
        /// The subscriptions of each connected client, for their backlogs.
        var clients: [Int: ClientSubscriptions] = [:]
        var nextClient = 0
    }

    /// One client's subscriptions to the two feeds.
    struct ClientSubscriptions {
        let ticks: SharedSubscription<Int, Never>
        let messages: PositionedSubscription<Message, Never>
    }

    /// - Parameters:
    ///   - upstream: where the ticks come from; by default a ``Ticker`` with the
    ///     configuration's `tickInterval`.
    ///   - clock: the clock that times the soft limit's duration (both feeds); a test's
    ///     manual clock, for example.
    public init(
        configuration: BroadcastConfiguration, upstream: TickSource? = nil,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        self.configuration = configuration
        // Every subscriber of both feeds (one of each per client) has this policy.
        let evicting = configuration.bufferingPolicy
        let source = upstream ?? TickSource(Ticker(interval: configuration.tickInterval))
        self.ticks = source.monitored(by: self.upstreamStates).sharedService(
            replay: 1, buffering: evicting, started: .whileSubscribed(), clock: clock)
        self.messages = AsyncReplaySubject(replay: configuration.history, buffering: evicting, clock: clock)
        self.metrics = FeedMetrics(factory: PrometheusMetricsFactory(registry: self.metricsRegistry))
    }

    /// Sends `text` to every connected client, with the next message id.
    @discardableResult
    public func post(_ text: String) -> Message {
        self.counters.withLock { counters in
            // Numbered and sent under one lock, so that ids reach every client in order, and
            // each id is the position the subject gives the message (only this sends to it).
            let message = Message(id: counters.messagesPosted, text: text)
            counters.messagesPosted += 1
            self.messages.send(message)
            return message
        }
    }

    /// Subscribes a client to the messages: after `lastEventID` (the client's `Last-Event-ID`,
    /// the position of the last message it received) it resumes from the next one, the
    /// history's gap first if the history no longer reaches back that far; without one it
    /// joins at the newest message (the history is not replayed to new clients), so it
    /// receives every message posted from then on. Every event carries its position.
    func subscribeToMessages(after lastEventID: Int?) -> PositionedSubscription<Message, Never> {
        // A position at or past the newest joins at the tail, without a gap.
        self.messages.subscribe(after: lastEventID ?? .max)
    }

    /// What `GET /stats` reports.
    public var stats: Stats {
        let upstream = self.upstreamStates.value
        let (counters, clients) = self.counters.withLock { counters in
            (counters, Array(counters.clients.values))
        }
        // Read outside the hub's lock: each read takes its feed's lock. An evicted client's
        // subscription has no backlog any more (nil), until its handler ends.
        let backlogs = clients.flatMap { [$0.ticks.backlog, $0.messages.backlog] }.compactMap { $0 }
        return Stats(
            subscribers: self.ticks.subscriberCount,
            messageSubscribers: self.messages.subscriberCount,
            clients: self.connectedClients.value,
            upstreamStarts: upstream.starts,
            upstreamRunning: upstream.running,
            latestTick: self.ticks.replayCache.last,
            messagesPosted: counters.messagesPosted,
            evictions: counters.evictions,
            writeTimeouts: counters.writeTimeouts,
            maxBacklog: backlogs.map(\.count).max() ?? 0,
            maxBacklogHighWaterMark: backlogs.map(\.highWaterMark).max() ?? 0
        )
    }

    /// A client's handler starts: it counts as connected, and its backlogs in `stats`.
    /// Returns the number to pass to ``clientDisconnected(_:)``.
    func clientConnected(
        ticks: SharedSubscription<Int, Never>, messages: PositionedSubscription<Message, Never>
    ) -> Int {
        let client = self.counters.withLock { counters in
            defer { counters.nextClient += 1 }
            counters.clients[counters.nextClient] = ClientSubscriptions(ticks: ticks, messages: messages)
            return counters.nextClient
        }
        self.connectedClients.update { $0 + 1 }
        return client
    }

    func clientDisconnected(_ client: Int) {
        self.counters.withLock { _ = $0.clients.removeValue(forKey: client) }
        self.connectedClients.update { $0 - 1 }
    }

    /// A client was evicted (counted once, by whichever of its feeds evicted it first).
    func clientEvicted(feed: String, _ eviction: SubscriberEviction) {
        self.counters.withLock { $0.evictions += 1 }
        self.metrics[feed].recordEviction(eviction)
    }

    /// `GET /metrics`: samples the connected clients' backlog high-water marks, then renders
    /// the registry.
    public func renderMetrics() -> String {
        let clients = self.counters.withLock { Array($0.clients.values) }
        // Read outside the hub's lock: each read takes its feed's lock.
        for client in clients {
            if let backlog = client.ticks.backlog { self.metrics.ticks.recordBacklog(backlog) }
            if let backlog = client.messages.backlog { self.metrics.messages.recordBacklog(backlog) }
        }
        return self.metricsRegistry.emitToString()
    }
    func clientTimedOut() { self.counters.withLock { $0.writeTimeouts += 1 } }
}

/// The metrics of the two feeds, named `broadcast_…` with a `feed` dimension.
struct FeedMetrics: Sendable {
    let ticks: SharedSequenceMetrics
    let messages: SharedSequenceMetrics

    init(factory: any MetricsFactory) {
        self.ticks = SharedSequenceMetrics(label: "broadcast", dimensions: [("feed", "ticks")], factory: factory)
        self.messages = SharedSequenceMetrics(label: "broadcast", dimensions: [("feed", "messages")], factory: factory)
    }

    subscript(feed: String) -> SharedSequenceMetrics {
        feed == "ticks" ? self.ticks : self.messages
    }
}

/// The JSON of `GET /stats`.
public struct Stats: Sendable, Hashable, Codable {
    /// Subscribers of the shared ticks (`ticks.subscriberCount`): one per connected client.
    public var subscribers: Int
    /// Subscribers of the messages subject: one per connected client as well.
    public var messageSubscribers: Int
    /// `GET /events` handlers running (``BroadcastHub/connectedClients``).
    public var clients: Int
    /// How many times the ticker upstream started.
    public var upstreamStarts: Int
    /// Whether the ticker upstream runs now (it does while at least one client is connected).
    public var upstreamRunning: Bool
    /// The count a client connecting now receives first, if any.
    public var latestTick: Int?
    public var messagesPosted: Int
    /// Clients evicted by the hard or the soft limit. Each one's response ended with
    /// `event: evicted`, or, when its connection was not writable (it was not reading what
    /// it was sent), the connection was closed at once.
    public var evictions: Int
    /// Connections closed by the write-timeout backstop: a write to them stayed pending
    /// for `writeTimeout` and no eviction had ended them.
    public var writeTimeouts: Int
    /// The most undelivered events a connected client holds now on one feed (what its
    /// subscription holds, `SharedSubscription.backlog`; not what is already in the socket
    /// buffers); 0 without clients. An evicted client holds nothing.
    public var maxBacklog: Int
    /// The most undelivered events a connected client has held at once on one feed since it
    /// connected: the number to compare with the limits when sizing them. Only the clients
    /// connected now count (an evicted client's is gone with its subscription).
    public var maxBacklogHighWaterMark: Int
}

/// An upstream of ticks: the ``Ticker``, or any other sequence of `Int` (a test's subject).
/// Every iteration calls the wrapped sequence's `makeAsyncIterator()` afresh.
public struct TickSource: AsyncSequence, Sendable {
    public typealias Element = Int
    public typealias Failure = Never

    private let makeNext: @Sendable () -> () async -> Int?

    public init<Base: AsyncSequence<Int, Never> & Sendable>(_ base: Base) {
        self.makeNext = {
            let iterator = IteratorBox(base.makeAsyncIterator())
            return { await iterator.next() }
        }
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(next: self.makeNext())
    }

    public struct Iterator: AsyncIteratorProtocol {
        let next: () async -> Int?

        public mutating func next() async -> Int? {
            await self.next()
        }
    }

    /// Holds the wrapped iterator, which one task uses at a time: the upstream's.
    private final class IteratorBox<Base: AsyncIteratorProtocol<Int, Never>> {
        var base: Base

        init(_ base: Base) {
            self.base = base
        }

        func next() async -> Int? {
            // `next(isolation:)` throws `Base.Failure`, here `Never`; plain `next()` is
            // declared `throws` whatever the failure.
            await self.base.next(isolation: nil)
        }
    }
}
