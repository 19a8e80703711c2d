import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// A part of an HTTP response, as the test reads it.
enum ResponsePart: Sendable {
    case head(HTTPResponseHead)
    case body(ByteBuffer)
    case end
}

/// Sends one request when the connection opens and passes the response parts on.
private final class ResponseStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let head: HTTPRequestHead
    let body: ByteBuffer?
    let parts: AsyncThrowingStream<ResponsePart, any Error>.Continuation

    init(head: HTTPRequestHead, body: ByteBuffer?, parts: AsyncThrowingStream<ResponsePart, any Error>.Continuation) {
        self.head = head
        self.body = body
        self.parts = parts
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(self.wrapOutboundOut(.head(self.head)), promise: nil)
        if let body { context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head): self.parts.yield(.head(head))
        case .body(let body): self.parts.yield(.body(body))
        case .end: self.parts.yield(.end)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.parts.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.parts.finish(throwing: error)
        context.close(promise: nil)
    }
}

/// One HTTP/1.1 connection to 127.0.0.1 carrying one request: a real client on loopback.
struct HTTPConnection: Sendable {
    let channel: any Channel
    let parts: AsyncThrowingStream<ResponsePart, any Error>

    static func open(
        port: Int, method: HTTPMethod, path: String, headers: [(String, String)] = [], body: String? = nil,
        close: Bool
    ) async throws -> Self {
        let (parts, continuation) = AsyncThrowingStream.makeStream(of: ResponsePart.self)
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "Host", value: "127.0.0.1:\(port)")
        head.headers.add(contentsOf: headers)
        if close { head.headers.add(name: "Connection", value: "close") }
        let bodyBuffer = body.map { ByteBuffer(string: $0) }
        if let bodyBuffer { head.headers.add(name: "Content-Length", value: "\(bodyBuffer.readableBytes)") }
        let request = head
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(
                        ResponseStreamHandler(head: request, body: bodyBuffer, parts: continuation))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return Self(channel: channel, parts: parts)
    }

    /// Closes the socket, as a client that goes away does.
    func close() {
        self.channel.close(promise: nil)
    }

    /// Resets the connection: `SO_LINGER` 0, then close, so that the kernel sends an RST and
    /// drops what was still unread, as a network cut or a killed client process does.
    func reset() async throws {
        let socket = try #require(self.channel as? any SocketOptionProvider, "a socket channel")
        try await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        try? await self.channel.close()
    }

    /// Stops or resumes reading from the socket (`autoRead`). Stopped, the connection is a
    /// client that stays connected but takes nothing more: once the socket buffers on both
    /// sides are full, the server's writes to it wait.
    func setReading(_ reading: Bool) async throws {
        try await self.channel.setOption(ChannelOptions.autoRead, value: reading).get()
    }
}

struct HTTPResponse: Sendable {
    var status: HTTPResponseStatus
    var body: String
}

/// A whole request and its whole response.
func httpRequest(port: Int, _ method: HTTPMethod, _ path: String, body: String? = nil) async throws -> HTTPResponse {
    let connection = try await HTTPConnection.open(port: port, method: method, path: path, body: body, close: true)
    defer { connection.close() }
    var status: HTTPResponseStatus?
    var collected = ByteBuffer()
    loop: for try await part in connection.parts {
        switch part {
        case .head(let head): status = head.status
        case .body(var buffer): collected.writeBuffer(&buffer)
        case .end: break loop
        }
    }
    guard let status else { throw TestFailure("\(method) \(path): the connection closed before a response") }
    return HTTPResponse(status: status, body: String(buffer: collected))
}

/// A server-sent event: `event` is "message" when the server named none; `id` is the event's
/// own `id:`, if it has one.
struct ServerSentEvent: Sendable, Hashable, CustomStringConvertible {
    var event: String
    var id: String? = nil
    var data: String

    var description: String {
        "\(self.event)(\(self.id.map { "id \($0), " } ?? "")\(self.data.count > 40 ? String(self.data.prefix(40)) + "…" : self.data))"
    }
}

/// An SSE client of `GET /rooms/ROOM/events`.
struct SSEClient {
    let connection: HTTPConnection
    private var parts: AsyncThrowingStream<ResponsePart, any Error>.AsyncIterator
    private var pending: [UInt8] = []
    private var eventName: String?
    private var eventID: String?
    private var dataLines: [String] = []
    /// The comment lines seen, without their `: ` (heartbeats, the wait for the connection).
    private(set) var comments: [String] = []

    /// Connects and reads the response head; with `lastEventID`, as a client that reconnects.
    static func connect(port: Int, path: String, lastEventID: String? = nil) async throws -> Self {
        let connection = try await HTTPConnection.open(
            port: port, method: .GET, path: path, headers: lastEventID.map { [("Last-Event-ID", $0)] } ?? [],
            close: false)
        var client = Self(connection: connection, parts: connection.parts.makeAsyncIterator())
        guard case .head(let head) = try await client.parts.next() else {
            throw TestFailure("GET \(path): no response head")
        }
        guard head.status == .ok, head.headers["Content-Type"].first == "text/event-stream" else {
            throw TestFailure("GET \(path): \(head.status), \(head.headers)")
        }
        return client
    }

    private init(connection: HTTPConnection, parts: AsyncThrowingStream<ResponsePart, any Error>.AsyncIterator) {
        self.connection = connection
        self.parts = parts
    }

    /// The next event, skipping comments; `nil` when the server ended the stream.
    mutating func next() async throws -> ServerSentEvent? {
        while true {
            while let newline = self.pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: self.pending[..<newline], as: UTF8.self)
                self.pending.removeSubrange(...newline)
                if let event = self.take(line) { return event }
            }
            switch try await self.parts.next() {
            case .body(let buffer)?: self.pending += buffer.readableBytesView
            case .head?: throw TestFailure("a second response head")
            case .end?, nil: return nil
            }
        }
    }

    /// One line of the stream; returns the event a blank line completes.
    private mutating func take(_ line: String) -> ServerSentEvent? {
        if line.isEmpty {
            defer { (self.eventName, self.eventID, self.dataLines) = (nil, nil, []) }
            guard self.eventName != nil || !self.dataLines.isEmpty else { return nil }
            return ServerSentEvent(
                event: self.eventName ?? "message", id: self.eventID, data: self.dataLines.joined(separator: "\n"))
        }
        if line.hasPrefix(":") {
            self.comments.append(String(line.dropFirst(line.hasPrefix(": ") ? 2 : 1)))
            return nil
        }
        let (field, value) =
            line.firstIndex(of: ":").map { colon in
                var value = line[line.index(after: colon)...]
                if value.hasPrefix(" ") { value = value.dropFirst() }
                return (String(line[..<colon]), String(value))
            } ?? (line, "")
        switch field {
        case "event": self.eventName = value
        case "id": self.eventID = value
        case "data": self.dataLines.append(value)
        default: break
        }
        return nil
    }

    /// The next event, which must be `expected`.
    @discardableResult
    mutating func expect(_ expected: String, _ context: String) async throws -> ServerSentEvent {
        guard let event = try await self.next() else {
            throw TestFailure("\(context): the stream ended while expecting `\(expected)`")
        }
        guard event.event == expected else {
            throw TestFailure("\(context): expected `\(expected)`, got \(event)")
        }
        return event
    }

    func close() {
        self.connection.close()
    }

    /// Resets the connection (an RST), as a network cut does.
    func reset() async throws {
        try await self.connection.reset()
    }

    /// Stops reading from the socket: what was read already is still returned by `next()`.
    func stopReading() async throws {
        try await self.connection.setReading(false)
    }

    /// Reads from the socket again.
    func resumeReading() async throws {
        try await self.connection.setReading(true)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
