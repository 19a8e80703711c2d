import NIOCore

/// Formats server-sent events (the `text/event-stream` format).
enum ServerSentEvent {
    /// An event: `event: NAME` (omitted for the default `message` type), then one `data:` line
    /// per line of `data`. A payload's line breaks (`\n`, `\r\n`, `\r`) become `\n` for the
    /// client, which joins the `data:` lines with `\n`.
    static func event(_ name: String? = nil, data: String) -> ByteBuffer {
        var text = ""
        if let name { text += "event: \(name)\n" }
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
