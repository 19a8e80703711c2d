import AsyncMulticast
import Foundation
import PostgresNIO

/// Where the PostgreSQL server is. `fromEnvironment()` reads the variables that `ci.sh` exports.
public struct PostgresSettings: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String

    public init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    /// `POSTGRES_HOST`, `POSTGRES_PORT`, `POSTGRES_USER`, `POSTGRES_PASSWORD` (optional) and
    /// `POSTGRES_DB`; `nil` if `POSTGRES_HOST` is not set.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Self? {
        guard let host = environment["POSTGRES_HOST"], !host.isEmpty else { return nil }
        let user = environment["POSTGRES_USER"] ?? "postgres"
        return Self(
            host: host,
            port: environment["POSTGRES_PORT"].flatMap(Int.init) ?? 5432,
            username: user,
            password: environment["POSTGRES_PASSWORD"],
            database: environment["POSTGRES_DB"] ?? user)
    }

    /// A configuration for one connection that shows as `applicationName` in
    /// `pg_stat_activity`. TLS is off: the example talks to a server on loopback.
    func connectionConfiguration(applicationName: String) -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: self.host, port: self.port, username: self.username, password: self.password,
            database: self.database, tls: .disable)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }

    /// The same for the pool that sends the notifications.
    func clientConfiguration(applicationName: String) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: self.host, port: self.port, username: self.username, password: self.password,
            database: self.database, tls: .disable)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        configuration.options.maximumConnections = 4
        return configuration
    }
}

/// One server instance.
public struct FanoutConfiguration: Sendable {
    /// Names this instance in `/stats`, in the `ready` event and in `pg_stat_activity`
    /// (`fanout-NAME-listen` and `fanout-NAME-notify`). Keep it short: PostgreSQL cuts
    /// `application_name` at 63 bytes.
    public var instanceName: String
    /// The PostgreSQL channel that carries every room: `POST /rooms/ROOM/messages` notifies
    /// it with the payload `ROOM\tmessage`, and the instance's one LISTEN connection listens
    /// to it (never one per room). Letters, digits and underscores, at most 63 bytes.
    /// postgres-nio writes it into `LISTEN "…"` without escaping, so the initializer refuses
    /// anything else.
    public var channel: String
    public var postgres: PostgresSettings
    /// The hard limit of each client's subscription: a client that holds this many unread
    /// events when another one arrives is evicted at once. It sizes the largest burst a
    /// healthy client may absorb; the instance keeps at most this many events for one client.
    public var hardLimit: Int
    /// The soft limit: a client that holds more than this many unread events for
    /// `softLimitDuration` is evicted. From 0 to `hardLimit - 1`.
    public var softLimit: Int
    /// How long a client may hold more than `softLimit` unread events. Checked when an event
    /// arrives; the heartbeats are events, so a stalled client goes within a heartbeat of it.
    public var softLimitDuration: Duration
    /// How often idle clients get an SSE comment. A handler only notices that its client went
    /// away when a write fails, so this also bounds how long a departed client stays subscribed.
    public var heartbeat: Duration
    /// The first wait before reconnecting a lost LISTEN connection; it doubles after each
    /// failed attempt, up to `maximumReconnectDelay`.
    public var reconnectDelay: Duration
    public var maximumReconnectDelay: Duration
    /// How many of each live room's latest messages the instance keeps in memory (the local
    /// history): a client that reconnects with the id of one of them is caught up without
    /// reading the table. 0 keeps none.
    public var recentMessagesPerRoom: Int

    public init(
        instanceName: String,
        channel: String = "fanout",
        postgres: PostgresSettings,
        hardLimit: Int = 4096,
        softLimit: Int = 256,
        softLimitDuration: Duration = .seconds(10),
        heartbeat: Duration = .seconds(15),
        reconnectDelay: Duration = .milliseconds(100),
        maximumReconnectDelay: Duration = .seconds(5),
        recentMessagesPerRoom: Int = 256
    ) {
        precondition(
            !channel.isEmpty && channel.utf8.count <= 63
                && channel.unicodeScalars.allSatisfy {
                    $0.isASCII && ($0 == "_" || $0.properties.isAlphabetic || ("0"..."9").contains($0))
                },
            "channel must be 1 to 63 ASCII letters, digits or underscores, got \(channel)")
        precondition(hardLimit >= 1, "hardLimit must be at least 1, got \(hardLimit)")
        precondition(
            (0..<hardLimit).contains(softLimit), "softLimit must be from 0 to \(hardLimit - 1), got \(softLimit)")
        precondition(softLimitDuration >= .zero, "softLimitDuration must not be negative, got \(softLimitDuration)")
        precondition(recentMessagesPerRoom >= 0, "recentMessagesPerRoom must be at least 0, got \(recentMessagesPerRoom)")
        self.instanceName = instanceName
        self.channel = channel
        self.postgres = postgres
        self.hardLimit = hardLimit
        self.softLimit = softLimit
        self.softLimitDuration = softLimitDuration
        self.heartbeat = heartbeat
        self.reconnectDelay = reconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
        self.recentMessagesPerRoom = recentMessagesPerRoom
    }

    /// The buffering policy of each client's subscription:
    /// `.evicting(hardLimit, softLimit: .above(softLimit, for: softLimitDuration))`.
    public var bufferingPolicy: SharedBufferingPolicy {
        .evicting(self.hardLimit, softLimit: .above(self.softLimit, for: self.softLimitDuration))
    }

    /// `application_name` of the instance's one LISTEN connection.
    public var listenApplicationName: String { "fanout-\(self.instanceName)-listen" }
    /// `application_name` of the connections that send notifications.
    public var notifyApplicationName: String { "fanout-\(self.instanceName)-notify" }
}
