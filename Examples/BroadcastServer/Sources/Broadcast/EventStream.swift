import AsyncMulticast
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization

/// What a client's connection writes next.
enum Outgoing: Sendable {
    case tick(Int)
    /// A message and its position in the messages subject, its SSE `id:`.
    case message(Message, position: Int)
    /// The messages after position `after` and before position `before` (both excluded)
    /// will never reach the client: it resumed after `after` and the history no longer held
    /// them. Its `id:` is `before - 1`, so that a client cut right after it resumes at `before`.
    case gap(after: Int, before: Int)
    case heartbeat
    /// The client was evicted from this feed (it fell too far behind): the last event it
    /// gets, when it can be written without waiting for the client.
    case evicted(feed: String)
    /// The server shuts down: both feeds ended, and this comes after everything they had for
    /// the client. The last event it gets.
    case shutdown

    /// The server-sent-events text.
    var text: String {
        switch self {
        case .tick(let count):
            return "event: tick\ndata: \(count)\n\n"
        case .message(let message, let position):
            // A data field cannot hold a line break: each line of the message is one field.
            let lines = message.text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            let data = lines.map { "data: \($0)\n" }.joined()
            return "event: message\nid: \(position)\n\(data)\n"
        case .gap(let after, let before):
            return "event: gap\nid: \(before - 1)\ndata: {\"after\":\(after),\"before\":\(before)}\n\n"
        case .heartbeat:
            return ": heartbeat\n\n"
        case .evicted(let feed):
            return "event: evicted\ndata: fell too far behind on \(feed); reconnect\n\n"
        case .shutdown:
            return "event: shutdown\ndata: the server is shutting down; reconnect later\n\n"
        }
    }
}

extension BroadcastHub {
    /// Streams ticks and messages to one client until it disconnects, is evicted, stops
    /// reading, or the server shuts down.
    ///
    /// The client subscribes to the shared ticks and to the messages, each with the
    /// configuration's `.evicting(hardLimit, softLimit: .above(softLimit, for:
    /// softLimitDuration))`, before anything is written: the `: connected` comment it
    /// receives first means that it receives every tick and message from then on. With a
    /// `Last-Event-ID` (``lastEventID(of:)``) its messages resume after that position instead:
    /// what the history still holds after it (`event: gap` first if it no longer reaches
    /// back), then the live ones (``BroadcastHub/subscribeToMessages(after:)``).
    ///
    /// One writer (this task) writes to the connection. The two subscriptions and the
    /// heartbeat run in child tasks that hand it what to write through a per-client
    /// `.bounded(1)` subject. So a client that does not read blocks the writer, then the
    /// forwarding tasks (in `send(waitingForRoom:)`), and then its subscriptions fall behind
    /// until the library evicts them: the upstream and the other clients never wait for it,
    /// and the server keeps at most `hardLimit` undelivered events per feed for it (plus
    /// what the writer holds and its socket buffers).
    ///
    /// **Evictions are seen without reading.** The forwarding task of an evicted subscription
    /// learns of it only when it next asks for an event, and when the client is not reading
    /// that task is stuck behind the blocked writer. So two more child tasks wait in
    /// `waitForEviction()`, one per subscription, and act at once (see
    /// ``evicted(_:feed:_:)``): if the connection is not writable, the client is not taking
    /// what it was sent, so the connection is closed, the pending write fails and the handler
    /// ends; otherwise the writer gets a last `event: evicted` and ends the response. Either
    /// way the client stops counting as connected (``connectedClients``) right away, not when
    /// a watchdog fires.
    ///
    /// **The write timeout stays, as a backstop.** The eviction signal does not cover every
    /// stall. The limits only see a client that falls behind while events are produced, and
    /// the soft limit only checks when one is: a client that stops reading while the feeds
    /// are quiet (its `: heartbeat` write blocks) is never evicted, and on slow feeds one
    /// takes long to fall `softLimit` events behind. And a client handed `event: evicted`
    /// may stop reading before it is written. For those, a write pending for `writeTimeout`
    /// closes the connection (`writeTimeouts` in the stats). It is long (60 s by default,
    /// above the soft limit's 10 s): under load, the limits end a stalled client first.
    ///
    /// How the response ends:
    /// - **evicted**, the connection not writable (a client that stopped reading, or reads too
    ///   slowly to empty its socket buffers): the connection is closed at once;
    /// - **evicted**, the connection writable (a client that reads, but a burst took it past
    ///   the hard limit): what it was already handed, an `event: evicted` event, then the end
    ///   of the response;
    /// - **write timeout** (the backstop above): the connection is closed;
    /// - **the client closed the connection**: noticed at once (Hummingbird's inbound-close
    ///   handler), the handler ends, and with it its subscriptions;
    /// - **the client vanished** without closing (a network cut, a sleeping laptop): the
    ///   heartbeat written after `heartbeatInterval` of silence eventually fails, and the
    ///   handler ends;
    /// - **graceful shutdown** (SIGINT, SIGTERM): the feeds' services, which the service group
    ///   shuts down before the HTTP server, end both feeds (the ticks' `run()` is cancelled,
    ///   the messages subject finished); each subscription delivers what was buffered for
    ///   this client, then its end. Once both ended, the client gets `event: shutdown`, then
    ///   the end of the response (see ``feedsEnded(_:)``). When the HTTP server then shuts
    ///   down, a client that is not reading (its connection not writable) has its connection
    ///   closed instead of being waited for.
    func stream(_ request: Request, to writer: inout any ResponseBodyWriter, channel: any Channel) async throws {
        // Subscribe first: from here on, every tick (starting with the latest one, replayed)
        // and every message is kept for this client, under the hub's evicting policy. The
        // subscriptions are `Sendable`, so the child tasks below read and watch them.
        let ticks = self.ticks.subscribe()
        let messages = self.subscribeToMessages(after: Self.lastEventID(of: request))
        let outbox = AsyncPassthroughSubject<Outgoing, Never>(buffering: .bounded(1))
        var pending = outbox.makeAsyncIterator()
        let connection = ClientConnection(channel: channel, outbox: outbox)
        if let size = self.configuration.sendBufferSize {
            try await channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: size).get()
        }

        try await request.body.consumeWithInboundCloseHandler { _ in
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    let client = self.clientConnected(ticks: ticks, messages: messages)
                    defer { self.clientDisconnected(client) }
                    try await writer.write(ByteBuffer(string: ": connected\n\n"))

                    group.addTask {
                        async let ticksEnded = self.forward(ticks, feed: "ticks", to: connection, as: Outgoing.tick)
                        async let messagesEnded = self.forward(messages, to: connection)
                        let ended = await (ticksEnded, messagesEnded)
                        if ended == (true, true) { await self.feedsEnded(connection) }
                    }
                    // `nil`: the subscription left otherwise, or the response ended first.
                    group.addTask {
                        if let eviction = await ticks.waitForEviction() {
                            self.evicted(connection, feed: "ticks", eviction)
                        }
                    }
                    group.addTask {
                        if let eviction = await messages.waitForEviction() {
                            self.evicted(connection, feed: "messages", eviction)
                        }
                    }
                    group.addTask {
                        try await self.keepAlive(connection)
                    }
                    while let item = await pending.next() {
                        try await connection.writes.during { try await writer.write(ByteBuffer(string: item.text)) }
                        if case .evicted = item { break }
                        if case .shutdown = item { break }
                    }
                    // Inside the group, so that the write timeout watches the last write too.
                    try await connection.writes.during { try await writer.finish(nil) }
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                // The HTTP server shuts down, after the feeds: this response ends on its own
                // once its last events are written, unless the client is not reading them.
                if !channel.isWritable { channel.close(promise: nil) }
            }
        } onInboundClosed: {
            outbox.finish()  // the client closed the connection
        }
    }

    /// Hands every element of one subscription to the writer, waiting while it is busy.
    /// Returns whether the feed ended: false when the subscription was evicted, or when this
    /// task was cancelled (the response ended first).
    private func forward<Element: Sendable>(
        _ subscription: SharedSubscription<Element, Never>, feed: String,
        to connection: ClientConnection, as outgoing: (Element) -> Outgoing
    ) async -> Bool {
        for await event in subscription.events {
            switch event {
            case .element(let element):
                await connection.outbox.send(waitingForRoom: outgoing(element))
            case .missed:
                break  // only lossy policies miss elements; .evicting does not
            case .evicted(let eviction):
                // The watching task has usually acted already; if not, this does.
                self.evicted(connection, feed: feed, eviction)
                return false
            }
        }
        return !Task.isCancelled
    }

    /// Hands every message of the client's subscription to the writer with its position, and
    /// the gap of its resumption first if there is one; see ``forward(_:feed:to:as:)``.
    private func forward(_ messages: PositionedSubscription<Message, Never>, to connection: ClientConnection) async -> Bool {
        for await event in messages {
            switch event {
            case .element(let message, let position):
                await connection.outbox.send(waitingForRoom: .message(message, position: position))
            case .gap(let after, let before):
                // First, when the history no longer reached back to the client's Last-Event-ID
                // (.evicting drops nothing later on).
                await connection.outbox.send(waitingForRoom: .gap(after: after, before: before))
            case .evicted(let eviction):
                self.evicted(connection, feed: "messages", eviction)
                return false
            }
        }
        return !Task.isCancelled
    }

    /// The position a client resumes after: its `Last-Event-ID` header, or, for a client that
    /// cannot set headers, its `lastEventId` query parameter. An id that is not a whole
    /// number >= -1 is ignored (the client joins at the newest message, as a new one does).
    static func lastEventID(of request: Request) -> Int? {
        let text = request.headers[.init("Last-Event-ID")!]
            ?? request.uri.queryParameters.get("lastEventId")
        guard let text, let id = Int(text), id >= -1 else { return nil }
        return id
    }

    /// Both feeds ended for this client, each after everything it had for it: the server is
    /// shutting down (their services end them at graceful shutdown). The client gets
    /// `event: shutdown` after all it was handed, then the end of the response. Nothing if an
    /// eviction or the write timeout is ending the response already.
    private func feedsEnded(_ connection: ClientConnection) async {
        guard connection.ending.set() else { return }
        await connection.outbox.send(waitingForRoom: .shutdown)
        connection.outbox.finish()
    }

    /// The client's subscription to `feed` was evicted: counts it, and ends the response at
    /// once, without waiting for the client. Called by whichever task learns of it first
    /// (the watcher, or the forwarding task); only the first call for a client acts.
    ///
    /// - The connection is not writable (NIO's `isWritable`, read from any thread): what was
    ///   written waits above the channel's high-water mark because the socket's buffers are
    ///   full, so the client is not taking what it was sent, the writer's next write waits
    ///   (or its current one does), and a last event would queue behind all that. Closing
    ///   the connection fails that write, and the handler ends.
    /// - It is writable: the writer does not wait, so it gets `event: evicted` without
    ///   waiting (a synchronous send goes past the outbox's bound, behind at most one event
    ///   already handed), writes it, and ends the response. Should the client stop reading
    ///   from here on, the write timeout closes the connection.
    private func evicted(_ connection: ClientConnection, feed: String, _ eviction: SubscriberEviction) {
        guard connection.ending.set() else { return }
        self.clientEvicted(feed: feed, eviction)
        if connection.channel.isWritable {
            connection.outbox.send(.evicted(feed: feed))
        } else {
            connection.channel.close(promise: nil)
        }
    }

    /// Writes a heartbeat whenever the connection was silent for `heartbeatInterval`, and
    /// closes it when a write stayed pending for `writeTimeout` (noticed within half of it):
    /// the backstop for the stalls that no eviction ends (see ``stream(_:to:channel:)``).
    private func keepAlive(_ connection: ClientConnection) async throws {
        let heartbeat = self.configuration.heartbeatInterval
        let timeout = self.configuration.writeTimeout
        let writes = connection.writes
        while true {
            let now = ContinuousClock.now
            let deadline: ContinuousClock.Instant
            switch writes.state {
            case .pending(let since):
                if now - since >= timeout {
                    // Counted unless an eviction is ending this response already (its last
                    // event, or what was ahead of it, is the write that blocked).
                    if connection.ending.set() { self.clientTimedOut() }
                    connection.channel.close(promise: nil)  // fails the stalled write: the handler ends
                    return
                }
                deadline = since + timeout
            case .idle(let since):
                if now - since >= heartbeat {
                    writes.touch()
                    connection.outbox.send(.heartbeat)  // never waits: the writer is idle
                    deadline = now + heartbeat
                } else {
                    deadline = since + heartbeat
                }
            }
            // A write that starts while this sleeps is checked within half the timeout.
            try await Task.sleep(until: min(deadline, now + timeout / 2))
        }
    }
}

/// One client's connection, as the tasks of its handler share it.
final class ClientConnection: Sendable {
    let channel: any Channel
    /// What the writer writes next.
    let outbox: AsyncPassthroughSubject<Outgoing, Never>
    /// Whether a write is pending, and since when.
    let writes = WriteTracker()
    /// Set by the first of an eviction, the write timeout and the end of the feeds to end the
    /// response, which is the one the stats count.
    let ending = Flag()

    init(channel: any Channel, outbox: AsyncPassthroughSubject<Outgoing, Never>) {
        self.channel = channel
        self.outbox = outbox
    }
}

/// When the writer last wrote, and whether a write is pending, for the write timeout.
/// Hummingbird's writer returns as soon as the connection takes the bytes, and waits only
/// while it does not (the channel is not writable: its outbound buffer is above its
/// high-water mark, the socket's buffers being full): so a write that stays pending means
/// a client that is not reading what it was sent.
final class WriteTracker: Sendable {
    enum State {
        /// Nothing is being written; the last write ended (or the heartbeat was sent) then.
        case idle(since: ContinuousClock.Instant)
        /// A write started then and has not returned.
        case pending(since: ContinuousClock.Instant)
    }

    private let current = Mutex(State.idle(since: .now))

    var state: State { self.current.withLock { $0 } }

    /// Runs `write`, pending meanwhile.
    func during(_ write: () async throws -> Void) async throws {
        self.current.withLock { $0 = .pending(since: .now) }
        defer { self.current.withLock { $0 = .idle(since: .now) } }
        try await write()
    }

    /// Counts as activity unless a write is pending.
    func touch() {
        self.current.withLock { state in
            if case .idle = state { state = .idle(since: .now) }
        }
    }
}
