import Synchronization

/// A room's name and how a message travels in a notification.
///
/// Every room shares the instance's one PostgreSQL channel (one LISTEN connection per
/// instance, whatever the number of rooms): the room and the message's id (its row in
/// ``EventHistory``'s table) travel in the payload, as `room\tid\tmessage`. A message may
/// contain tabs; a room may not, and the payload is split at its first two tabs.
public enum RoomPayload {
    /// The longest room name, in bytes.
    public static let maximumRoomBytes = 64
    /// The longest id, in bytes: `Int64.max` has 19 digits.
    static let maximumIDBytes = 19

    /// 1 to 64 ASCII letters, digits, `-`, `_` or `.`: safe in a URL path and free of tabs.
    public static func isValidRoom(_ room: some StringProtocol) -> Bool {
        !room.isEmpty && room.utf8.count <= self.maximumRoomBytes
            && room.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                    true
                default:
                    false
                }
            }
    }

    /// The payload that carries message `id` to the clients of `room`. (Posts build it in SQL,
    /// where the id is drawn: ``EventHistory/append(_:to:on:)``.)
    public static func encode(room: String, id: Int64, message: String) -> String {
        precondition(self.isValidRoom(room), "room must be 1 to 64 ASCII letters, digits, -, _ or ., got \(room)")
        return "\(room)\t\(id)\t\(message)"
    }

    /// The room, the id and the message of a payload; `nil` if it is not `room\tid\tmessage`
    /// (a notification on the channel from something else than this example).
    public static func decode(_ payload: String) -> (room: String, id: Int64, message: String)? {
        guard let tab = payload.firstIndex(of: "\t") else { return nil }
        let room = payload[..<tab]
        let rest = payload[payload.index(after: tab)...]
        guard self.isValidRoom(room), let secondTab = rest.firstIndex(of: "\t"),
            let id = Int64(rest[..<secondTab]), id > 0
        else { return nil }
        return (String(room), id, String(rest[rest.index(after: secondTab)...]))
    }

    /// The longest message for `room`: PostgreSQL's payload limit (7999 bytes by default) less
    /// the room, the longest id and the two tabs.
    public static func maximumMessageBytes(room: String) -> Int {
        FanoutServer.maximumPayloadBytes - room.utf8.count - self.maximumIDBytes - 2
    }
}

/// The names of the rooms that may have local subscribers: where the session sends what every
/// client must see (the LISTEN connection's status and the heartbeats), one element per room.
///
/// Why per room, through the topics, rather than on a separate status holder that each handler
/// also watches: `share(by:)` routes each element to one key, and the status must reach every
/// client *in order with its room's messages* (no message of a new connection before
/// `resumed`), and the heartbeats must count against each client's `.evicting` limits (a
/// client that stopped reading is evicted even on a quiet room). Both hold only for events
/// that go through the client's own subscription. The topics do not list their live keys, so
/// the instance keeps their names here: names only; the library still creates, counts and
/// frees each room.
///
/// - A handler joins its room first, then inserts the name. The session updates the status
///   first (``ListenFeed/listeningGeneration``), then reads the names: a client either reads
///   the new status after it joined, or its room is among the names and the status element
///   reaches its subscription.
/// - Names are pruned when read: a room that is not live (`AsyncSharedTopics.isLive`) goes.
///   Insertion and pruning take the same lock, so a room joined again while it is pruned is
///   inserted again after.
final class RoomNames: Sendable {
    private struct State {
        var names: Set<String> = []
        var isLive: (@Sendable (String) -> Bool)?
    }

    private let state = Mutex(State())

    /// Sets how to tell a live room: `AsyncSharedTopics.isLive`, once the topics exist.
    func track(_ isLive: @escaping @Sendable (String) -> Bool) {
        self.state.withLock { $0.isLive = isLive }
    }

    func insert(_ room: String) {
        _ = self.state.withLock { $0.names.insert(room) }
    }

    /// The rooms that have subscribers now; forgets the others.
    func live() -> [String] {
        self.state.withLock { state in
            if let isLive = state.isLive { state.names = state.names.filter(isLive) }
            return Array(state.names)
        }
    }

    /// Whether `room` has local subscribers now (`AsyncSharedTopics.isLive`).
    func isLive(_ room: String) -> Bool {
        self.state.withLock { $0.isLive?(room) ?? false }
    }

    /// How many names are kept now (live or not yet pruned).
    var count: Int {
        self.state.withLock { $0.names.count }
    }
}
