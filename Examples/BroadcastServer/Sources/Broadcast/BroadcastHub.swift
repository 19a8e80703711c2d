import AsyncMulticast
import Synchronization

/// A message posted to `POST /messages`.
public struct Message: Sendable, Hashable, Codable {
    /// Assigned in posting order, from 1.
    public let id: Int
    public let text: String
}

/// The server's shared state: ONE upstream of ticks that every client shares, the subject
/// that fans messages out, and the counters `GET /stats` reports.
public final class BroadcastHub: Sendable {
    public let configuration: BroadcastConfiguration

    /// The upstream's starts and stops, as they happen.
    public let upstreamStates = AsyncCurrentValueSubject<UpstreamState, Never>(UpstreamState())

    /// The shared ticks. `replay(1)`: a client that connects late gets the latest count
    /// first. The upstream starts with the first client and is cancelled when the last one
    /// leaves; the replayed count expires with it, so a restart counts from 1 again.
    public let ticks: AsyncShareSequence<Int, Never>

    /// The messages posted to `POST /messages`, sent to every connected client.
    public let messages: AsyncPassthroughSubject<Message, Never>

    private let counters = Mutex(Counters())

    struct Counters {
        var messagesPosted = 0
        var clients = 0
        var evictions = 0
        var writeTimeouts = 0
    }

    /// - Parameter upstream: where the ticks come from; by default a ``Ticker`` with the
    ///   configuration's `tickInterval`.
    public init(configuration: BroadcastConfiguration, upstream: TickSource? = nil) {
        self.configuration = configuration
        let evicting = SharedBufferingPolicy.evicting(configuration.evictAfter)
        let source = upstream ?? TickSource(Ticker(interval: configuration.tickInterval))
        self.ticks = source.monitored(by: self.upstreamStates).replay(1, buffering: evicting)
        self.messages = AsyncPassthroughSubject(buffering: evicting)
    }

    /// Sends `text` to every connected client, with the next message id.
    @discardableResult
    public func post(_ text: String) -> Message {
        self.counters.withLock { counters in
            // Numbered and sent under one lock, so that ids reach every client in order.
            counters.messagesPosted += 1
            let message = Message(id: counters.messagesPosted, text: text)
            self.messages.send(message)
            return message
        }
    }

    /// What `GET /stats` reports.
    public var stats: Stats {
        let upstream = self.upstreamStates.value
        return self.counters.withLock { counters in
            Stats(
                subscribers: self.ticks.subscriberCount,
                messageSubscribers: self.messages.subscriberCount,
                clients: counters.clients,
                upstreamStarts: upstream.starts,
                upstreamRunning: upstream.running,
                latestTick: self.ticks.replayCache.last,
                messagesPosted: counters.messagesPosted,
                evictions: counters.evictions,
                writeTimeouts: counters.writeTimeouts
            )
        }
    }

    func clientConnected() { self.counters.withLock { $0.clients += 1 } }
    func clientDisconnected() { self.counters.withLock { $0.clients -= 1 } }
    func clientEvicted() { self.counters.withLock { $0.evictions += 1 } }
    func clientTimedOut() { self.counters.withLock { $0.writeTimeouts += 1 } }
}

/// The JSON of `GET /stats`.
public struct Stats: Sendable, Hashable, Codable {
    /// Subscribers of the shared ticks (`ticks.subscriberCount`): one per connected client.
    public var subscribers: Int
    /// Subscribers of the messages subject: one per connected client as well.
    public var messageSubscribers: Int
    /// `GET /events` handlers running.
    public var clients: Int
    /// How many times the ticker upstream started.
    public var upstreamStarts: Int
    /// Whether the ticker upstream runs now (it does while at least one client is connected).
    public var upstreamRunning: Bool
    /// The count a client connecting now receives first, if any.
    public var latestTick: Int?
    public var messagesPosted: Int
    /// Clients whose response ended because they were evicted.
    public var evictions: Int
    /// Connections closed because a write to them stayed pending for `writeTimeout`.
    public var writeTimeouts: Int
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
