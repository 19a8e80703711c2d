import Foundation
import Logging
import ServiceLifecycle

@testable import ChatRooms

/// A chat server running in this process, on 127.0.0.1 and a free port.
struct ChatTestServer: Sendable {
    let server: ChatServer
    let port: Int
    /// The server's service group: ``shutDown()`` starts its graceful shutdown.
    let services: ServiceGroup

    /// Small limits, so that a client that never reads is evicted after a few hundred
    /// messages of 1 kB: its 4 kB socket buffers (the server's `SO_SNDBUF`, the client's
    /// `SO_RCVBUF`) and NIO's 64 kB above them fill, then the hard limit (64). The soft limit's
    /// duration is long: these tests evict at the hard limit.
    static let configuration = ChatConfiguration(
        port: 0, hardLimit: 64, softLimit: 32, softLimitDuration: .seconds(600), sendBufferSize: 4096,
        shutdownDeadline: .seconds(5))

    /// Starts a server, runs `body` with it, and shuts the server down gracefully.
    static func run<Result: Sendable>(
        _ configuration: ChatConfiguration = Self.configuration,
        _ body: @escaping @Sendable (ChatTestServer) async throws -> Result
    ) async throws -> Result {
        var logger = Logger(label: "ChatRoomsTests")
        logger.logLevel = .warning
        let server = ChatServer(configuration: configuration, logger: logger)
        let port = ListeningPort()
        let services = server.serviceGroup(gracefulShutdownSignals: [], onServerRunning: port.report)
        return try await withServerRunning(services, reportingTo: port) {
            try await body(ChatTestServer(server: server, port: $0, services: services))
        }
    }

    /// Starts the graceful shutdown (as SIGTERM would): the rooms end, then the HTTP server stops.
    func shutDown() async {
        await self.services.triggerGracefulShutdown()
    }

    /// Connects `name` to `room` and reads until its own `joined` frame, which the server
    /// sends once the client is subscribed: it receives everything said in the room from then on.
    func join(_ room: String, as name: String, receiveBufferSize: Int32 = 1 << 20) async throws -> ChatClient {
        var client = ChatClient(
            WebSocketReader(
                try RawWebSocketClient(
                    port: self.port, path: "/rooms/\(room)/ws?name=\(name)", receiveBufferSize: receiveBufferSize)),
            name: name)
        try await client.read("\(name) to join \(room)") { $0.contains { $0.type == "joined" && $0.user == name } }
        return client
    }

    /// `GET /rooms/<room>`.
    func presence(in room: String) async throws -> RoomPresence {
        try await self.fetch("/rooms/\(room)")
    }

    /// `GET /stats`.
    func stats() async throws -> ChatStats {
        try await self.fetch("/stats")
    }

    private func fetch<Body: Decodable>(_ path: String) async throws -> Body {
        let result = try await HTTPConnection.with(port: self.port) { try await $0.request("GET", path) }
        guard result.status == 200 else { throw HTTPConnection.ProtocolError() }
        return try JSONDecoder().decode(Body.self, from: Data(result.body.utf8))
    }

    /// Waits until `room` is freed (its last client left), with a hang guard.
    func waitUntilFreed(_ room: String) async throws {
        let rooms = self.server.rooms
        try await withTimeout(.seconds(10), "\(room) to be freed") { try await rooms.waitUntilFreed(room) }
    }

    /// Waits until `count` WebSocket handlers run, with a hang guard.
    func waitForClients(_ count: Int) async throws {
        let connections = self.server.connections
        try await withTimeout(.seconds(10), "\(count) clients (now \(connections.value))") {
            for await current in connections where current == count { return }
        }
    }
}

/// A chat client: a ``WebSocketReader`` whose text frames are the room's ``ChatFrame``s.
struct ChatClient: Sendable {
    private(set) var reader: WebSocketReader
    let name: String
    /// Every frame received so far, in order (decoded once each).
    private(set) var frames: [ChatFrame] = []

    init(_ reader: WebSocketReader, name: String) {
        self.reader = reader
        self.name = name
    }

    /// The `message` frames received, as `user: text`.
    var messages: [String] { Self.messages(in: self.frames) }

    /// The `message` frames of `frames`, as `user: text`.
    static func messages(in frames: [ChatFrame]) -> [String] {
        frames.filter { $0.type == "message" }.map { "\($0.user): \($0.text ?? "")" }
    }

    /// Says `text` in the room.
    func say(_ text: String) throws {
        try self.reader.client.sendText(text)
    }

    /// Reads until `done` holds for the frames received so far, or the connection ends;
    /// throws ``TimedOut`` after 20 s.
    mutating func read(_ what: String, until done: ([ChatFrame]) -> Bool) async throws {
        var frames = self.frames
        func decodeNew(_ texts: [String]) {
            frames += texts[frames.count...].map {
                (try? JSONDecoder().decode(ChatFrame.self, from: Data($0.utf8))) ?? ChatFrame(type: $0, user: "?")
            }
        }
        try await self.reader.read(within: .seconds(20), what) { reader in
            decodeNew(reader.texts)
            return done(frames)
        }
        decodeNew(self.reader.texts)
        self.frames = frames
    }

    /// Leaves: sends a close frame, and reads until the server's answer and the end of the
    /// connection.
    mutating func leave() async throws {
        try self.reader.client.sendClose(code: 1000)
        try await self.read("\(self.name) to leave") { _ in false }
    }
}
