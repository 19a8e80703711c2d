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
            try await self.chat(inbound: inbound, outbound: outbound)
        }
    }

    /// One WebSocket client: subscribes to the messages (with the configuration's evicting
    /// policy), says `connected`, then writes each message as it comes, one write at a time,
    /// while a child task posts what the client sends.
    ///
    /// How it ends:
    /// - **graceful shutdown**: the messages' ``DrainingService`` finishes the room before the
    ///   HTTP server stops, and waits (up to the shutdown deadline) until every subscriber has
    ///   read it to the end. This loop reads the end only after its last write returned, so
    ///   by then the client was written everything it was owed; the handler returns, and
    ///   hummingbird-websocket closes the connection with 1000 (normal closure). Had the
    ///   server stopped first, its graceful shutdown would close every WebSocket at once,
    ///   cutting off what was still on its way;
    /// - **evicted** (it fell too far behind): closed with 1008 (policy violation) and a reason;
    /// - **the client closed**: the inbound messages end, and so does the handler.
    func chat(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        let subscription = self.messages.subscribe()  // first: `connected` promises every message
        try await outbound.write(.text("connected"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in inbound.messages(maxSize: 1 << 16) {
                    if case .text(let text) = message { self.post(text) }
                }
            }
            group.addTask {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                for await event in subscription.events {
                    switch event {
                    case .element(let message):
                        let json = String(decoding: try encoder.encode(message), as: UTF8.self)
                        try await outbound.write(.text(json))
                    case .missed:
                        break  // only lossy policies miss elements; .evicting does not
                    case .evicted:
                        self.clientEvicted()
                        try await outbound.close(.policyViolation, reason: "fell too far behind; reconnect")
                        return
                    }
                }
            }
            // The first to end ends the connection: the room's end (or an eviction), or the
            // client closing it.
            try await group.next()
            group.cancelAll()
        }
    }
}
