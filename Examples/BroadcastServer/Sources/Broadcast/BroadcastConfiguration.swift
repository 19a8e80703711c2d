/// The server's settings. The host is always 127.0.0.1.
public struct BroadcastConfiguration: Sendable {
    /// The TCP port; 0 picks a free one (the server reports which).
    public var port: Int
    /// How often the ticker upstream produces its next count.
    public var tickInterval: Duration
    /// How long a connection may stay silent before the server writes a `: heartbeat` comment.
    /// A client that vanished is noticed when such a write fails.
    public var heartbeatInterval: Duration
    /// The `.evicting(n)` limit of each client's subscriptions: a client that holds this many
    /// undelivered events when another arrives is evicted, and its response ends.
    public var evictAfter: Int
    /// How long one write to a client may stay pending before the server closes the
    /// connection: the client stopped reading and its socket buffers are full.
    public var writeTimeout: Duration
    /// The kernel send buffer (`SO_SNDBUF`) of each event stream, in bytes; nil leaves the
    /// kernel's default, which grows up to 4 MiB on Linux. A client that stops reading first
    /// fills this buffer, then its evicting subscriptions: a smaller one notices it sooner.
    public var sendBufferSize: Int?

    public init(
        port: Int = 8080,
        tickInterval: Duration = .seconds(1),
        heartbeatInterval: Duration = .seconds(15),
        evictAfter: Int = 256,
        writeTimeout: Duration = .seconds(10),
        sendBufferSize: Int? = nil
    ) {
        self.port = port
        self.tickInterval = tickInterval
        self.heartbeatInterval = heartbeatInterval
        self.evictAfter = evictAfter
        self.writeTimeout = writeTimeout
        self.sendBufferSize = sendBufferSize
    }
}

extension BroadcastConfiguration {
    /// The command-line usage.
    public static let usage = """
        usage: BroadcastServer [--port N] [--tick SECONDS] [--heartbeat SECONDS]
                               [--evict-after N] [--write-timeout SECONDS]
                               [--send-buffer BYTES]

          --port N                 TCP port on 127.0.0.1; 0 picks a free one (default 8080)
          --tick SECONDS           ticker period (default 1)
          --heartbeat SECONDS      idle time before a `: heartbeat` comment (default 15)
          --evict-after N          events a client may fall behind before it is evicted (default 256)
          --write-timeout SECONDS  a write pending this long closes the connection (default 10)
          --send-buffer BYTES      SO_SNDBUF of each event stream (default: the kernel's)
        """

    /// Reads the options from the command-line arguments (without the program name).
    public init(arguments: [String]) throws(UsageError) {
        self.init()
        var remaining = arguments[...]
        while let option = remaining.popFirst() {
            if option == "--help" || option == "-h" { throw UsageError(message: nil) }
            guard let value = remaining.popFirst() else {
                throw UsageError(message: "\(option) needs a value")
            }
            switch option {
            case "--port":
                guard let port = Int(value), (0...65535).contains(port) else {
                    throw UsageError(message: "--port: not a port number: \(value)")
                }
                self.port = port
            case "--tick": self.tickInterval = try Self.seconds(value, option)
            case "--heartbeat": self.heartbeatInterval = try Self.seconds(value, option)
            case "--write-timeout": self.writeTimeout = try Self.seconds(value, option)
            case "--evict-after":
                guard let n = Int(value), n >= 1 else {
                    throw UsageError(message: "--evict-after: expected a whole number >= 1, got \(value)")
                }
                self.evictAfter = n
            case "--send-buffer":
                guard let n = Int(value), n >= 1 else {
                    throw UsageError(message: "--send-buffer: expected a number of bytes >= 1, got \(value)")
                }
                self.sendBufferSize = n
            default:
                throw UsageError(message: "unknown option \(option)")
            }
        }
    }

    private static func seconds(_ text: String, _ option: String) throws(UsageError) -> Duration {
        guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
            throw UsageError(message: "\(option): expected a number of seconds > 0, got \(text)")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }

    /// A command line the server does not understand; `message` is nil for `--help`.
    public struct UsageError: Error, Sendable {
        public let message: String?
    }
}
