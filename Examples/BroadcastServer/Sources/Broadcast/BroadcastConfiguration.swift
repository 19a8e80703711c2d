import AsyncMulticast

/// The server's settings. The host is always 127.0.0.1.
public struct BroadcastConfiguration: Sendable {
    /// The TCP port; 0 picks a free one (the server reports which).
    public var port: Int
    /// How often the ticker upstream produces its next count.
    public var tickInterval: Duration
    /// How long a connection may stay silent before the server writes a `: heartbeat` comment.
    /// A client that vanished is noticed when such a write fails.
    public var heartbeatInterval: Duration
    /// The hard limit of each client's subscriptions (one per feed): a client that holds this
    /// many undelivered events on a feed when another one arrives is evicted at once. It sizes
    /// the largest burst a healthy client may absorb; the server holds at most this many
    /// events per feed for one client.
    public var hardLimit: Int
    /// The soft limit: a client that holds more than this many undelivered events on a feed
    /// for ``softLimitDuration`` is evicted. From 0 to `hardLimit - 1`.
    public var softLimit: Int
    /// How long a client may hold more than ``softLimit`` events on a feed before it is
    /// evicted. Timed on the hub's clock: a client still above ``softLimit`` when it ends is
    /// evicted then, whether or not the feed has produced anything since.
    public var softLimitDuration: Duration
    /// How long one write to a client may stay pending before the server closes the
    /// connection. A backstop: a client that stops reading is evicted by the limits, and its
    /// connection closed at once, as soon as the feeds produce enough to take it past them.
    /// This catches the stalls the limits cannot see: a client that stops reading while the
    /// feeds are quiet (its heartbeat write blocks), or while they are too slow to take it
    /// more than ``softLimit`` events behind soon. Keep it well above ``softLimitDuration``,
    /// or it ends stalled clients before the limits do.
    public var writeTimeout: Duration
    /// The kernel send buffer (`SO_SNDBUF`) of each event stream and WebSocket, in bytes; nil leaves the
    /// kernel's default, which grows up to 4 MiB on Linux. A client that stops reading first
    /// fills this buffer, then its evicting subscriptions: a smaller one notices it sooner.
    public var sendBufferSize: Int?
    /// How long the graceful shutdown waits, per feed, for the clients to read what each feed
    /// still had for them and its end (`finish(drainingWithin:)`, `waitUntilDrained(within:)`),
    /// before the HTTP server stops and closes what is left.
    public var shutdownDeadline: Duration
    /// How many of the latest messages the server keeps so that a client that reconnects
    /// with `Last-Event-ID` resumes where it left off (the messages subject's replay cache,
    /// one copy shared by every client). A client whose id is older than that gets
    /// `event: gap` first, then the messages that are still kept. 0 keeps none: every
    /// resumption behind the newest message is a gap.
    public var history: Int

    public init(
        port: Int = 8080,
        tickInterval: Duration = .seconds(1),
        heartbeatInterval: Duration = .seconds(15),
        hardLimit: Int = 4096,
        softLimit: Int = 256,
        softLimitDuration: Duration = .seconds(10),
        writeTimeout: Duration = .seconds(60),
        sendBufferSize: Int? = nil,
        shutdownDeadline: Duration = .seconds(10),
        history: Int = 1024
    ) {
        self.port = port
        self.tickInterval = tickInterval
        self.heartbeatInterval = heartbeatInterval
        self.hardLimit = hardLimit
        self.softLimit = softLimit
        self.softLimitDuration = softLimitDuration
        self.writeTimeout = writeTimeout
        self.sendBufferSize = sendBufferSize
        self.shutdownDeadline = shutdownDeadline
        self.history = history
    }

    /// The buffering policy of each client's subscriptions:
    /// `.evicting(hardLimit, softLimit: .above(softLimit, for: softLimitDuration))`.
    public var bufferingPolicy: SharedBufferingPolicy {
        .evicting(self.hardLimit, softLimit: .above(self.softLimit, for: self.softLimitDuration))
    }
}

extension BroadcastConfiguration {
    /// The command-line usage.
    public static let usage = """
        usage: BroadcastServer [--port N] [--tick SECONDS] [--heartbeat SECONDS]
                               [--hard-limit N] [--soft-limit N] [--soft-limit-duration SECONDS]
                               [--write-timeout SECONDS] [--send-buffer BYTES]
                               [--shutdown-deadline SECONDS] [--history N]

          --port N                       TCP port on 127.0.0.1; 0 picks a free one (default 8080)
          --tick SECONDS                 ticker period (default 1)
          --heartbeat SECONDS            idle time before a `: heartbeat` comment (default 15)
          --hard-limit N                 events a client may fall behind (per feed) before it is
                                         evicted at once (default 4096)
          --soft-limit N                 events a client may fall behind (per feed) for as long as
                                         it likes; below --hard-limit (default 256)
          --soft-limit-duration SECONDS  how long a client may stay more than --soft-limit events
                                         behind before it is evicted (default 10)
          --write-timeout SECONDS        a write pending this long closes the connection: a backstop
                                         for stalls the limits cannot see (default 60)
          --send-buffer BYTES            SO_SNDBUF of each event stream and WebSocket (default: the
                                         kernel's)
          --shutdown-deadline SECONDS    at SIGTERM, how long each feed waits for its clients to read
                                         what it had for them (default 10)
          --history N                    latest messages kept for clients that reconnect with
                                         Last-Event-ID (default 1024); older ids get `event: gap`
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
            case "--soft-limit-duration": self.softLimitDuration = try Self.seconds(value, option)
            case "--shutdown-deadline": self.shutdownDeadline = try Self.seconds(value, option)
            case "--hard-limit":
                guard let n = Int(value), n >= 1 else {
                    throw UsageError(message: "--hard-limit: expected a whole number >= 1, got \(value)")
                }
                self.hardLimit = n
            case "--soft-limit":
                guard let n = Int(value), n >= 0 else {
                    throw UsageError(message: "--soft-limit: expected a whole number >= 0, got \(value)")
                }
                self.softLimit = n
            case "--send-buffer":
                guard let n = Int(value), n >= 1 else {
                    throw UsageError(message: "--send-buffer: expected a number of bytes >= 1, got \(value)")
                }
                self.sendBufferSize = n
            case "--history":
                guard let n = Int(value), n >= 0 else {
                    throw UsageError(message: "--history: expected a whole number >= 0, got \(value)")
                }
                self.history = n
            default:
                throw UsageError(message: "unknown option \(option)")
            }
        }
        // Checked once all are read, so that the options may come in any order.
        guard self.softLimit < self.hardLimit else {
            throw UsageError(
                message: "--soft-limit (\(self.softLimit)) must be below --hard-limit (\(self.hardLimit))")
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
