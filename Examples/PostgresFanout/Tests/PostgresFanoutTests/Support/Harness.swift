import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresFanout
import PostgresNIO
import ServiceLifecycle
import Testing

/// The PostgreSQL server of the tests: the one `ci.sh` starts and describes in `POSTGRES_*`.
enum TestDatabase {
    static let settings = PostgresSettings.fromEnvironment()
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Without the variables the tests are skipped, except under `CI=true`, where they run
    /// and fail: CI must never pass without having talked to PostgreSQL.
    static var enabled: Bool { settings != nil || isCI }

    static let howToRun =
        "needs PostgreSQL: run ./ci.sh, which starts a throwaway server and sets POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER and POSTGRES_DB"

    static func require() throws -> PostgresSettings {
        try #require(settings, "POSTGRES_HOST is not set (CI=\(isCI)); \(howToRun)")
    }

    static let logger: Logger = {
        var logger = Logger(label: "postgres-fanout-tests")
        logger.logLevel =
            ProcessInfo.processInfo.environment["FANOUT_TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .error
        return logger
    }()

    /// A connection of the test's own, to look at `pg_stat_activity`.
    static func withConnection<T>(
        _ settings: PostgresSettings, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password,
            database: settings.database, tls: .disable)
        configuration.options.additionalStartupParameters = [("application_name", "fanout-tests")]
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    struct Backend: Sendable, Hashable {
        var pid: Int32
        var query: String
    }

    /// The backends connected with this `application_name`, and the last query of each.
    static func backends(_ connection: PostgresConnection, applicationName: String) async throws -> [Backend] {
        let rows = try await connection.query(
            "SELECT pid, query FROM pg_stat_activity WHERE application_name = \(applicationName) ORDER BY pid",
            logger: logger)
        var backends: [Backend] = []
        for try await (pid, query) in rows.decode((Int32, String).self) {
            backends.append(Backend(pid: pid, query: query))
        }
        return backends
    }

    /// Posts `count` messages to `room` on `channel` in one statement, so one transaction, as
    /// the instances post (a row each in the table, a notification each with its id): a burst
    /// that PostgreSQL delivers at once on commit. The message of number `n` is `n:` followed
    /// by `padding` x's, and its id increases with `n`.
    static func notifyBurst(
        _ connection: PostgresConnection, channel: String, room: String, count: Int, padding: Int
    ) async throws {
        let rows = try await connection.query(
            """
            WITH event AS (
                INSERT INTO fanout_events (channel, room, message)
                SELECT \(channel), \(room), n::text || ':' || repeat('x', \(padding)::int)
                FROM generate_series(1, \(count)) AS n ORDER BY n
                RETURNING id, message
            )
            SELECT pg_notify(\(channel), \(room) || E'\\t' || id::text || E'\\t' || message)::text
            FROM (SELECT * FROM event ORDER BY id) AS ordered
            """, logger: logger)
        for try await _ in rows {}
    }

    /// The messages of `room` on `channel` in the table, in id order: what every client of
    /// the room must have received, once.
    static func messages(
        _ connection: PostgresConnection, channel: String, room: String
    ) async throws -> [(id: Int64, text: String)] {
        let rows = try await connection.query(
            "SELECT id, message FROM fanout_events WHERE channel = \(channel) AND room = \(room) ORDER BY id",
            logger: logger)
        var messages: [(id: Int64, text: String)] = []
        for try await (id, text) in rows.decode((Int64, String).self) { messages.append((id, text)) }
        return messages
    }

    /// Kills a backend, as an administrator or a failover would.
    static func terminate(_ connection: PostgresConnection, pid: Int32) async throws -> Bool {
        let rows = try await connection.query("SELECT pg_terminate_backend(\(pid))", logger: logger)
        for try await terminated in rows.decode(Bool.self) { return terminated }
        return false
    }
}

/// Checks `condition` until it holds, for at most `seconds`; for what the test cannot be told
/// about, such as a backend leaving `pg_stat_activity`.
func eventually(
    within seconds: Double = 15, _ what: String, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("not within \(seconds) s: \(what)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// Runs `body`, cancelling it and failing after `seconds`: a hang guard, far above the
/// expected time.
func withHangGuard<T: Sendable>(seconds: Int = 60, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let value = try await group.next()! else {
            throw TestFailure("hang guard: the test did not finish within \(seconds) s")
        }
        return value
    }
}

/// A unique suffix, so that the tests' instances and channels meet no one else's.
func uniqueSuffix() -> String {
    String(UInt32.random(in: 0...UInt32.max), radix: 36)
}

/// One server instance running in this process: an HTTP server on 127.0.0.1 with its own
/// `FanoutServer`, as a separate process would have.
struct RunningInstance: Sendable {
    let server: FanoutServer
    let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    var name: String { self.server.configuration.instanceName }
    var listenApplicationName: String { self.server.configuration.listenApplicationName }

    static func start(
        name: String, channel: String, settings: PostgresSettings, reconnectDelay: Duration = .milliseconds(100),
        softLimit: Int = 256, softLimitDuration: Duration = .seconds(10), recentMessagesPerRoom: Int = 256
    ) async throws -> Self {
        let configuration = FanoutConfiguration(
            instanceName: name, channel: channel, postgres: settings,
            softLimit: softLimit, softLimitDuration: softLimitDuration,
            heartbeat: .milliseconds(100),  // clients that leave are noticed within a few
            reconnectDelay: reconnectDelay, recentMessagesPerRoom: recentMessagesPerRoom)
        let server = FanoutServer(configuration: configuration, logger: TestDatabase.logger)
        try await server.prepareDatabase()
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let application = server.application(port: 0) { port in portSink.yield(port) }
        let group = ServiceGroup(configuration: .init(services: [application], logger: TestDatabase.logger))
        let task = Task {
            defer { portSink.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            throw TestFailure("instance \(name) did not start: \(await task.result)")
        }
        return Self(server: server, port: port, group: group, task: task)
    }

    /// Shuts the server down gracefully: it waits for the handlers still streaming to notice
    /// that their clients left. Cancels it after 5 s if they don't (a test that failed with
    /// clients still connected).
    func stop() async {
        await self.group.triggerGracefulShutdown()
        let task = self.task
        let watchdog = Task {
            try await Task.sleep(for: .seconds(5))
            task.cancel()
        }
        _ = await task.result
        watchdog.cancel()
    }

    func stats() async throws -> Stats {
        let response = try await httpRequest(port: self.port, .GET, "/stats")
        guard response.status == .ok else { throw TestFailure("GET /stats: \(response.status)") }
        return try JSONDecoder().decode(Stats.self, from: Data(response.body.utf8))
    }

    /// The evictions and the backlog high-water mark of `GET /stats`.
    func evictionStats() async throws -> EvictionStats {
        let response = try await httpRequest(port: self.port, .GET, "/stats")
        guard response.status == .ok else { throw TestFailure("GET /stats: \(response.status)") }
        return try JSONDecoder().decode(EvictionStats.self, from: Data(response.body.utf8))
    }

    /// Posts `message` to `room` through this instance's HTTP route.
    func post(_ message: String, to room: String) async throws {
        let response = try await httpRequest(port: self.port, .POST, "/rooms/\(room)/messages", body: message)
        guard response.status == .noContent else {
            throw TestFailure("POST /rooms/\(room)/messages to \(self.name): \(response.status) \(response.body)")
        }
    }

    /// The local subscribers of `room`, from `GET /rooms/ROOM`.
    func subscribers(of room: String) async throws -> Int {
        let response = try await httpRequest(port: self.port, .GET, "/rooms/\(room)")
        guard response.status == .ok else { throw TestFailure("GET /rooms/\(room): \(response.status)") }
        let stats = try JSONDecoder().decode(RoomStats.self, from: Data(response.body.utf8))
        guard stats.room == room else { throw TestFailure("GET /rooms/\(room): \(response.body)") }
        return stats.subscribers
    }

    /// A client connected to `GET /rooms/ROOM/events` that got `event: ready`: it receives
    /// every message posted to `room` and committed from now on, after those after
    /// `lastEventID` if it reconnects with one.
    func readyClient(of room: String, lastEventID: String? = nil) async throws -> SSEClient {
        var client = try await SSEClient.connect(
            port: self.port, path: "/rooms/\(room)/events", lastEventID: lastEventID)
        let ready = try await client.expect("ready", "a new client of \(self.name) in \(room)")
        guard ready.data == self.name else { throw TestFailure("ready from \(ready.data), not \(self.name)") }
        return client
    }

    struct Stats: Decodable, Equatable {
        var instance: String
        var subscribers: Int
        var rooms: Int
        var listening: Bool
        var listenConnectionsOpened: Int
    }

    struct RoomStats: Decodable {
        var room: String
        var subscribers: Int
    }

    struct EvictionStats: Decodable, Equatable {
        var evictions: Int
        var maxBacklogHighWaterMark: Int
    }

    /// The catch-ups of `GET /stats`: served from the local history alone, or with the table.
    struct CatchUpStats: Decodable, Equatable {
        var catchUpsFromMemory: Int
        var catchUpsFromTable: Int
    }

    func catchUpStats() async throws -> CatchUpStats {
        let response = try await httpRequest(port: self.port, .GET, "/stats")
        guard response.status == .ok else { throw TestFailure("GET /stats: \(response.status)") }
        return try JSONDecoder().decode(CatchUpStats.self, from: Data(response.body.utf8))
    }
}

/// Runs `body` with instances named `names` (with a unique suffix) on one channel, and stops
/// them whatever happens.
func withInstances<T>(
    _ names: [String], reconnectDelay: Duration = .milliseconds(100), softLimit: Int = 256,
    softLimitDuration: Duration = .seconds(10), recentMessagesPerRoom: Int = 256,
    _ body: ([RunningInstance]) async throws -> T
) async throws -> T {
    let settings = try TestDatabase.require()
    let suffix = uniqueSuffix()
    var instances: [RunningInstance] = []
    do {
        for name in names {
            instances.append(
                try await RunningInstance.start(
                    name: "\(name)-\(suffix)", channel: "fanout_test_\(suffix)", settings: settings,
                    reconnectDelay: reconnectDelay, softLimit: softLimit, softLimitDuration: softLimitDuration,
                    recentMessagesPerRoom: recentMessagesPerRoom))
        }
        let result = try await body(instances)
        for instance in instances { await instance.stop() }
        return result
    } catch {
        for instance in instances { await instance.stop() }
        throw error
    }
}
