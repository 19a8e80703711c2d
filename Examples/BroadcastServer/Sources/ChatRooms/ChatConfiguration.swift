import AsyncMulticast

/// The chat server's settings. The host is always 127.0.0.1.
public struct ChatConfiguration: Sendable {
    /// The TCP port; 0 picks a free one (the server reports which).
    public var port: Int
    /// Messages a client may fall behind in its room before it is evicted at once: the
    /// largest burst a healthy client absorbs.
    public var hardLimit: Int
    /// Messages a client may fall behind for as long as it likes; from 0 to `hardLimit - 1`.
    public var softLimit: Int
    /// How long a client may stay more than ``softLimit`` messages behind before it is evicted.
    public var softLimitDuration: Duration
    /// The kernel send buffer (`SO_SNDBUF`) of each WebSocket, in bytes; nil keeps the
    /// kernel's (up to 4 MiB on Linux). A client that stops reading fills it first, then its
    /// subscription: a smaller one notices it sooner.
    public var sendBufferSize: Int?
    /// At graceful shutdown, how long the server waits for its clients to read what their
    /// rooms still had for them, before the HTTP server stops and closes what is left.
    public var shutdownDeadline: Duration

    /// The defaults are the command line's (``usage``).
    public init(
        port: Int = 8080, hardLimit: Int = 4096, softLimit: Int = 256, softLimitDuration: Duration = .seconds(10),
        sendBufferSize: Int? = nil, shutdownDeadline: Duration = .seconds(10)
    ) {
        self.port = port
        self.hardLimit = hardLimit
        self.softLimit = softLimit
        self.softLimitDuration = softLimitDuration
        self.sendBufferSize = sendBufferSize
        self.shutdownDeadline = shutdownDeadline
    }

    /// Each client's policy in its room, as Guides/ServingClients.md sizes it:
    /// `.evicting(hardLimit, softLimit: .above(softLimit, for: softLimitDuration))`.
    public var bufferingPolicy: SharedBufferingPolicy {
        .evicting(self.hardLimit, softLimit: .above(self.softLimit, for: self.softLimitDuration))
    }
}

extension ChatConfiguration {
    /// The command-line usage.
    public static let usage = """
        usage: chat-rooms [--port N] [--hard-limit N] [--soft-limit N] [--soft-limit-duration SECONDS]
                          [--send-buffer BYTES] [--shutdown-deadline SECONDS]

          --port N                       TCP port on 127.0.0.1; 0 picks a free one (default 8080)
          --hard-limit N                 messages a client may fall behind before it is evicted at
                                         once (default 4096)
          --soft-limit N                 messages a client may fall behind for as long as it likes;
                                         below --hard-limit (default 256)
          --soft-limit-duration SECONDS  how long a client may stay more than --soft-limit messages
                                         behind before it is evicted (default 10)
          --send-buffer BYTES            SO_SNDBUF of each WebSocket (default: the kernel's)
          --shutdown-deadline SECONDS    at SIGTERM, how long the clients have to read what their
                                         rooms still had for them (default 10)
        """

    /// Reads the options from the command-line arguments (without the program name); throws
    /// ``UsageError`` with the message to print, or with none for `--help`.
    public init(arguments: [String]) throws(UsageError) {
        self.init()
        var remaining = arguments[...]
        while let option = remaining.popFirst() {
            if option == "--help" || option == "-h" { throw UsageError(message: nil) }
            guard let text = remaining.popFirst() else { throw UsageError(message: "\(option) needs a value") }
            let number = Double(text).flatMap { $0.isFinite ? $0 : nil }
            func whole(atLeast minimum: Int) throws(UsageError) -> Int {
                guard let n = Int(text), n >= minimum else {
                    throw UsageError(message: "\(option): expected a whole number >= \(minimum), got \(text)")
                }
                return n
            }
            func seconds() throws(UsageError) -> Duration {
                guard let number, number > 0 else {
                    throw UsageError(message: "\(option): expected a number of seconds > 0, got \(text)")
                }
                return .milliseconds(Int64((number * 1000).rounded(.up)))
            }
            switch option {
            case "--port":
                self.port = try whole(atLeast: 0)
                guard self.port <= 65535 else { throw UsageError(message: "--port: not a port number: \(text)") }
            case "--hard-limit": self.hardLimit = try whole(atLeast: 1)
            case "--soft-limit": self.softLimit = try whole(atLeast: 0)
            case "--soft-limit-duration": self.softLimitDuration = try seconds()
            case "--send-buffer": self.sendBufferSize = try whole(atLeast: 1)
            case "--shutdown-deadline": self.shutdownDeadline = try seconds()
            default: throw UsageError(message: "unknown option \(option)")
            }
        }
        // Once all are read, so that the options may come in any order.
        guard self.softLimit < self.hardLimit else {
            throw UsageError(message: "--soft-limit (\(self.softLimit)) must be below --hard-limit (\(self.hardLimit))")
        }
    }

    /// A command line the server does not understand; `message` is nil for `--help`.
    public struct UsageError: Error, Sendable {
        public let message: String?
    }
}
