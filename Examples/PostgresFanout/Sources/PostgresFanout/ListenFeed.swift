import AsyncMulticast
import Logging
import PostgresNIO
import Synchronization

/// What the shared LISTEN feed carries to every local subscriber.
public enum FeedEvent: Sendable, Hashable {
    /// The payload of a notification on the channel.
    case message(String)
    /// LISTEN connection number `generation` (1 for the first this instance opened) is
    /// listening: every notification committed from now on arrives.
    case listening(generation: Int)
    /// LISTEN connection number `generation` was lost. Notifications committed from about now
    /// until the next `.listening` are lost for this instance; the feed is reconnecting.
    case interrupted(generation: Int)
    /// Sent every `heartbeat` while anyone listens: each client's handler writes something,
    /// and so notices a client that went away.
    case heartbeat
}

/// What `GET /stats` reports about the feed.
public struct FeedStats: Sendable, Hashable {
    /// Local subscribers (SSE clients) now.
    public var subscribers: Int
    /// Whether the LISTEN connection is open now.
    public var listening: Bool
    /// How many LISTEN connections this instance has opened since it started.
    public var listenConnectionsOpened: Int
}

/// One PostgreSQL LISTEN connection per process, shared by every local subscriber.
///
/// The connection is opened when the first subscriber waits for an event and closed when the
/// last one leaves: `AsyncSharedSource` starts and stops the session. If the connection is
/// lost while subscribers remain, the session reconnects (with a growing delay) and tells
/// them through `.interrupted` and `.listening`; their streams stay open.
public final class ListenFeed: Sendable {
    public let configuration: FanoutConfiguration
    let source: AsyncSharedSource<FeedEvent, Never>
    private let state: SessionState

    public init(configuration: FanoutConfiguration, logger: Logger) {
        self.configuration = configuration
        let state = SessionState()
        self.state = state
        // One session (one LISTEN connection at a time) for all subscribers. A client that
        // holds `hardLimit` unread events, or more than `softLimit` for `softLimitDuration`,
        // is evicted instead of growing the server's memory.
        self.source = AsyncSharedSource(buffering: configuration.bufferingPolicy) { emitter in
            let session = Task {
                await Self.run(configuration, emitter: emitter, state: state, logger: logger)
            }
            // The stop waits until the session has closed its connection: the next session
            // starts only after it returns, so this instance keeps one LISTEN connection.
            return {
                session.cancel()
                await session.value
            }
        }
    }

    /// A new subscriber, from now on: it receives every event the feed produces from this
    /// moment, and `.evicted` if it falls too far behind (the configuration's
    /// `bufferingPolicy`). It is `Sendable`, so a response body that runs later, in another
    /// task, reads it (`subscription.events`), and another task waits for its eviction.
    public func subscribe() -> SharedSubscription<FeedEvent, Never> {
        self.source.subscribe()
    }

    /// The generation of the LISTEN connection that is listening now, or 0 if none is.
    public var listeningGeneration: Int {
        self.state.listeningGeneration
    }

    public var stats: FeedStats {
        let (open, opened) = self.state.connectionCounts
        return FeedStats(subscribers: self.source.subscriberCount, listening: open, listenConnectionsOpened: opened)
    }

    /// One session: from the first subscriber's wait to the last subscriber's departure.
    private static func run(
        _ configuration: FanoutConfiguration,
        emitter: AsyncSharedSource<FeedEvent, Never>.Emitter,
        state: SessionState,
        logger: Logger
    ) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                while (try? await Task.sleep(for: configuration.heartbeat)) != nil {
                    emitter.send(.heartbeat)
                }
            }
            group.addTask {
                await listen(configuration, emitter: emitter, state: state, logger: logger)
            }
        }
    }

    /// Opens the LISTEN connection, forwards its notifications, and reopens it when it is
    /// lost, until the session is cancelled (the last subscriber left).
    private static func listen(
        _ configuration: FanoutConfiguration,
        emitter: AsyncSharedSource<FeedEvent, Never>.Emitter,
        state: SessionState,
        logger: Logger
    ) async {
        let postgres = configuration.postgres.connectionConfiguration(
            applicationName: configuration.listenApplicationName)
        var delay = configuration.reconnectDelay
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: postgres, id: state.nextConnectionID(), logger: logger)
                let generation = state.opened()
                do {
                    try await connection.listen(on: configuration.channel) { notifications in
                        // LISTEN is in effect: every notification committed from now on reaches us.
                        state.listening(generation)
                        emitter.send(.listening(generation: generation))
                        delay = configuration.reconnectDelay
                        for try await notification in notifications {
                            emitter.send(.message(notification.payload))
                        }
                    }
                } catch {
                    logger.warning("LISTEN connection lost", metadata: ["error": "\(error)"])
                }
                state.notListening()
                try? await connection.close()
                state.closed()
                if Task.isCancelled { return }  // the last subscriber left: the normal end
                emitter.send(.interrupted(generation: generation))
            } catch {
                if Task.isCancelled { return }
                logger.warning("LISTEN connection failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, configuration.maximumReconnectDelay)
        }
    }
}

/// The bookkeeping of the sessions, behind a lock.
private final class SessionState: Sendable {
    private struct State {
        var open = false
        var opened = 0
        var listeningGeneration = 0
        var connectionIDs = 0
    }

    private let state = Mutex(State())

    func nextConnectionID() -> Int {
        self.state.withLock { state in
            state.connectionIDs += 1
            return state.connectionIDs
        }
    }

    /// A LISTEN connection was opened; returns its generation.
    func opened() -> Int {
        self.state.withLock { state in
            state.open = true
            state.opened += 1
            return state.opened
        }
    }

    func listening(_ generation: Int) {
        self.state.withLock { $0.listeningGeneration = generation }
    }

    func notListening() {
        self.state.withLock { $0.listeningGeneration = 0 }
    }

    func closed() {
        self.state.withLock { $0.open = false }
    }

    var listeningGeneration: Int {
        self.state.withLock { $0.listeningGeneration }
    }

    var connectionCounts: (open: Bool, opened: Int) {
        self.state.withLock { ($0.open, $0.opened) }
    }
}
