import AsyncMulticast
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// One server instance: its shared LISTEN feed, routed by room, the pool that sends
/// notifications, and the HTTP routes.
///
/// - `GET /rooms/ROOM/events`: server-sent events; each client is one subscriber of its room,
///   evicted when it falls too far behind (the configuration's `bufferingPolicy`). Each
///   message carries `id:` its row's id; a client that reconnects, to this instance or
///   another, with `Last-Event-ID` (or `?lastEventId=`) gets the messages it missed first.
/// - `POST /rooms/ROOM/messages`: the body (UTF-8; with the room and its id, under 8000
///   bytes) is inserted into the table of messages (``EventHistory``) and sent with
///   `pg_notify` as `ROOM\tID\tbody` in the same transaction, so that the room's clients of
///   every instance receive it.
/// - `GET /rooms/ROOM`: the room's local subscribers, as JSON.
/// - `GET /stats`: the instance's figures (``FeedStats`` and the clients') as JSON.
///
/// A room is 1 to 64 ASCII letters, digits, `-`, `_` or `.` (``RoomPayload``); `400` otherwise.
public final class FanoutServer: Sendable {
    public let configuration: FanoutConfiguration
    public let feed: ListenFeed
    /// Sends the notifications and reads the table of messages, on pooled connections
    /// separate from the LISTEN one.
    let notifier: PostgresClient
    /// The table of messages, where a reconnecting client's missed messages are read.
    let history: EventHistory
    let logger: Logger
    /// The subscriptions of the clients connected now, and the evictions so far, for `/stats`.
    private let clients = Mutex(Clients())

    private struct Clients {
        var connected: [Int: SharedSubscription<RoomEvent, Never>] = [:]
        var nextID = 0
        var evictions = 0
        /// Catch-ups (a reconnect with an id, or a resumed LISTEN) served from the local
        /// history alone, and those that read the table.
        var catchUpsFromMemory = 0
        var catchUpsFromTable = 0
    }

    public init(configuration: FanoutConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.feed = ListenFeed(configuration: configuration, logger: logger)
        self.notifier = PostgresClient(
            configuration: configuration.postgres.clientConfiguration(
                applicationName: configuration.notifyApplicationName),
            backgroundLogger: logger)
        self.history = EventHistory(channel: configuration.channel, logger: logger)
    }

    /// Creates the table of messages (``EventHistory``) if it is not there yet. Call it once
    /// before serving: posts write to it and reconnecting clients read from it.
    public func prepareDatabase() async throws {
        let connection = try await PostgresConnection.connect(
            configuration: self.configuration.postgres.connectionConfiguration(
                applicationName: self.configuration.notifyApplicationName),
            id: 0, logger: self.logger)
        do {
            try await EventHistory.createTable(on: connection, logger: self.logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// The largest payload PostgreSQL accepts in its default configuration is 7999 bytes: the
    /// room, the id, two tabs and the message (``RoomPayload/maximumMessageBytes(room:)``).
    public static let maximumPayloadBytes = 7999

    /// Sends `message` to the clients of `room`, in every instance, and keeps it in the table
    /// of messages. Returns its id once it is committed: messages sent one after another
    /// arrive in that order, and a room's ids increase in that order.
    @discardableResult
    public func publish(_ message: String, to room: String) async throws -> Int64 {
        // One channel for every room: the room and the id travel in the payload.
        try await self.history.append(message, to: room, on: self.notifier)
    }

    /// The HTTP application on `host:port` (port 0: any free port; `onServerRunning` gets the
    /// one chosen). Running it also runs the notification pool.
    public func application(
        host: String = "127.0.0.1",
        port: Int,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: FanoutRequestContext.self)
        router.get("rooms/:room/events") { request, context in
            self.events(
                room: try Self.room(context), after: Self.lastEventID(of: request), channel: context.channel)
        }
        router.post("rooms/:room/messages") { request, context in
            try await self.message(request, room: try Self.room(context))
        }
        router.get("rooms/:room") { _, context in try self.roomResponse(try Self.room(context)) }
        router.get("stats") { _, _ in try self.statsResponse() }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "postgres-fanout"),
            services: [self.notifier],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: self.logger)
    }

    /// The room of the path, if it is a valid name; `400` otherwise.
    static func room(_ context: FanoutRequestContext) throws -> String {
        guard let room = context.parameters.get("room"), RoomPayload.isValidRoom(room) else {
            throw HTTPError(.badRequest, message: "A room is 1 to 64 ASCII letters, digits, -, _ or .")
        }
        return room
    }

    /// The id of the last message a reconnecting client saw: its `Last-Event-ID` header, or,
    /// for a client that cannot set headers, its `lastEventId` query parameter. One that is
    /// not a whole number from 0 is ignored (the client starts from now, as a new one does).
    static func lastEventID(of request: Request) -> Int64? {
        let text = request.headers[.init("Last-Event-ID")!] ?? request.uri.queryParameters.get("lastEventId")
        guard let text, let id = Int64(text), id >= 0 else { return nil }
        return id
    }

    /// Counts a catch-up for `/stats`: served from the local history alone, or with the table.
    func countCatchUp(fromMemory: Bool) {
        self.clients.withLock { clients in
            if fromMemory { clients.catchUpsFromMemory += 1 } else { clients.catchUpsFromTable += 1 }
        }
    }

    struct Stats: Encodable {
        var instance: String
        /// The clients streaming now, in every room: an evicted client counts until its
        /// handler ends.
        var subscribers: Int
        /// The rooms with local subscribers now: a room is freed with its last subscriber.
        var rooms: Int
        var listening: Bool
        var listenConnectionsOpened: Int
        /// Clients evicted since the instance started, by the hard or the soft limit.
        var evictions: Int
        /// The most unread events one client connected now has held at once since it
        /// connected (`SharedSubscription.backlog`): the figure to size the limits with.
        var maxBacklogHighWaterMark: Int
        /// Catch-ups served from the local history alone, and those that read the table
        /// (see ``catchUp(_:after:to:)``).
        var catchUpsFromMemory: Int
        var catchUpsFromTable: Int
    }

    func statsResponse() throws -> Response {
        let stats = self.feed.stats
        let (subscriptions, evictions, fromMemory, fromTable) = self.clients.withLock {
            (Array($0.connected.values), $0.evictions, $0.catchUpsFromMemory, $0.catchUpsFromTable)
        }
        // Read outside the lock; an evicted client's backlog is nil until its handler ends.
        let highWaterMark = subscriptions.compactMap(\.backlog).map(\.highWaterMark).max() ?? 0
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try encoder.encode(
            Stats(
                instance: self.configuration.instanceName, subscribers: subscriptions.count, rooms: stats.rooms,
                listening: stats.listening, listenConnectionsOpened: stats.listenConnectionsOpened,
                evictions: evictions, maxBacklogHighWaterMark: highWaterMark, catchUpsFromMemory: fromMemory,
                catchUpsFromTable: fromTable))
        return Self.json(json)
    }

    struct RoomStats: Encodable {
        var room: String
        /// The room's local subscribers now (`AsyncSharedTopics.subscriberCount(of:)`): an
        /// evicted one no longer counts.
        var subscribers: Int
    }

    func roomResponse(_ room: String) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Self.json(
            try encoder.encode(RoomStats(room: room, subscribers: self.feed.subscriberCount(of: room))))
    }

    static func json(_ json: Data) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }

    func message(_ request: Request, room: String) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: RoomPayload.maximumMessageBytes(room: room))
        } catch is NIOTooManyBytesError {
            throw HTTPError(
                .contentTooLarge,
                message:
                    "A NOTIFY payload (room, id, tabs, message) must be under 8000 bytes; store larger messages and send their id.")
        }
        try await self.publish(String(buffer: body), to: room)
        return Response(status: .noContent)
    }

    /// `GET /rooms/ROOM/events`: one client, one subscriber of its room of the LISTEN feed;
    /// one that reconnects gets the messages after `lastEventID` first.
    func events(room: String, after lastEventID: Int64?, channel: any Channel) -> Response {
        // Joins now, while the request is handled: every event of the room from here on
        // reaches the body, which runs later, in another task.
        let subscription = self.feed.subscribe(to: room)
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                let connection = ClientConnection(channel: channel)
                try await self.watchingForEviction(subscription, of: connection) {
                    try await self.stream(
                        subscription, of: room, after: lastEventID, to: &writer, connection: connection)
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
        _ subscription: SharedSubscription<RoomEvent, Never>, of connection: ClientConnection,
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
