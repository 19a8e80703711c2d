import Logging
import PostgresNIO

/// The rooms' messages, kept in PostgreSQL, where every instance reads them: what a client
/// that reconnects (to any instance) with `Last-Event-ID` missed.
///
/// One table for every channel, `fanout_events (id, channel, room, message, created_at)`,
/// with an index on `(channel, room, id)`. Posting a message inserts its row and sends its
/// notification in one transaction, so a message is in the table if and only if it was
/// notified; the notification's payload carries the row's id (``RoomPayload``), which is the
/// SSE event's `id:`.
///
/// Ids increase in the order the notifications arrive, within a room: a post takes a
/// transaction-scoped advisory lock on its room (`pg_advisory_xact_lock`) before it draws its
/// id, and keeps it until it commits, so two posts to one room draw their ids in the order
/// they commit, which is the order PostgreSQL delivers their notifications. (Without the lock
/// a post could draw id 5, another id 6 and commit first: a client that saw 6 and reconnected
/// with it would never get 5.) Posts to different rooms do not wait for each other.
///
/// The table keeps every message; a deployment deletes old rows on its own schedule
/// (`DELETE FROM fanout_events WHERE created_at < now() - interval '1 day'`). A client that
/// reconnects with an id older than what is kept gets what is kept.
struct EventHistory: Sendable {
    /// The channel whose rooms' messages this reads and writes.
    let channel: String
    let logger: Logger

    /// How many rows one query of ``messages(of:after:on:)`` reads at most: a client far
    /// behind is caught up in pages, in constant memory.
    static let pageSize = 500

    /// Creates the table and its index if they are not there yet. Instances that start at
    /// once take turns (an advisory lock), since `CREATE … IF NOT EXISTS` is not safe against
    /// itself.
    static func createTable(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended('fanout_events', 0))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS fanout_events (
                    id bigserial PRIMARY KEY,
                    channel text NOT NULL,
                    room text NOT NULL,
                    message text NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS fanout_events_room ON fanout_events (channel, room, id)", logger: logger)
        }
    }

    /// Inserts `message` into `room` and notifies the channel with its id, in one transaction
    /// (see the type's comment for the lock). Returns the id once committed.
    func append(_ message: String, to room: String, on client: PostgresClient) async throws -> Int64 {
        let (channel, logger) = (self.channel, self.logger)
        return try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended(\(channel) || '/' || \(room), 0))", logger: logger)
            // The payload is RoomPayload.encode(room:id:message:), built where the id is known.
            let rows = try await connection.query(
                """
                WITH event AS (
                    INSERT INTO fanout_events (channel, room, message) VALUES (\(channel), \(room), \(message))
                    RETURNING id
                )
                SELECT id, pg_notify(\(channel), \(room) || E'\\t' || id::text || E'\\t' || \(message))::text
                FROM event
                """, logger: logger)
            for try await (id, _) in rows.decode((Int64, String).self) { return id }
            throw PostgresFanoutError("the insert of a message returned no id")
        }
    }

    /// The messages of `room` after `id` and before `end` (if given), in order, at most
    /// ``pageSize``.
    func messages(
        of room: String, after id: Int64, before end: Int64? = nil, on client: PostgresClient
    ) async throws -> [(id: Int64, text: String)] {
        let rows = try await client.query(
            """
            SELECT id, message FROM fanout_events
            WHERE channel = \(self.channel) AND room = \(room) AND id > \(id) AND id < \(end ?? .max)
            ORDER BY id LIMIT \(Self.pageSize)
            """, logger: self.logger)
        var messages: [(id: Int64, text: String)] = []
        for try await (id, text) in rows.decode((Int64, String).self) { messages.append((id, text)) }
        return messages
    }

    /// The id of the newest message of `room`, 0 if it has none.
    func newestID(of room: String, on client: PostgresClient) async throws -> Int64 {
        let rows = try await client.query(
            "SELECT coalesce(max(id), 0) FROM fanout_events WHERE channel = \(self.channel) AND room = \(room)",
            logger: self.logger)
        for try await id in rows.decode(Int64.self) { return id }
        return 0
    }
}

/// A failure of the example's own, with what went wrong.
struct PostgresFanoutError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
