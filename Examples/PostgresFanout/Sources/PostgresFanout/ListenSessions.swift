import Logging
import PostgresNIO

/// The LISTEN sessions of one instance, as the upstream of `share(by:)`: each iteration is one
/// session, from the first subscriber of any room to the last subscriber's departure.
///
/// postgres-nio exposes LISTEN as a closure around the notifications, not as a sequence that
/// could be iterated again for each session, so each iteration runs a session in a task of its
/// own and passes on what it sends. When the topics stop the iteration (the last subscriber
/// left), its last `next()` cancels the session and returns only once the session has closed
/// its connection; the topics start the next iteration only after that, so this instance
/// keeps one LISTEN connection.
struct ListenSessions: AsyncSequence, Sendable {
    typealias Element = RoomEvent
    typealias Failure = Never

    let configuration: FanoutConfiguration
    let state: SessionState
    let rooms: RoomNames
    /// The local history, which the session fills as the messages arrive.
    let recent: RecentMessages
    let logger: Logger

    func makeAsyncIterator() -> Iterator {
        let (events, continuation) = AsyncStream.makeStream(of: RoomEvent.self)
        let emitter = Emitter(continuation: continuation, rooms: self.rooms, recent: self.recent)
        let (configuration, state, logger) = (self.configuration, self.state, self.logger)
        let session = Task {
            await Self.run(configuration, emitter: emitter, state: state, logger: logger)
        }
        return Iterator(events: events.makeAsyncIterator(), session: Session(task: session))
    }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = RoomEvent
        typealias Failure = Never

        var events: AsyncStream<RoomEvent>.Iterator
        let session: Session

        mutating func next() async -> RoomEvent? {
            if let event = await self.events.next() { return event }
            // The topics stopped this iteration (its task is cancelled): the stop waits until
            // the session has closed its connection.
            self.session.task.cancel()
            await self.session.task.value
            return nil
        }
    }

    /// Cancels the session if the iterator goes without being stopped.
    final class Session: Sendable {
        let task: Task<Void, Never>

        init(task: Task<Void, Never>) {
            self.task = task
        }

        deinit {
            self.task.cancel()
        }
    }

    /// How a session sends: a message to its room, a status or a heartbeat to every room.
    struct Emitter: Sendable {
        let continuation: AsyncStream<RoomEvent>.Continuation
        let rooms: RoomNames
        let recent: RecentMessages

        func send(_ event: FeedEvent, to room: String) {
            self.continuation.yield(RoomEvent(room: room, event: event))
        }

        /// A message the LISTEN connection delivered: recorded in the local history first,
        /// then passed on, so that a handler that finds it missing from the history receives
        /// it through its subscription (it joined before it looked).
        func sendMessage(_ id: Int64, _ text: String, to room: String) {
            self.recent.record(id, text, in: room, isLive: self.rooms.isLive(room))
            self.send(.message(id: id, text: text), to: room)
        }

        /// One element per room that has subscribers: every client receives it, in order with
        /// its room's messages (see ``RoomNames``). The local history forgets the rooms that
        /// are no longer live at the same time.
        func sendToEveryRoom(_ event: FeedEvent) {
            let live = self.rooms.live()
            self.recent.forgetAll(but: Set(live))
            for room in live { self.send(event, to: room) }
        }
    }

    /// One session: the heartbeats, and the LISTEN connection.
    private static func run(
        _ configuration: FanoutConfiguration, emitter: Emitter, state: SessionState, logger: Logger
    ) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                while (try? await Task.sleep(for: configuration.heartbeat)) != nil {
                    emitter.sendToEveryRoom(.heartbeat)
                }
            }
            group.addTask {
                await listen(configuration, emitter: emitter, state: state, logger: logger)
            }
        }
    }

    /// Opens the LISTEN connection, routes its notifications by room, and reopens it when it
    /// is lost, until the session is cancelled (the last subscriber left).
    private static func listen(
        _ configuration: FanoutConfiguration, emitter: Emitter, state: SessionState, logger: Logger
    ) async {
        let postgres = configuration.postgres.connectionConfiguration(
            applicationName: configuration.listenApplicationName)
        var delay = configuration.reconnectDelay
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: postgres, id: state.nextConnectionID(), logger: logger)
                let generation = state.opened()
                do {
                    try await connection.listen(on: configuration.channel) { notifications in
                        // LISTEN is in effect: every notification committed from now on reaches us.
                        state.listening(generation)
                        emitter.sendToEveryRoom(.listening(generation: generation))
                        delay = configuration.reconnectDelay
                        for try await notification in notifications {
                            // One channel for every room: the room travels in the payload.
                            guard let (room, id, message) = RoomPayload.decode(notification.payload) else {
                                logger.debug(
                                    "not `room\\tid\\tmessage`: ignored", metadata: ["payload": "\(notification.payload)"])
                                continue
                            }
                            emitter.sendMessage(id, message, to: room)
                        }
                    }
                } catch {
                    logger.warning("LISTEN connection lost", metadata: ["error": "\(error)"])
                }
                // What is committed from now until the next connection listens is not
                // delivered: the local history can no longer vouch for any room.
                emitter.recent.forgetAll()
                state.notListening()
                try? await connection.close()
                state.closed()
                if Task.isCancelled { return }  // the last subscriber left: the normal end
                emitter.sendToEveryRoom(.interrupted(generation: generation))
            } catch {
                if Task.isCancelled { return }
                logger.warning("LISTEN connection failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: delay)
            delay = Swift.min(delay * 2, configuration.maximumReconnectDelay)
        }
    }
}
