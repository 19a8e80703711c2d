import AsyncMulticast
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import Synchronization

/// One WebSocket text frame of a room, as JSON with sorted keys:
///
/// - `{"present":2,"type":"joined","user":"alice"}`: someone joined (`present`: the room's
///   clients then). A client's own `joined` means it receives everything said from then on;
/// - `{"text":"hello","type":"message","user":"alice"}`: what a client sent;
/// - `{"present":1,"type":"left","user":"alice"}`: someone left; `"evicted":true` when the
///   server dropped them for falling too far behind.
public struct ChatFrame: Codable, Sendable, Equatable {
    /// `joined`, `message` or `left`.
    public var type: String
    /// Who joined, spoke or left: the `name` of their WebSocket's URL.
    public var user: String
    /// What they said (`message`).
    public var text: String?
    /// The room's clients then (`joined`, `left`).
    public var present: Int?
    /// True when the server dropped them (`left`).
    public var evicted: Bool?

    /// The frame's text: its JSON, keys sorted.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }
}

extension ChatServer {
    /// Upgrades `GET /rooms/<room>/ws?name=<name>` to a WebSocket in `room`; any other path
    /// goes to the HTTP router.
    func webSocketUpgrade(
        _ request: HTTPRequest, channel: any Channel
    ) async throws -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        guard let target = URLComponents(string: request.path ?? "") else { return .dontUpgrade }
        let parts = target.path.split(separator: "/", omittingEmptySubsequences: false)  // decoded
        guard parts.count == 4, parts[1] == "rooms", parts[3] == "ws", !parts[2].isEmpty else { return .dontUpgrade }
        let room = String(parts[2])
        let user = target.queryItems?.first { $0.name == "name" }?.value ?? "anonymous"
        if let size = self.configuration.sendBufferSize {
            try await channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: size).get()
        }
        return .upgrade([:]) { inbound, outbound, _ in
            await self.chat(in: room, as: user, inbound: inbound, outbound: outbound, channel: channel)
        }
    }

    /// One client in `room`: joins it, says so to the room, then writes what the room says
    /// while it sends to the room what the client says; when it is over, says the client left.
    /// The room's subject exists from the first client's join to the last one's leave.
    func chat(
        in room: String, as user: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        channel: any Channel
    ) async {
        self.connections.update { $0 + 1 }
        defer { self.connections.update { $0 - 1 } }
        let evicted = await self.attend(room, as: user, inbound: inbound, outbound: outbound, channel: channel)
        // The subscription went with `attend`: the count no longer has this client. To a room
        // it left empty, this goes nowhere: the room is freed already.
        let present = self.rooms.subscriberCount(of: room)
        let left = ChatFrame(type: "left", user: user, present: present, evicted: evicted ? true : nil)
        self.rooms.send(left.json, to: room)
    }

    /// Returns whether the client was evicted.
    ///
    /// Three child tasks: one sends what the client says to the room; one writes the room's
    /// frames to the client; one waits for the client's eviction (`waitForEviction()`), so
    /// that a writer stuck in a write to a client that stopped reading is ended at once:
    ///
    /// - **evicted, not writable** (NIO's `isWritable`: the socket's buffers are full, the
    ///   client is not taking what it was sent): the watcher closes the connection, which
    ///   fails the stuck write. A close frame would queue behind what the client does not read;
    /// - **evicted, writable** (a client that reads, but a burst took it past the hard limit):
    ///   the writer writes what its subscription still hands it, without a gap, then a close
    ///   frame 1008 (policy violation) saying to reconnect;
    /// - **the rooms ended** (graceful shutdown): the writer writes what is left, then a close
    ///   frame 1000, and waits for the client's answer (it comes once the client has read it
    ///   all), at most the shutdown deadline;
    /// - **the client closed**: its inbound messages end, and so does the handler.
    private func attend(
        _ room: String, as user: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        channel: any Channel
    ) async -> Bool {
        let subscription = self.rooms.subscribe(to: room)  // before `joined`: it promises everything after it
        self.rooms.send(
            ChatFrame(type: "joined", user: user, present: self.rooms.subscriberCount(of: room)).json, to: room)
        let evicted = EvictedOnce()
        let closeWait = self.configuration.shutdownDeadline
        return await withTaskGroup(of: ChatEnding.self) { group in
            group.addTask {
                do {
                    for try await message in inbound.messages(maxSize: 1 << 16) {
                        if case .text(let text) = message {
                            self.rooms.send(ChatFrame(type: "message", user: user, text: text).json, to: room)
                        }
                    }
                } catch {}  // the connection failed: as if the client closed it
                return .clientClosed
            }
            group.addTask {
                guard let eviction = await subscription.waitForEviction() else { return .watched }
                if evicted.claim() { self.clientEvicted(user, in: room, eviction) }
                if !channel.isWritable { channel.close(promise: nil) }  // fails the stuck write
                return .watched
            }
            group.addTask {
                do {
                    for await event in subscription.events {
                        switch event {
                        case .element(let json):
                            try await outbound.write(.text(json))
                        case .missed:
                            break  // only lossy policies miss messages; .evicting does not
                        case .evicted(let eviction):
                            if evicted.claim() { self.clientEvicted(user, in: room, eviction) }
                            try await outbound.close(.policyViolation, reason: "fell too far behind; reconnect")
                            return .serverClosed
                        }
                    }
                    try await outbound.close(.normalClosure, reason: "the server is shutting down")
                    return .serverClosed
                } catch {
                    return .clientClosed  // the write failed: the connection is closed
                }
            }
            var waitingForAnswer = false
            loop: while let ending = await group.next() {
                switch ending {
                case .watched:
                    continue
                case .serverClosed:
                    // The client answers the close frame once it has read everything before it.
                    guard !waitingForAnswer else { continue }
                    waitingForAnswer = true
                    group.addTask {
                        try? await Task.sleep(for: closeWait)
                        return .answerTimedOut
                    }
                case .clientClosed:
                    break loop
                case .answerTimedOut:
                    channel.close(promise: nil)
                    break loop
                }
            }
            group.cancelAll()
            return evicted.wasClaimed
        }
    }
}

/// How one of a client's tasks ended.
enum ChatEnding: Sendable {
    /// The client closed the connection (or answered the server's close frame), or it failed.
    case clientClosed
    /// The writer sent a close frame: the rooms ended, or the client was evicted.
    case serverClosed
    /// The eviction watcher returned (it acted on an eviction, or the client left otherwise).
    case watched
    /// No answer to the close frame within the shutdown deadline.
    case answerTimedOut
}

/// Set by the first of a client's tasks to learn of its eviction, which counts and logs it.
final class EvictedOnce: Sendable {
    private let claimed = Atomic(false)

    /// True for the first call only.
    func claim() -> Bool { !self.claimed.exchange(true, ordering: .relaxed) }

    var wasClaimed: Bool { self.claimed.load(ordering: .relaxed) }
}
