import AsyncMulticast
import Logging
import PostgresNIO
import Synchronization

/// What a client of a room receives from the shared LISTEN feed.
public enum FeedEvent: Sendable, Hashable {
    /// A message posted to the room: its id (its row in ``EventHistory``'s table, increasing
    /// within the room) and its text, from the notification's payload (``RoomPayload``).
    case message(id: Int64, text: String)
    /// LISTEN connection number `generation` (1 for the first this instance opened) is
    /// listening: every notification committed from now on arrives.
    case listening(generation: Int)
    /// LISTEN connection number `generation` was lost. Notifications committed from about now
    /// until the next `.listening` are lost for this instance; the feed is reconnecting.
    case interrupted(generation: Int)
    /// Sent every `heartbeat` while anyone listens: each client's handler writes something,
    /// and so notices a client that went away.
    case heartbeat
}

/// One element of the LISTEN feed: an event and the room it is routed to.
public struct RoomEvent: Sendable, Hashable {
    /// The room whose subscribers receive it (the key of `share(by:)`).
    public var room: String
    public var event: FeedEvent

    public init(room: String, event: FeedEvent) {
        self.room = room
        self.event = event
    }
}

/// What `GET /stats` reports about the feed.
public struct FeedStats: Sendable, Hashable {
    /// Rooms with local subscribers now (`AsyncSharedTopics.keyCount`).
    public var rooms: Int
    /// Whether the LISTEN connection is open now.
    public var listening: Bool
    /// How many LISTEN connections this instance has opened since it started.
    public var listenConnectionsOpened: Int
}

/// One PostgreSQL LISTEN connection per process, routed by room to the local subscribers.
///
/// Every room travels on the instance's one PostgreSQL channel: a notification's payload is
/// `room\tid\tmessage` (``RoomPayload``), and `share(by: \.room)` routes each message to its
/// room's subscribers only, so a message costs what its room's clients cost, whatever the
/// number of rooms and clients.
///
/// The connection is opened when the first subscriber of any room arrives and closed when the
/// last one leaves: the topics start and stop one iteration of ``ListenSessions``, which is one
/// session. If the connection is lost while subscribers remain, the session reconnects (with a
/// growing delay) and tells them through `.interrupted` and `.listening`; their streams stay
/// open.
public final class ListenFeed: Sendable {
    public let configuration: FanoutConfiguration
    /// The rooms: topics of the one LISTEN feed, keyed by room.
    let rooms: AsyncSharedTopics<String, RoomEvent, Never>
    /// The rooms that may have subscribers, where the session sends what every client sees.
    let roomNames: RoomNames
    /// The local history: each live room's latest messages (see ``RecentMessages``).
    let recent: RecentMessages
    private let state: SessionState

    public init(configuration: FanoutConfiguration, logger: Logger) {
        self.configuration = configuration
        let state = SessionState()
        let roomNames = RoomNames()
        let recent = RecentMessages(capacity: configuration.recentMessagesPerRoom)
        self.state = state
        self.roomNames = roomNames
        self.recent = recent
        // One session (one LISTEN connection at a time) for every room, routed by room. A
        // client that holds `hardLimit` unread events, or more than `softLimit` for
        // `softLimitDuration`, is evicted instead of growing the server's memory or holding
        // the router, and with it every other room.
        self.rooms = ListenSessions(
            configuration: configuration, state: state, rooms: roomNames, recent: recent, logger: logger
        )
        .share(by: \.room, buffering: configuration.bufferingPolicy)
        let rooms = self.rooms
        roomNames.track { rooms.isLive($0) }
    }

    /// A new subscriber of `room`, from now on: it receives the room's messages, and what
    /// every client sees (the connection's status, the heartbeats), from this moment, and
    /// `.evicted` if it falls too far behind (the configuration's `bufferingPolicy`). It is
    /// `Sendable`, so a response body that runs later, in another task, reads it
    /// (`subscription.events`), and another task waits for its eviction.
    public func subscribe(to room: String) -> SharedSubscription<RoomEvent, Never> {
        let subscription = self.rooms.subscribe(to: room)
        // After joining: a status event sent from now on reaches this subscriber (see RoomNames).
        self.roomNames.insert(room)
        return subscription
    }

    /// The latest messages of `room` this instance holds, in id order, with no gap between
    /// them (see ``RecentMessages``); none if the room has no local subscriber.
    func recentMessages(of room: String) -> ArraySlice<RecentMessages.Message> {
        self.recent.messages(of: room)
    }

    /// The generation of the LISTEN connection that is listening now, or 0 if none is.
    public var listeningGeneration: Int {
        self.state.listeningGeneration
    }

    /// The local subscribers of `room` now.
    public func subscriberCount(of room: String) -> Int {
        self.rooms.subscriberCount(of: room)
    }

    public var stats: FeedStats {
        let (open, opened) = self.state.connectionCounts
        return FeedStats(rooms: self.rooms.keyCount, listening: open, listenConnectionsOpened: opened)
    }
}

/// The bookkeeping of the sessions, behind a lock.
final class SessionState: Sendable {
    private struct State {
        var open = false
        var opened = 0
        var listeningGeneration = 0
        var connectionIDs = 0
    }

    private let state = Mutex(State())

    func nextConnectionID() -> Int {
        self.state.withLock { state in
            state.connectionIDs += 1
            return state.connectionIDs
        }
    }

    /// A LISTEN connection was opened; returns its generation.
    func opened() -> Int {
        self.state.withLock { state in
            state.open = true
            state.opened += 1
            return state.opened
        }
    }

    func listening(_ generation: Int) {
        self.state.withLock { $0.listeningGeneration = generation }
    }

    func notListening() {
        self.state.withLock { $0.listeningGeneration = 0 }
    }

    func closed() {
        self.state.withLock { $0.open = false }
    }

    var listeningGeneration: Int {
        self.state.withLock { $0.listeningGeneration }
    }

    var connectionCounts: (open: Bool, opened: Int) {
        self.state.withLock { ($0.open, $0.opened) }
    }
}
