import AsyncMulticast
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// One server instance: its shared LISTEN feed, the pool that sends notifications, and the
/// HTTP routes.
///
/// - `GET /events`: server-sent events; each client is one subscriber of the shared feed.
/// - `POST /messages`: the body (UTF-8, under 8000 bytes) is sent with `pg_notify`, so that
///   the clients of every instance listening to the channel receive it.
/// - `GET /stats`: ``FeedStats`` as JSON.
public final class FanoutServer: Sendable {
    public let configuration: FanoutConfiguration
    public let feed: ListenFeed
    /// Sends the notifications, on pooled connections separate from the LISTEN one.
    let notifier: PostgresClient
    let logger: Logger

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
        let router = Router()
        router.get("events") { _, _ in self.events() }
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
    }

    func statsResponse() throws -> Response {
        let stats = self.feed.stats
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try encoder.encode(
            Stats(
                instance: self.configuration.instanceName, subscribers: stats.subscribers, listening: stats.listening,
                listenConnectionsOpened: stats.listenConnectionsOpened))
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
    func events() -> Response {
        // Joins now, while the request is handled: every event from here on reaches the
        // body, which runs later, in another task.
        let subscription = self.feed.subscribe()
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                try await self.stream(subscription, to: &writer)
                try await writer.finish(nil)
            })
    }

    /// Writes the shared feed to one client until the client leaves (a write fails) or is
    /// evicted.
    ///
    /// The client sees `event: ready` once the instance's LISTEN connection is in effect for it
    /// (what is committed after that reaches it), `data:` lines for each message, and, if the
    /// LISTEN connection is lost, `event: interrupted` then `event: resumed` when a new one
    /// listens; messages committed between the two are lost for this instance's clients.
    func stream(
        _ subscription: SharedSubscription<FeedEvent, Never>, to writer: inout any ResponseBodyWriter
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
            case .evicted:
                // This client fell `clientBuffer` events behind: it reconnects and resyncs.
                try await writer.write(ServerSentEvent.event("evicted", data: instance))
                return
            }
        }
    }
}
