import Synchronization

/// The local history: the latest messages of each room with local subscribers, as this
/// instance received them on its current LISTEN connection. It costs up to `capacity`
/// messages (a quarter more between trims) per room with local subscribers. A client that reconnects with the
/// id of a message still held here is caught up from memory; one whose id is older gets the
/// older part from the table (``EventHistory``), then the rest from here.
///
/// What a room's messages here are: every message of the room the current LISTEN connection
/// delivered since the room's first message recorded, the latest `capacity` of them, with no
/// gap. It holds because:
/// - one LISTEN connection delivers every notification of the channel, in commit order, and
///   the session records each message before it passes it on to the room's subscribers;
/// - a message of a room with no subscriber is not recorded, and forgets what the room had
///   (the room's next subscriber may have missed messages in between);
/// - a lost connection forgets everything (``forgetAll()``): what is committed until the next
///   one listens is not delivered.
final class RecentMessages: Sendable {
    /// A message: its id and its text.
    typealias Message = (id: Int64, text: String)

    /// How many messages each room keeps; 0 keeps none.
    let capacity: Int
    private let rooms = Mutex<[String: [Message]]>([:])

    init(capacity: Int) {
        precondition(capacity >= 0, "recentMessagesPerRoom must be at least 0, got \(capacity)")
        self.capacity = capacity
    }

    /// Records message `id` of `room`, which the LISTEN connection just delivered, if the room
    /// has local subscribers (`isLive`); forgets the room otherwise.
    func record(_ id: Int64, _ text: String, in room: String, isLive: Bool) {
        guard self.capacity > 0 else { return }
        self.rooms.withLock { rooms in
            guard isLive else {
                rooms[room] = nil
                return
            }
            rooms[room, default: []].append((id, text))
            // Trimmed by a quarter of the capacity at a time, so that an append costs O(1) on
            // average and a room holds at most 1.25 times its capacity.
            let slack = max(self.capacity / 4, 1)
            if rooms[room]!.count >= self.capacity + slack { rooms[room]!.removeFirst(slack) }
        }
    }

    /// The room's messages held now, in id order, with no gap between them.
    func messages(of room: String) -> ArraySlice<Message> {
        self.rooms.withLock { rooms in
            guard let messages = rooms[room] else { return [] }
            return messages.suffix(self.capacity)
        }
    }

    /// Forgets the rooms not in `live`: those whose last subscriber left, and that no message
    /// made forget since. Forgetting is always safe (a later catch-up reads the table); it
    /// keeps the rooms that come and go on a busy instance from piling up.
    func forgetAll(but live: Set<String>) {
        self.rooms.withLock { rooms in
            rooms = rooms.filter { live.contains($0.key) }
        }
    }

    /// Forgets every room: the LISTEN connection was lost or closed.
    func forgetAll() {
        self.rooms.withLock { $0.removeAll() }
    }

    /// How many rooms hold messages now.
    var roomCount: Int {
        self.rooms.withLock { $0.count }
    }
}
