import AsyncMulticast
import Foundation
import Testing

@testable import ChatRooms

/// The chat rooms example (`Sources/ChatRooms`): a server in this process, on 127.0.0.1 and a
/// free port, and WebSocket clients on plain sockets. Every wait is for something a client
/// reads (its own `joined`, a message, a `left`) or the server reports (a room freed, the
/// count of handlers), with a hang guard; nothing waits for a fixed time.
///
/// Nested in ``BroadcastServerTests``, whose `.serialized` it inherits: no test of either
/// server runs beside another, since both print rates.
extension BroadcastServerTests {
    @Suite("Chat rooms: WebSocket clients in rooms of AsyncSubjectTopics", .timeLimit(.minutes(1)))
    struct ChatRoomsTests {
        /// Three clients in `swift`, two in `rust`; two of each room's clients say 30 things
        /// each, all at once. Every client of a room receives the same messages in the same
        /// order (each speaker's in the order it said them), and none of the other room's.
        @Test func everyClientOfARoomReceivesItsMessagesInOneOrder() async throws {
            try await ChatTestServer.run { server in
                var swift = [try await server.join("swift", as: "ann"), try await server.join("swift", as: "bob")]
                swift.append(try await server.join("swift", as: "cid"))
                var rust = [try await server.join("rust", as: "dan"), try await server.join("rust", as: "eve")]
                let count = 30
                for n in 1...count {
                    try swift[0].say("\(n)")
                    try swift[1].say("\(n)")
                    try rust[0].say("\(n)")
                    try rust[1].say("\(n)")
                }
                for index in swift.indices {
                    try await swift[index].read("\(swift[index].name) to receive \(2 * count)") {
                        ChatClient.messages(in: $0).count >= 2 * count
                    }
                }
                for index in rust.indices {
                    try await rust[index].read("\(rust[index].name) to receive \(2 * count)") {
                        ChatClient.messages(in: $0).count >= 2 * count
                    }
                }
                for (room, clients, speakers) in [("swift", swift, ["ann", "bob"]), ("rust", rust, ["dan", "eve"])] {
                    let first = clients[0].messages
                    #expect(first.count == 2 * count, "\(room): nothing more, nothing of the other room")
                    for speaker in speakers {
                        let said = first.filter { $0.hasPrefix("\(speaker): ") }
                        #expect(said == (1...count).map { "\(speaker): \($0)" }, "\(room): \(speaker)'s, in order")
                    }
                    for client in clients.dropFirst() {
                        #expect(
                            client.messages == first,
                            "\(room): \(client.name) got what \(clients[0].name) got, in the same order")
                    }
                }
                print(
                    "[chat 1] 5 clients in 2 rooms, 4 speakers x \(count) messages at once: each room's clients got"
                        + " the same \(2 * count) messages in the same order, none of the other room's")
            }
        }

        /// Presence is per room: a room's clients hear who joins and leaves it (with the room's
        /// count), never who joins another room; `GET /rooms/<room>` and `GET /stats` agree.
        @Test func joinsAndLeavesAreAnnouncedInTheirRoomOnly() async throws {
            try await ChatTestServer.run { server in
                var ann = try await server.join("swift", as: "ann")
                #expect(ann.frames == [ChatFrame(type: "joined", user: "ann", present: 1)])
                #expect(try await server.presence(in: "swift") == RoomPresence(room: "swift", present: 1, live: true))

                var bob = try await server.join("swift", as: "bob")
                var cid = try await server.join("rust", as: "cid")
                #expect(cid.frames == [ChatFrame(type: "joined", user: "cid", present: 1)])
                #expect(try await server.presence(in: "swift") == RoomPresence(room: "swift", present: 2, live: true))
                #expect(try await server.presence(in: "rust") == RoomPresence(room: "rust", present: 1, live: true))
                #expect(try await server.presence(in: "go") == RoomPresence(room: "go", present: 0, live: false))
                #expect(try await server.stats() == ChatStats(rooms: 2, clients: 3, evictions: 0))

                try await bob.leave()
                #expect(bob.reader.closed)
                try await ann.read("ann to hear bob leave") { $0.contains { $0.type == "left" } }
                // cid joined rust between bob's join and bob's leave: had it reached swift, ann
                // would have read it before bob's `left`.
                #expect(
                    ann.frames == [
                        ChatFrame(type: "joined", user: "ann", present: 1),
                        ChatFrame(type: "joined", user: "bob", present: 2),
                        ChatFrame(type: "left", user: "bob", present: 1),
                    ])
                #expect(try await server.presence(in: "swift") == RoomPresence(room: "swift", present: 1, live: true))
                try await ann.leave()
                try await cid.leave()
                #expect(cid.frames == [ChatFrame(type: "joined", user: "cid", present: 1)], "nothing of swift")
                print("[chat 2] ann heard \(ann.frames.map { "\($0.type) \($0.user)" }); cid heard only itself")
            }
        }

        /// A room's subject is freed when its last client leaves (`waitUntilFreed`, `keyCount`
        /// back to 0, `GET /rooms/<room>` not live), while another room lives on; a client joining
        /// a freed room gets a fresh one.
        @Test func aRoomIsFreedWhenItsLastClientLeaves() async throws {
            try await ChatTestServer.run { server in
                var swift = [try await server.join("swift", as: "ann"), try await server.join("swift", as: "bob")]
                var rust = try await server.join("rust", as: "cid")
                #expect(server.server.rooms.keyCount == 2)

                try await swift[0].leave()
                #expect(try await server.presence(in: "swift") == RoomPresence(room: "swift", present: 1, live: true))
                try await swift[1].leave()
                try await server.waitUntilFreed("swift")
                #expect(try await server.presence(in: "swift") == RoomPresence(room: "swift", present: 0, live: false))
                #expect(server.server.rooms.keyCount == 1, "rust lives on")

                try await rust.leave()
                try await server.waitUntilFreed("rust")
                try await server.waitForClients(0)
                #expect(server.server.rooms.keyCount == 0)
                #expect(try await server.stats() == ChatStats(rooms: 0, clients: 0, evictions: 0))

                var again = try await server.join("swift", as: "dan")
                #expect(again.frames == [ChatFrame(type: "joined", user: "dan", present: 1)], "a fresh room")
                #expect(server.server.rooms.keyCount == 1)
                try await again.leave()
                try await server.waitUntilFreed("swift")
                print("[chat 3] swift freed after its last client left, rust after its own; keyCount 2 -> 1 -> 0")
            }
        }

        /// At graceful shutdown the rooms end before the HTTP server stops: two clients that
        /// had not read 200 messages of 1 kB (4 kB socket buffers on both sides: most of them
        /// still in the server) each receive all of them, in order, then a close frame 1000
        /// (normal closure), then the end of the connection.
        @Test func shutdownClosesEveryClientWith1000AfterItsMessages() async throws {
            var configuration = ChatTestServer.configuration
            configuration.hardLimit = 4096  // the clients read only once the shutdown began
            configuration.softLimit = 256
            try await ChatTestServer.run(configuration) { server in
                var clients = [
                    try await server.join("swift", as: "ann", receiveBufferSize: 4096),
                    try await server.join("swift", as: "bob", receiveBufferSize: 4096),
                ]
                let count = 200
                let text = String(repeating: "x", count: 1000)
                for n in 1...count {
                    server.server.rooms.send(
                        ChatFrame(type: "message", user: "bot", text: "\(n) \(text)").json, to: "swift")
                }
                await server.shutDown()
                for index in clients.indices {
                    try await clients[index].read("\(clients[index].name) to the end") { _ in false }
                    #expect(
                        clients[index].messages == (1...count).map { "bot: \($0) \(text)" }, "\(clients[index].name)")
                    #expect(clients[index].reader.closeCode == 1000, "\(clients[index].name)")
                    #expect(clients[index].reader.closed, "\(clients[index].name)")
                }
                print(
                    "[chat 6] at shutdown, 2 clients that had not read got \(clients.map(\.messages.count)) of \(count)"
                        + " messages, then close frames \(clients.map { $0.reader.closeCode.map(String.init) ?? "none" })"
                )
            }
        }
    }
}
