import Foundation
import NIOCore

/// A WebSocket client on a plain socket with a receive buffer of the test's choosing: it
/// sends the upgrade request for `path` (the broadcast server's `GET /ws`, a chat room's
/// `GET /rooms/<room>/ws?name=<name>`) and reads only when told to, so that, left alone,
/// the server's writes to it fill the socket buffers. Speaks just what the tests need of
/// RFC 6455: it sends text frames, parses the server's frames (never masked), and answers a
/// close frame with its own.
final class RawWebSocketClient: Sendable {
    private let socket: Int32

    init(port: Int, path: String = "/ws", receiveBufferSize: Int32) throws {
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
        self.socket = fd
        try self.send(
            Array(
                ("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    enum Read {
        case bytes([UInt8])
        case nothingYet
        case closed
    }

    /// Reads at most `limit` bytes of what has arrived, without waiting.
    func read(upTo limit: Int) -> Read {
        var bytes = [UInt8](repeating: 0, count: limit)
        let count = Glibc.recv(self.socket, &bytes, limit, 0)
        if count > 0 { return .bytes(Array(bytes[..<count])) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .nothingYet }
        return .closed  // 0: the server closed it; or reset
    }

    /// Sends a close frame with `code` (masked, as a client's frames must be, with a zero key).
    func sendClose(code: UInt16) throws {
        try self.send([0x88, 0x80 | 2, 0, 0, 0, 0, UInt8(code >> 8), UInt8(code & 0xFF)])
    }

    /// Sends `text` in one text frame, masked with a zero key (which leaves the payload as it is).
    func sendText(_ text: String) throws {
        let payload = Array(text.utf8)
        var header: [UInt8] = [0x81]
        switch payload.count {
        case ..<126: header.append(0x80 | UInt8(payload.count))
        case ..<65536: header += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: header += [0x80 | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        try self.send(header + [0, 0, 0, 0] + payload)
    }

    private func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(self.socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                sent += count
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                continue  // a close frame or a short message: the send buffer has room at once
            } else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
        }
    }

    deinit {
        Glibc.close(self.socket)
    }
}

/// What a ``RawWebSocketClient`` received, parsed: the upgrade response, then its frames.
struct WebSocketReader {
    struct ProtocolError: Error, CustomStringConvertible {
        let description: String
    }

    let client: RawWebSocketClient
    private var pending: [UInt8] = []
    private var upgraded = false
    /// The text frames received, in order.
    private(set) var texts: [String] = []
    /// The close frame's code, once one arrived (it was answered with the same code).
    private(set) var closeCode: UInt16?
    /// Whether the server closed the connection (or reset it).
    private(set) var closed = false

    init(_ client: RawWebSocketClient) {
        self.client = client
    }

    /// Reads as fast as the bytes arrive until `done` holds or the connection is closed;
    /// throws ``TimedOut`` after `limit` (a hang guard).
    mutating func read(within limit: Duration, _ what: String, until done: (WebSocketReader) -> Bool) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while !done(self) && !self.closed {
            switch self.client.read(upTo: 65536) {
            case .bytes(let bytes):
                self.pending += bytes
                try self.parse()
            case .closed:
                self.closed = true
            case .nothingYet:
                // Polls the non-blocking socket: nothing has arrived yet.
                guard clock.now < deadline else { throw TimedOut(what: what) }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    private mutating func parse() throws {
        if !self.upgraded {
            let end = Array("\r\n\r\n".utf8)
            guard let range = self.pending.firstRange(of: end) else { return }
            let head = String(decoding: self.pending[..<range.lowerBound], as: UTF8.self)
            guard head.hasPrefix("HTTP/1.1 101") else { throw ProtocolError(description: "not upgraded: \(head)") }
            self.pending.removeSubrange(..<range.upperBound)
            self.upgraded = true
        }
        while let (opcode, payload, size) = Self.frame(in: self.pending) {
            self.pending.removeFirst(size)
            switch opcode {
            case 0x1:
                self.texts.append(String(decoding: payload, as: UTF8.self))
            case 0x8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                if self.closeCode == nil { try? self.client.sendClose(code: code) }
                self.closeCode = code
            default:
                break  // ping, pong: not used by these tests
            }
        }
    }

    /// The first complete frame of `bytes` (unmasked, unfragmented): its opcode, its payload
    /// and its size in bytes; nil while incomplete.
    private static func frame(in bytes: [UInt8]) -> (opcode: UInt8, payload: [UInt8], size: Int)? {
        guard bytes.count >= 2 else { return nil }
        var length = Int(bytes[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard bytes.count >= 4 else { return nil }
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            offset = 4
        } else if length == 127 {
            guard bytes.count >= 10 else { return nil }
            length = bytes[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        guard bytes.count >= offset + length else { return nil }
        return (bytes[0] & 0x0F, Array(bytes[offset..<offset + length]), offset + length)
    }
}
