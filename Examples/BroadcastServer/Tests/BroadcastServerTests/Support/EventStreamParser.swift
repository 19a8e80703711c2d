import NIOCore

/// What a test client reads from `GET /events`.
enum SSEItem: Sendable, Equatable {
    /// A comment line (`: connected`, `: heartbeat`), without the colon and the space.
    case comment(String)
    /// An event: its `event:` name, its `id:` if any, and its `data:` lines joined by "\n".
    case event(name: String, id: String?, data: String)
    /// The end of the response body (its last, empty chunk).
    case endOfResponse
}

/// Parses an HTTP/1.1 response carrying an event stream, as its bytes arrive: the head,
/// then the body (chunked, or up to the end of the connection), then the events.
struct EventStreamParser {
    struct ProtocolError: Error, CustomStringConvertible {
        let description: String
    }

    private enum Stage {
        case head
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case untilClose
        case done
    }

    private var stage = Stage.head
    /// Received bytes not parsed yet (head or chunk framing).
    private var raw: [UInt8] = []
    /// Body bytes of the current, unfinished line.
    private var line: [UInt8] = []
    private var eventName: String?
    private var eventID: String?
    private var dataLines: [String] = []
    private(set) var status: Int?

    mutating func feed(_ buffer: ByteBuffer) throws -> [SSEItem] {
        self.raw.append(contentsOf: buffer.readableBytesView)
        var items: [SSEItem] = []
        var position = 0
        parsing: while true {
            switch self.stage {
            case .head:
                guard let end = Self.find([13, 10, 13, 10], in: self.raw, from: position) else { break parsing }
                let head = String(decoding: self.raw[position..<end], as: UTF8.self).lowercased()
                position = end + 4
                let lines = head.split(separator: "\r\n")
                guard let statusLine = lines.first, statusLine.hasPrefix("http/1.1 "),
                    let status = Int(statusLine.dropFirst(9).prefix(3))
                else { throw ProtocolError(description: "bad status line in \(head)") }
                self.status = status
                guard status == 200 else { throw ProtocolError(description: "status \(status)") }
                let chunked = lines.contains { $0.hasPrefix("transfer-encoding:") && $0.contains("chunked") }
                self.stage = chunked ? .chunkSize : .untilClose
            case .chunkSize:
                guard let end = Self.find([13, 10], in: self.raw, from: position) else { break parsing }
                let text = String(decoding: self.raw[position..<end], as: UTF8.self)
                guard let size = Int(text.split(separator: ";").first ?? "", radix: 16) else {
                    throw ProtocolError(description: "bad chunk size \(text)")
                }
                position = end + 2
                if size == 0 {
                    self.stage = .done
                    items.append(.endOfResponse)
                } else {
                    self.stage = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let count = min(remaining, self.raw.count - position)
                if count == 0 { break parsing }
                self.body(self.raw[position..<position + count], into: &items)
                position += count
                self.stage = remaining == count ? .chunkEnd : .chunkData(remaining: remaining - count)
            case .chunkEnd:
                guard self.raw.count - position >= 2 else { break parsing }
                position += 2
                self.stage = .chunkSize
            case .untilClose:
                self.body(self.raw[position...], into: &items)
                position = self.raw.count
                break parsing
            case .done:
                position = self.raw.count
                break parsing
            }
        }
        self.raw.removeFirst(position)
        return items
    }

    /// Splits the body into lines, and the lines into events.
    private mutating func body(_ bytes: ArraySlice<UInt8>, into items: inout [SSEItem]) {
        var rest = bytes
        while let newline = rest.firstIndex(of: 10) {
            self.line.append(contentsOf: rest[rest.startIndex..<newline])
            self.process(String(decoding: self.line, as: UTF8.self), into: &items)
            self.line.removeAll(keepingCapacity: true)
            rest = rest[(newline + 1)...]
        }
        self.line.append(contentsOf: rest)
    }

    private mutating func process(_ line: String, into items: inout [SSEItem]) {
        if line.isEmpty {
            if self.eventName != nil || !self.dataLines.isEmpty {
                items.append(
                    .event(
                        name: self.eventName ?? "message", id: self.eventID,
                        data: self.dataLines.joined(separator: "\n")))
            }
            (self.eventName, self.eventID, self.dataLines) = (nil, nil, [])
            return
        }
        if line.hasPrefix(":") {
            items.append(.comment(String(line.dropFirst().drop { $0 == " " })))
            return
        }
        let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let field = parts[0]
        var value = parts.count > 1 ? parts[1] : ""
        if value.hasPrefix(" ") { value = value.dropFirst() }
        switch field {
        case "event": self.eventName = String(value)
        case "id": self.eventID = String(value)
        case "data": self.dataLines.append(String(value))
        default: break
        }
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var index = start
        while index + pattern.count <= bytes.count {
            if bytes[index] == pattern[0] && bytes[index..<index + pattern.count].elementsEqual(pattern) {
                return index
            }
            index += 1
        }
        return nil
    }
}
