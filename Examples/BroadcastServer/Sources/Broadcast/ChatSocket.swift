import AsyncMulticast
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

extension BroadcastHub {
    /// `GET /ws`: the messages as a WebSocket chat room. Each message is one text frame, its
    /// JSON (`{"id":1,"text":"hello"}`); a text frame the client sends is posted to the room,
    /// as `POST /messages` does. The first frame, `connected`, means that the client receives
    /// every message from then on.
    ///
    /// Hummingbird runs it through `.http1WebSocketUpgrade` (see ``application(logger:onServerRunning:)``):
    /// any other path is not upgraded, and goes to the HTTP router.
    func webSocketUpgrade(
        _ request: HTTPRequest, channel: any Channel
    ) async throws -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        guard request.path == "/ws" else { return .dontUpgrade }
        if let size = self.configuration.sendBufferSize {
            try await channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: size).get()
        }
        return .upgrade([:]) { inbound, outbound, _ in
            try await self.chat(inbound: inbound, outbound: outbound, channel: channel)
        }
    }

    /// One WebSocket client: subscribes to the messages (with the configuration's evicting
    /// policy), says `connected`, then writes each message as it comes, one write at a time,
    /// while a child task posts what the client sends, and another waits for the client's
    /// eviction (`waitForEviction()`): a writer stuck in a write to a client that stopped
    /// reading never asks for its next event, so it would learn of the eviction only when the
    /// write returned.
    ///
    /// How it ends:
    /// - **graceful shutdown**: the messages' ``DrainingService`` finishes the room before the
    ///   HTTP server stops, and waits (up to the shutdown deadline) until every subscriber has
    ///   read it to the end. This loop reads the end only after its last write returned; it
    ///   then sends a close frame (1000, normal closure), which leaves behind everything
    ///   written, and waits for the client's answer, which comes once the client has read it
    ///   all (at most the shutdown deadline). Had the HTTP server stopped first, its graceful
    ///   shutdown would have closed every WebSocket at once, cutting off what was on its way.
    ///   And a handler that returned without waiting for the answer would let the channel
    ///   close with writes still queued in it;
    /// - **evicted** (it fell too far behind), the connection not writable (the client is not
    ///   taking what it was sent): the watcher closes it at once, which fails the stuck write;
    /// - **evicted**, the connection writable (a client that reads, but a burst took it past
    ///   the hard limit): the writer writes what the subscription still hands it, then a close
    ///   frame 1008 (policy violation) and a reason;
    /// - **the client closed**: the inbound messages end, and so does the handler.
    func chat(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, channel: any Channel) async throws {
        // First: `connected` promises every message. Joins at the newest (no history replayed).
        let subscription = self.subscribeToMessages(after: nil)
        try await outbound.write(.text("connected"))
        let closeWait = self.configuration.shutdownDeadline
        let evicted = Flag()  // counts the eviction once, by whichever task learns it first
        try await withThrowingTaskGroup(of: ChatSide.self) { group in
            group.addTask {
                guard let eviction = await subscription.waitForEviction() else { return .watcher }
                if evicted.set() { self.clientEvicted(feed: "messages", eviction) }
                if !channel.isWritable { channel.close(promise: nil) }  // fails the stuck write
                return .watcher
            }
            group.addTask {
                // Ends when the client closes the connection, or answers our close frame.
                for try await message in inbound.messages(maxSize: 1 << 16) {
                    if case .text(let text) = message { self.post(text) }
                }
                return .client
            }
            group.addTask {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                for await event in subscription {
                    switch event {
                    case .element(let message, _):
                        let json = String(decoding: try encoder.encode(message), as: UTF8.self)
                        try await outbound.write(.text(json))
                    case .gap:
                        break  // only lossy policies and resumptions have gaps; neither here
                    case .evicted(let eviction):
                        if evicted.set() { self.clientEvicted(feed: "messages", eviction) }
                        try await outbound.close(.policyViolation, reason: "fell too far behind; reconnect")
                        return .server
                    }
                }
                // The room ended: the server shuts down. The close frame goes behind the writes.
                try await outbound.close(.normalClosure, reason: "the server is shutting down")
                return .server
            }
            var first = try await group.next()
            while first == .watcher { first = try await group.next() }
            if first == .server {
                // The client answers the close frame once it has read everything before it.
                group.addTask {
                    try await Task.sleep(for: closeWait)
                    return .client
                }
                while let side = try await group.next(), side != .client {}  // not the watcher's return
            }
            group.cancelAll()
        }
    }
}

/// Which side of a WebSocket chat ended it first.
enum ChatSide: Sendable {
    /// The client closed the connection, or answered the server's close frame.
    case client
    /// The server sent a close frame: the room ended, or the client was evicted.
    case server
    /// The eviction watcher returned: it acted on an eviction, or the client left otherwise.
    case watcher
}
