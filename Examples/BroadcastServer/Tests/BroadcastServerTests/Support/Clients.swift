import Broadcast
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A server-sent-events client over a real TCP connection to 127.0.0.1.
final class SSEClient: Sendable {
    private let channel: any Channel
    /// What it reads, as it arrives; it ends when the connection closes. Iterate it from one
    /// task at a time.
    let items: AsyncStream<SSEItem>

    private init(channel: any Channel, items: AsyncStream<SSEItem>) {
        self.channel = channel
        self.items = items
    }

    /// Connects and sends `GET /events` (or `target`), with a `Last-Event-ID` header when
    /// `lastEventID` is given; a task reads and parses what arrives.
    static func connect(port: Int, target: String = "/events", lastEventID: String? = nil) async throws -> SSEClient {
        let (items, continuation) = AsyncStream.makeStream(of: SSEItem.self)
        let connection = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let client = SSEClient(channel: connection.channel, items: items)
        Task {
            do {
                try await connection.executeThenClose { inbound, outbound in
                    try await outbound.write(
                        ByteBuffer(
                            string: "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                                + (lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? "") + "\r\n"))
                    var parser = EventStreamParser()
                    for try await buffer in inbound {
                        for item in try parser.feed(buffer) { continuation.yield(item) }
                    }
                }
            } catch {
                // closed by close(), or by the server
            }
            continuation.finish()
        }
        return client
    }

    /// Closes the connection at once, in the middle of the response.
    func close() async {
        try? await self.channel.close()
    }

    /// Resets the connection, in the middle of the response: `SO_LINGER` 0, then close, so
    /// the kernel sends an RST and drops what was still unread, as a network cut or a killed
    /// client process does to the server.
    func reset() async throws {
        let socket = try #require(self.channel as? any SocketOptionProvider, "a socket channel")
        try await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        try? await self.channel.close()
    }
}

extension AsyncStream<SSEItem>.Iterator {
    /// The next event named `name`, skipping comments and other events; nil at the end.
    mutating func next(named name: String) async -> (id: String?, data: String)? {
        while let item = await self.next() {
            if case .event(name, let id, let data) = item { return (id, data) }
        }
        return nil
    }
}

/// Connects `count` event-stream clients to the server on `port`, and waits until each has
/// read `: connected`, which the server writes once the client's subscriptions exist.
func connectEventStreams(_ count: Int, port: Int) async throws -> [SSEClient] {
    try await withTimeout(.seconds(20), "\(count) clients to connect") {
        try await withThrowingTaskGroup(of: SSEClient.self) { group in
            for _ in 0..<count {
                group.addTask {
                    let client = try await SSEClient.connect(port: port)
                    var items = client.items.makeAsyncIterator()
                    let first = await items.next()
                    guard first == .comment("connected") else {
                        throw TimedOut(what: "`: connected`, got \(String(describing: first))")
                    }
                    return client
                }
            }
            var clients: [SSEClient] = []
            for try await client in group { clients.append(client) }
            return clients
        }
    }
}

/// A response to a ``HTTPConnection`` request.
struct HTTPResult: Sendable {
    let status: Int
    let body: String
}

/// One keep-alive HTTP/1.1 connection to 127.0.0.1, for requests one after the other.
struct HTTPConnection {
    struct ProtocolError: Error {}

    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var received: [UInt8] = []

    static func with<Result: Sendable>(
        port: Int, _ body: (inout HTTPConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await connection.executeThenClose { inbound, outbound in
            var http = HTTPConnection(inbound: inbound.makeAsyncIterator(), outbound: outbound)
            return try await body(&http)
        }
    }

    private init(
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) {
        self.inbound = inbound
        self.outbound = outbound
    }

    /// Sends a request and reads its response (which must have a Content-Length).
    mutating func request(_ method: String, _ path: String, body: String = "") async throws -> HTTPResult {
        let bodyBytes = Array(body.utf8)
        var request = ByteBuffer(
            string: "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(bodyBytes.count)\r\n\r\n")
        request.writeBytes(bodyBytes)
        try await self.outbound.write(request)

        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while true {
            if headEnd == nil, self.received.count >= 4 {
                headEnd = (0...(self.received.count - 4)).first { self.received[$0..<$0 + 4].elementsEqual(separator) }
            }
            if let end = headEnd {
                let head = String(decoding: self.received[..<end], as: UTF8.self).lowercased()
                let lines = head.split(separator: "\r\n")
                guard let status = lines.first.flatMap({ Int($0.dropFirst(9).prefix(3)) }) else {
                    throw ProtocolError()
                }
                let length =
                    lines.first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if self.received.count >= end + 4 + length {
                    let body = String(decoding: self.received[(end + 4)..<(end + 4 + length)], as: UTF8.self)
                    self.received.removeFirst(end + 4 + length)
                    return HTTPResult(status: status, body: body)
                }
            }
            guard let buffer = try await self.inbound.next() else { throw ProtocolError() }
            self.received.append(contentsOf: buffer.readableBytesView)
        }
    }

    /// `POST /messages` with `text`; returns the message id the server assigned.
    mutating func post(_ text: String) async throws -> Int {
        let result = try await self.request("POST", "/messages", body: text)
        guard result.status == 202,
            let reply = try? JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any],
            let id = reply["id"] as? Int
        else { throw ProtocolError() }
        return id
    }

    /// `GET /stats`.
    mutating func stats() async throws -> Stats {
        let result = try await self.request("GET", "/stats")
        guard result.status == 200 else { throw ProtocolError() }
        return try JSONDecoder().decode(Stats.self, from: Data(result.body.utf8))
    }
}

/// `GET /metrics` on a connection of its own: the Prometheus text, one line per sample.
func fetchMetrics(port: Int) async throws -> [String] {
    try await HTTPConnection.with(port: port) { http in
        let result = try await http.request("GET", "/metrics")
        guard result.status == 200 else { throw HTTPConnection.ProtocolError() }
        return result.body.split(separator: "\n").map(String.init)
    }
}

/// The value of the sample named `name` with exactly these `labels` (in the order the
/// registry writes them), or `nil` if the scrape has none.
func sample(_ name: String, _ labels: String, in lines: [String]) -> Double? {
    let prefix = "\(name){\(labels)} "
    return lines.first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
}

/// Scrapes `GET /metrics` until the sample `name{labels}` is `value`, and returns that
/// scrape; throws ``TimedOut`` after `limit`. For the subscriber gauges, which follow the
/// counts in a task of their own.
func waitForSample(
    _ name: String, _ labels: String, toBe value: Double, port: Int, within limit: Duration = .seconds(10)
) async throws -> [String] {
    try await withTimeout(limit, "\(name){\(labels)} to be \(value)") {
        while true {
            let lines = try await fetchMetrics(port: port)
            if sample(name, labels, in: lines) == value { return lines }
            try await Task.sleep(for: .milliseconds(10))  // between scrapes; the wait is for the value
        }
    }
}

/// `GET /stats` on a connection of its own.
func fetchStats(port: Int) async throws -> Stats {
    try await HTTPConnection.with(port: port) { try await $0.stats() }
}

/// A client on a plain socket with a small receive buffer, that sends `GET /events` and
/// reads only when told to: left alone, it never reads, and the server's writes to it
/// fill the socket buffers.
final class RawEventStreamClient: Sendable {
    enum Read {
        case bytes(ByteBuffer)
        case nothingYet
        case closed
    }

    private let socket: Int32

    init(port: Int, receiveBufferSize: Int32) throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var size = receiveBufferSize
        // Before connect(), so that the window it advertises stays small.
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        let request = Array("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".utf8)
        guard Glibc.send(fd, request, request.count, 0) == request.count else {
            Glibc.close(fd)
            throw POSIXError(.EIO)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.socket = fd
    }

    /// Reads at most `limit` bytes of what has arrived, without waiting.
    func read(upTo limit: Int) -> Read {
        var bytes = [UInt8](repeating: 0, count: limit)
        let count = Glibc.recv(self.socket, &bytes, limit, 0)
        if count > 0 { return .bytes(ByteBuffer(bytes: bytes[..<count])) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .nothingYet }
        return .closed  // 0: the server closed it; or reset
    }

    deinit {
        Glibc.close(self.socket)
    }
}

/// A test step that took longer than its hang guard.
struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out: \(self.what)" }
}

/// Runs `body`, and throws ``TimedOut`` if it has not finished after `limit`. Only a hang
/// guard: tests wait for explicit signals, and the limits are generous.
func withTimeout<Result: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// A flag one task sets and another reads.
final class TestFlag: Sendable {
    private let value = Mutex(false)

    var isSet: Bool { self.value.withLock { $0 } }

    func set() { self.value.withLock { $0 = true } }
}

extension Duration {
    var seconds: Double {
        Double(self.components.seconds) + Double(self.components.attoseconds) * 1e-18
    }

    /// "123.4 ms"
    var ms: String {
        String(format: "%.1f ms", self.seconds * 1000)
    }
}

/// Reads a ``RawEventStreamClient`` when the test says so, and parses what it read.
struct RawEventStreamReader {
    let client: RawEventStreamClient
    private var parser = EventStreamParser()
    /// Everything parsed so far.
    private(set) var items: [SSEItem] = []
    /// Whether the server closed the connection (or reset it).
    private(set) var closed = false

    init(_ client: RawEventStreamClient) {
        self.client = client
    }

    /// The ids of the `message` events parsed so far.
    var messageIDs: [Int] {
        self.items.compactMap { item in
            guard case .event("message", let id, _) = item else { return nil }
            return Int(id ?? "") ?? -1
        }
    }

    /// Whether an `event: evicted` was parsed.
    var sawEvicted: Bool {
        self.items.contains { if case .event("evicted", _, _) = $0 { true } else { false } }
    }

    /// Reads as fast as the bytes arrive until `done` holds or the connection is closed;
    /// throws ``TimedOut`` after `limit` (a hang guard).
    mutating func read(
        within limit: Duration, _ what: String, until done: (RawEventStreamReader) -> Bool
    ) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while !done(self) && !self.closed {
            switch self.client.read(upTo: 65536) {
            case .bytes(let bytes): self.items += try self.parser.feed(bytes)
            case .closed: self.closed = true
            case .nothingYet:
                // Polls the non-blocking socket: nothing has arrived yet.
                guard clock.now < deadline else { throw TimedOut(what: what) }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }
}
