import AsyncMulticast
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// One server instance: its shared LISTEN feed, the pool that sends notifications, and the
/// HTTP routes.
///
/// - `GET /events`: server-sent events; each client is one subscriber of the shared feed,
///   evicted when it falls too far behind (the configuration's `bufferingPolicy`).
/// - `POST /messages`: the body (UTF-8, under 8000 bytes) is sent with `pg_notify`, so that
///   the clients of every instance listening to the channel receive it.
/// - `GET /stats`: ``FeedStats`` as JSON.
public final class FanoutServer: Sendable {
    public let configuration: FanoutConfiguration
    public let feed: ListenFeed
    /// Sends the notifications, on pooled connections separate from the LISTEN one.
    let notifier: PostgresClient
    let logger: Logger
    /// The subscriptions of the clients connected now, and the evictions so far, for `/stats`.
    private let clients = Mutex(Clients())

    private struct Clients {
        var connected: [Int: SharedSubscription<FeedEvent, Never>] = [:]
        var nextID = 0
        var evictions = 0
    }

    public init(configuration: FanoutConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.feed = ListenFeed(configuration: configuration, logger: logger)
        self.notifier = PostgresClient(
            configuration: configuration.postgres.clientConfiguration(
                applicationName: configuration.notifyApplicationName),
            backgroundLogger: logger)
    }

    /// The largest payload PostgreSQL accepts in its default configuration is 7999 bytes.
    public static let maximumPayloadBytes = 7999

    /// Sends `payload` to every listener of the channel, in every instance. Returns once the
    /// notification is committed: notifications sent one after another arrive in that order.
    public func publish(_ payload: String) async throws {
        _ = try await self.notifier.query(
            "SELECT pg_notify(\(self.configuration.channel), \(payload))", logger: self.logger
        ).collect()
    }

    /// The HTTP application on `host:port` (port 0: any free port; `onServerRunning` gets the
    /// one chosen). Running it also runs the notification pool.
    public func application(
        host: String = "127.0.0.1",
        port: Int,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: FanoutRequestContext.self)
        router.get("events") { _, context in self.events(channel: context.channel) }
        router.post("messages") { request, _ in try await self.message(request) }
        router.get("stats") { _, _ in try self.statsResponse() }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "postgres-fanout"),
            services: [self.notifier],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: self.logger)
    }

    struct Stats: Encodable {
        var instance: String
        var subscribers: Int
        var listening: Bool
        var listenConnectionsOpened: Int
        /// Clients evicted since the instance started, by the hard or the soft limit.
        var evictions: Int
        /// The most unread events one client connected now has held at once since it
        /// connected (`SharedSubscription.backlog`): the figure to size the limits with.
        var maxBacklogHighWaterMark: Int
    }

    func statsResponse() throws -> Response {
        let stats = self.feed.stats
        let (subscriptions, evictions) = self.clients.withLock { (Array($0.connected.values), $0.evictions) }
        // Read outside the lock; an evicted client's backlog is nil until its handler ends.
        let highWaterMark = subscriptions.compactMap(\.backlog).map(\.highWaterMark).max() ?? 0
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try encoder.encode(
            Stats(
                instance: self.configuration.instanceName, subscribers: stats.subscribers, listening: stats.listening,
                listenConnectionsOpened: stats.listenConnectionsOpened, evictions: evictions,
                maxBacklogHighWaterMark: highWaterMark))
        return Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }

    func message(_ request: Request) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumPayloadBytes)
        } catch is NIOTooManyBytesError {
            throw HTTPError(
                .contentTooLarge,
                message: "A NOTIFY payload must be under 8000 bytes; store larger messages and send their id.")
        }
        try await self.publish(String(buffer: body))
        return Response(status: .noContent)
    }

    /// `GET /events`: one client, one subscriber of the shared LISTEN feed.
    func events(channel: any Channel) -> Response {
        // Joins now, while the request is handled: every event from here on reaches the
        // body, which runs later, in another task.
        let subscription = self.feed.subscribe()
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                let connection = ClientConnection(channel: channel)
                try await self.watchingForEviction(subscription, of: connection) {
                    try await self.stream(subscription, to: &writer, connection: connection)
                }
                try await writer.finish(nil)
            })
    }

    /// Runs `body`, which writes the client's response, while a child task waits for the
    /// subscription's eviction, and while `/stats` counts the client's backlog.
    ///
    /// The handler learns of an eviction only when it next asks for an event, and a handler
    /// whose client stopped reading is stuck in a write and never asks. The waiting task
    /// learns at once, and ``evicted(_:_:)`` closes such a connection, which fails the write.
    func watchingForEviction(
        _ subscription: SharedSubscription<FeedEvent, Never>, of connection: ClientConnection,
        _ body: () async throws -> Void
    ) async throws {
        let id = self.clients.withLock { clients in
            defer { clients.nextID += 1 }
            clients.connected[clients.nextID] = subscription
            return clients.nextID
        }
        defer { self.clients.withLock { _ = $0.connected.removeValue(forKey: id) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // `nil`: the subscription left otherwise, or the response ended first.
                if let eviction = await subscription.waitForEviction() { self.evicted(connection, eviction) }
            }
            defer { group.cancelAll() }
            try await body()
        }
    }

    /// The client's subscription was evicted: counts it, and ends the response at once,
    /// without waiting for the client. Called by whichever learns of it first, the waiting
    /// task or the handler; only the first call for a client acts.
    ///
    /// - The connection is not writable: the socket's buffers are full, the client is not
    ///   taking what it was sent, and the handler is stuck in a write (or its next one would
    ///   be). Closing the connection fails that write, and the handler ends.
    /// - It is writable: the handler is not stuck, and its next read of the subscription
    ///   returns `.evicted`: it writes `event: evicted` and ends the response.
    ///
    /// The eviction is logged in one line: which limit, and how far behind the client was.
    func evicted(_ connection: ClientConnection, _ eviction: SubscriberEviction) {
        guard connection.noticeEviction() else { return }
        self.logger.info("client evicted \(eviction)")
        if !connection.channel.isWritable { connection.channel.close(promise: nil) }
        // Counted after the close: whoever sees the count sees a connection already closing.
        self.clients.withLock { $0.evictions += 1 }
    }

    /// Writes the shared feed to one client until the client leaves (a write fails) or is
    /// evicted (see ``evicted(_:_:)``).
    ///
    /// The client sees `event: ready` once the instance's LISTEN connection is in effect for it
    /// (what is committed after that reaches it), `data:` lines for each message, and, if the
    /// LISTEN connection is lost, `event: interrupted` then `event: resumed` when a new one
    /// listens; messages committed between the two are lost for this instance's clients.
    func stream(
        _ subscription: SharedSubscription<FeedEvent, Never>, to writer: inout any ResponseBodyWriter,
        connection: ClientConnection
    ) async throws {
        let instance = self.configuration.instanceName
        var generation = self.feed.listeningGeneration
        if generation != 0 {
            try await writer.write(ServerSentEvent.event("ready", data: instance))
        } else {
            try await writer.write(ServerSentEvent.comment("waiting for the LISTEN connection"))
        }
        for await event in subscription.events {
            switch event {
            case .element(.message(let payload)):
                try await writer.write(ServerSentEvent.event(data: payload))
            case .element(.heartbeat):
                try await writer.write(ServerSentEvent.comment("heartbeat"))
            case .element(.listening(let new)) where new > generation:
                // The first connection this client sees listening, or a reconnection.
                try await writer.write(ServerSentEvent.event(generation == 0 ? "ready" : "resumed", data: instance))
                generation = new
            case .element(.listening):
                break  // already announced when this client joined
            case .element(.interrupted(let lost)) where lost == generation:
                try await writer.write(ServerSentEvent.event("interrupted", data: instance))
            case .element(.interrupted):
                break
            case .missed:
                break  // only dropping policies report gaps; `.evicting` evicts instead
            case .evicted(let eviction):
                // This client fell too far behind: it reconnects and resyncs. (If its
                // connection is not writable, `evicted` closes it and this write fails.)
                self.evicted(connection, eviction)
                try await writer.write(ServerSentEvent.event("evicted", data: instance))
                return
            }
        }
    }
}

/// The request context: Hummingbird's basics, plus the connection, which an event stream
/// closes when its client is evicted while not reading.
public struct FanoutRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}

/// One client's connection, as its handler and the task waiting for its eviction share it.
final class ClientConnection: Sendable {
    let channel: any Channel
    private let evictionNoticed = Atomic(false)

    init(channel: any Channel) {
        self.channel = channel
    }

    /// `true` the first time only: both the waiting task and the handler may learn of the
    /// eviction.
    func noticeEviction() -> Bool {
        !self.evictionNoticed.exchange(true, ordering: .relaxed)
    }
}
