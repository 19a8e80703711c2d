import AsyncMulticast
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization

/// What a client's connection writes next.
enum Outgoing: Sendable {
    case tick(Int)
    case message(Message)
    case heartbeat
    /// The client fell `evictAfter` events behind on this feed: the last event it gets.
    case evicted(feed: String)

    /// The server-sent-events text.
    var text: String {
        switch self {
        case .tick(let count):
            return "event: tick\ndata: \(count)\n\n"
        case .message(let message):
            // A data field cannot hold a line break: each line of the message is one field.
            let lines = message.text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            let data = lines.map { "data: \($0)\n" }.joined()
            return "event: message\nid: \(message.id)\n\(data)\n"
        case .heartbeat:
            return ": heartbeat\n\n"
        case .evicted(let feed):
            return "event: evicted\ndata: fell too far behind on \(feed); reconnect\n\n"
        }
    }
}

extension BroadcastHub {
    /// Streams ticks and messages to one client until it disconnects, is evicted, stops
    /// reading, or the server shuts down.
    ///
    /// The client subscribes to the shared ticks and to the messages, each with
    /// `.evicting(evictAfter)`, before anything is written: the `: connected` comment it
    /// receives first means that it receives every tick and message from then on.
    ///
    /// One writer (this task) writes to the connection. The two subscriptions, the heartbeat
    /// and the write timeout run in child tasks that hand it what to write through a
    /// per-client `.bounded(1)` subject. So a client that does not read blocks the writer,
    /// then the forwarding tasks (in `send(waitingForRoom:)`), and then its subscriptions
    /// fall behind until the library evicts them: the upstream and the other clients never
    /// wait for it, and the server keeps fewer than `evictAfter` undelivered events per feed
    /// for it (plus what its socket buffers hold).
    ///
    /// How the response ends:
    /// - **evicted** (a client that reads, but falls `evictAfter` events behind): an
    ///   `event: evicted` event, then the end of the response;
    /// - **write timeout** (a client that stopped reading: its socket buffers are full, and a
    ///   write has been pending for `writeTimeout`): the connection is closed. Its
    ///   subscriptions were evicted before that, but only their own iteration can notice,
    ///   and it waits behind the stalled write;
    /// - **the client closed the connection**: noticed at once (Hummingbird's inbound-close
    ///   handler), the handler ends, and with it its subscriptions;
    /// - **the client vanished** without closing (a network cut, a sleeping laptop): the
    ///   heartbeat written after `heartbeatInterval` of silence eventually fails, and the
    ///   handler ends;
    /// - **graceful shutdown** (SIGINT, SIGTERM): the response ends.
    func stream(_ request: Request, to writer: inout any ResponseBodyWriter, channel: any Channel) async throws {
        let evicting = SharedBufferingPolicy.evicting(self.configuration.evictAfter)
        // Subscribe first: from here on, every tick (starting with the latest one, replayed)
        // and every message is kept for this client. The subscriptions are `Sendable`, so
        // the child tasks below read them.
        let ticks = self.ticks.subscribe(buffering: evicting)
        let messages = self.messages.subscribe(buffering: evicting)
        let outbox = AsyncPassthroughSubject<Outgoing, Never>(buffering: .bounded(1))
        var pending = outbox.makeAsyncIterator()
        let writes = WriteTracker()
        if let size = self.configuration.sendBufferSize {
            try await channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: size).get()
        }

        try await request.body.consumeWithInboundCloseHandler { _ in
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    self.clientConnected()
                    defer { self.clientDisconnected() }
                    try await writer.write(ByteBuffer(string: ": connected\n\n"))

                    group.addTask {
                        await self.forward(ticks, feed: "ticks", to: outbox, as: Outgoing.tick)
                    }
                    group.addTask {
                        await self.forward(messages, feed: "messages", to: outbox, as: Outgoing.message)
                    }
                    group.addTask {
                        try await self.keepAlive(writes: writes, outbox: outbox, channel: channel)
                    }
                    while let item = await pending.next() {
                        writes.begin()
                        try await writer.write(ByteBuffer(string: item.text))
                        writes.end()
                        if case .evicted = item { break }
                    }
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                outbox.finish()
            }
        } onInboundClosed: {
            outbox.finish()  // the client closed the connection
        }
        try await writer.finish(nil)
    }

    /// Hands every element of one subscription to the writer, waiting while it is busy.
    private func forward<Element: Sendable>(
        _ subscription: SharedSubscription<Element, Never>, feed: String,
        to outbox: AsyncPassthroughSubject<Outgoing, Never>, as outgoing: (Element) -> Outgoing
    ) async {
        for await event in subscription.events {
            switch event {
            case .element(let element):
                await outbox.send(waitingForRoom: outgoing(element))
            case .missed:
                break  // only lossy policies miss elements; .evicting does not
            case .evicted:
                self.clientEvicted()
                await outbox.send(waitingForRoom: .evicted(feed: feed))
                return
            }
        }
        // The feed ended (or this task was cancelled): so does the response.
        outbox.finish()
    }

    /// Writes a heartbeat whenever the connection was silent for `heartbeatInterval`, and
    /// closes it when a write stayed pending for `writeTimeout` (noticed within half of it).
    private func keepAlive(
        writes: WriteTracker, outbox: AsyncPassthroughSubject<Outgoing, Never>, channel: any Channel
    ) async throws {
        let heartbeat = self.configuration.heartbeatInterval
        let timeout = self.configuration.writeTimeout
        while true {
            let now = ContinuousClock.now
            let deadline: ContinuousClock.Instant
            switch writes.state {
            case .pending(let since):
                if now - since >= timeout {
                    self.clientTimedOut()
                    channel.close(promise: nil)  // fails the stalled write: the handler ends
                    return
                }
                deadline = since + timeout
            case .idle(let since):
                if now - since >= heartbeat {
                    writes.touch()
                    outbox.send(.heartbeat)  // never waits: the writer is idle
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

/// When the writer last wrote, and whether a write is pending.
final class WriteTracker: Sendable {
    enum State {
        /// Nothing is being written; the last write ended (or the heartbeat was sent) then.
        case idle(since: ContinuousClock.Instant)
        /// A write started then and has not returned.
        case pending(since: ContinuousClock.Instant)
    }

    private let current = Mutex(State.idle(since: .now))

    var state: State { self.current.withLock { $0 } }

    func begin() { self.current.withLock { $0 = .pending(since: .now) } }
    func end() { self.current.withLock { $0 = .idle(since: .now) } }

    /// Counts as activity unless a write is pending.
    func touch() {
        self.current.withLock { state in
            if case .idle = state { state = .idle(since: .now) }
        }
    }
}
