import NIOCore

/// Formats server-sent events (the `text/event-stream` format).
enum ServerSentEvent {
    /// An event: `event: NAME` (omitted for the default `message` type), `id: ID` if it has
    /// one (the client sends the last one it saw as `Last-Event-ID` when it reconnects), then
    /// one `data:` line per line of `data`. A payload's line breaks (`\n`, `\r\n`, `\r`)
    /// become `\n` for the client, which joins the `data:` lines with `\n`.
    static func event(_ name: String? = nil, id: Int64? = nil, data: String) -> ByteBuffer {
        var text = ""
        if let name { text += "event: \(name)\n" }
        if let id { text += "id: \(id)\n" }
        for line in data.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        {
            text += "data: \(line)\n"
        }
        text += "\n"
        return ByteBuffer(string: text)
    }

    /// A comment line, which clients ignore: a heartbeat.
    static func comment(_ text: String) -> ByteBuffer {
        ByteBuffer(string: ": \(text)\n\n")
    }
}
