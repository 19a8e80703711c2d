import AsyncMulticast
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Chat rooms over WebSocket: `GET /rooms/<room>/ws?name=<name>` joins a room; what a client
/// sends goes to everyone in its room, and to nobody else.
///
/// The rooms are an `AsyncSubjectTopics` keyed by the room's name: a room's subject is
/// created by its first client's join and freed after its last client leaves. There is no
/// registry of rooms here, and no lock: the topics are the registry, and a client joining a
/// room while its last client leaves either keeps the room or gets a fresh one, never a
/// room that nothing sends to any more.
public final class ChatServer: Sendable {
    public let configuration: ChatConfiguration
    /// The rooms, by name. Each element is one WebSocket text frame, its JSON encoded once
    /// for everyone in the room. Each client's subscription evicts it as the configuration
    /// says (``ChatConfiguration/bufferingPolicy``).
    public let rooms: AsyncSubjectTopics<String, String, Never>
    /// WebSocket handlers running, in every room (`clients` in `GET /stats`).
    public let connections = AsyncCurrentValueSubject<Int, Never>(0)
    private let evictionCount = Mutex(0)
    let logger: Logger

    /// A server whose soft limit's duration is timed on `clock`.
    public init(
        configuration: ChatConfiguration = .init(), clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "chat-rooms")
    ) {
        self.configuration = configuration
        self.rooms = AsyncSubjectTopics(buffering: configuration.bufferingPolicy, clock: clock)
        self.logger = logger
    }

    /// Clients evicted since the server started, in every room.
    public var evictions: Int { self.evictionCount.withLock { $0 } }

    /// `GET /rooms/<room>`: presence in one room.
    public func presence(in room: String) -> RoomPresence {
        RoomPresence(room: room, present: self.rooms.subscriberCount(of: room), live: self.rooms.isLive(room))
    }

    /// `GET /stats`.
    public var stats: ChatStats {
        ChatStats(rooms: self.rooms.keyCount, clients: self.connections.value, evictions: self.evictions)
    }

    /// A client was evicted: counted and logged once, by whichever of its tasks learned it first.
    func clientEvicted(_ user: String, in room: String, _ eviction: SubscriberEviction) {
        self.evictionCount.withLock { $0 += 1 }
        self.logger.notice("\(user) in \(room): \(eviction)")
    }
}

/// `GET /rooms/<room>`: `{"live":true,"present":2,"room":"swift"}`.
public struct RoomPresence: Codable, Sendable, Equatable, ResponseEncodable {
    /// The room's name.
    public let room: String
    /// Its clients now (`subscriberCount(of:)`); an evicted client no longer counts.
    public let present: Int
    /// Whether the room has a subject now (`isLive(_:)`): false once its last client left.
    public let live: Bool
}

/// `GET /stats`: `{"clients":3,"evictions":0,"rooms":2}`.
public struct ChatStats: Codable, Sendable, Equatable, ResponseEncodable {
    /// Rooms with clients (`keyCount`).
    public let rooms: Int
    /// WebSocket handlers running.
    public let clients: Int
    /// Clients evicted since the server started.
    public let evictions: Int
}

/// The request context: Hummingbird's basics, with JSON keys sorted for people reading `curl`.
public struct ChatRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }

    public var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension ChatServer {
    /// The HTTP routes: `GET /rooms/<room>` and `GET /stats`. The WebSocket
    /// (`GET /rooms/<room>/ws`) is upgraded before the router (``webSocketUpgrade(_:channel:)``).
    public func router() -> Router<ChatRequestContext> {
        let router = Router(context: ChatRequestContext.self)
        router.get("rooms/:room") { _, context -> RoomPresence in
            self.presence(in: try context.parameters.require("room"))
        }
        router.get("stats") { _, _ -> ChatStats in self.stats }
        return router
    }

    /// The server and the rooms, as one `ServiceGroup`: it serves until one of
    /// `gracefulShutdownSignals` arrives (or `triggerGracefulShutdown()`), then shuts down.
    ///
    /// A group shuts its services down in reverse order, so the rooms end first
    /// (``RoomsService``): every client gets what its room held for it, then a close frame
    /// 1000; then the HTTP server stops.
    public func serviceGroup(
        gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ServiceGroup {
        let application = Application(
            router: self.router(),
            server: .http1WebSocketUpgrade { request, channel, _ in
                try await self.webSocketUpgrade(request, channel: channel)
            },
            configuration: .init(
                address: .hostname("127.0.0.1", port: self.configuration.port), serverName: "chat-rooms"),
            onServerRunning: { channel in
                await onServerRunning(channel.localAddress?.port ?? self.configuration.port)
            },
            logger: self.logger
        )
        return ServiceGroup(
            configuration: .init(
                services: [.init(service: application), .init(service: RoomsService(server: self))],
                gracefulShutdownSignals: gracefulShutdownSignals,
                logger: self.logger
            ))
    }
}

/// Ends every room at graceful shutdown (`finish()`), then waits until every client's
/// handler has written what its room held and closed its WebSocket, or the shutdown deadline.
struct RoomsService: Service {
    let server: ChatServer

    func run() async throws {
        try? await gracefulShutdown()
        self.server.rooms.finish()
        let connections = self.server.connections
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await count in connections where count == 0 { return }
            }
            group.addTask { try? await Task.sleep(for: self.server.configuration.shutdownDeadline) }
            await group.next()
            group.cancelAll()
        }
    }
}
