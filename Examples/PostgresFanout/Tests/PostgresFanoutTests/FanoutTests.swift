import Foundation
import PostgresFanout
import Testing

/// Two server instances in this process, each with its own HTTP server on 127.0.0.1 and its
/// own `FanoutServer`, against the real PostgreSQL that `ci.sh` starts.
@Suite(.serialized, .enabled(if: TestDatabase.enabled, Comment(rawValue: TestDatabase.howToRun)))
struct FanoutTests {
    @Test("a message posted to a room on either instance reaches every client of that room on both, in order, and no other room's")
    func everyClientOfARoomOnBothInstancesReceivesItsMessagesInOrder() async throws {
        try await withHangGuard {
            try await withInstances(["a", "b"]) { instances in
                let (a, b) = (instances[0], instances[1])
                // Two rooms, with clients on both instances.
                var clients: [(instance: String, room: String, client: SSEClient)] = []
                for (instance, room, count) in [(a, "red", 2), (b, "red", 3), (a, "blue", 1), (b, "blue", 2)] {
                    for _ in 0..<count {
                        clients.append((instance.name, room, try await instance.readyClient(of: room)))
                    }
                }

                // Posted one after another, alternately to each instance and interleaving the
                // rooms: each POST returns once its NOTIFY is committed, so the order of commits
                // is the order of the list. Each room's list ends with a message posted after
                // every message of the other room but one: a client that received a message
                // of the other room would see it before its own room's last.
                var messages: [(room: String, text: String)] = (1...30).map { n in
                    n.isMultiple(of: 3) ? ("blue", "blue \(n)") : ("red", "red \(n)")
                }
                messages += [
                    ("red", "two\nlines"), ("blue", "ünïcødé ✓"), ("red", "a\ttab"),
                    ("red", String(repeating: "x", count: RoomPayload.maximumMessageBytes(room: "red"))),
                    ("blue", "blue ends"), ("red", "red ends"),
                ]
                for (index, message) in messages.enumerated() {
                    try await (index.isMultiple(of: 2) ? a : b).post(message.text, to: message.room)
                }

                for index in clients.indices {
                    let (instance, room) = (clients[index].instance, clients[index].room)
                    let expected = messages.filter { $0.room == room }.map(\.text)
                    var received: [String] = []
                    while received.count < expected.count {
                        let event = try await clients[index].client.expect(
                            "message", "client \(index) of \(instance) in \(room)")
                        received.append(event.data)
                    }
                    #expect(received == expected, "client \(index) of \(instance) in \(room)")
                }

                #expect(try await a.stats().subscribers == 3)
                #expect(try await b.stats().subscribers == 5)
                #expect(try await a.stats().rooms == 2)
                #expect(try await a.subscribers(of: "red") == 2)
                #expect(try await b.subscribers(of: "blue") == 2)
                #expect(try await a.subscribers(of: "green") == 0)
                #expect(try await a.stats().listenConnectionsOpened == 1)

                // PostgreSQL refuses payloads of 8000 bytes or more (room, tab and message); the
                // instance says so first. A room that is not a valid name is refused.
                let tooLong = String(repeating: "x", count: RoomPayload.maximumMessageBytes(room: "red") + 1)
                let response = try await httpRequest(port: a.port, .POST, "/rooms/red/messages", body: tooLong)
                #expect(response.status.code == 413)
                let badRoom = String(repeating: "r", count: RoomPayload.maximumRoomBytes + 1)
                #expect(try await httpRequest(port: a.port, .GET, "/rooms/\(badRoom)/events").status.code == 400)
                #expect(
                    try await httpRequest(port: b.port, .POST, "/rooms/\(badRoom)/messages", body: "x").status.code
                        == 400)

                for (_, _, client) in clients { client.close() }
            }
        }
    }

    @Test("a room is freed with its last client, while the other rooms go on")
    func roomIsFreedWithItsLastClient() async throws {
        try await withHangGuard {
            try await withInstances(["rooms"]) { instances in
                let instance = instances[0]
                let leaving = [try await instance.readyClient(of: "red"), try await instance.readyClient(of: "red")]
                var staying = try await instance.readyClient(of: "blue")
                #expect(try await instance.stats().rooms == 2)
                #expect(try await instance.subscribers(of: "red") == 2)

                // The last client of red leaves: red is freed (noticed at a heartbeat's write);
                // blue and the LISTEN connection stay.
                for client in leaving { client.close() }
                try await eventually("red is freed") { try await instance.stats().rooms == 1 }
                #expect(try await instance.subscribers(of: "red") == 0)
                #expect(try await instance.subscribers(of: "blue") == 1)

                // A message to red reaches nobody; blue's client gets its own, and only that.
                try await instance.post("nobody is in red", to: "red")
                try await instance.post("blue goes on", to: "blue")
                #expect(try await staying.expect("message", "blue's client").data == "blue goes on")

                // A new client of red gets a fresh room, fed by the same LISTEN connection.
                var returning = try await instance.readyClient(of: "red")
                #expect(try await instance.stats().rooms == 2)
                try await instance.post("red again", to: "red")
                #expect(try await returning.expect("message", "red's new client").data == "red again")
                #expect(try await instance.stats().listenConnectionsOpened == 1)

                returning.close()
                staying.close()
            }
        }
    }

    @Test("one LISTEN connection per instance, whatever its number of rooms and clients, released by the last")
    func oneListenConnectionPerInstance() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            try await withInstances(["one", "twenty"]) { instances in
                let (one, twenty) = (instances[0], instances[1])
                let lonely = try await one.readyClient(of: "lobby")
                // 20 clients in 5 rooms; the last one alone in its room.
                var crowd: [SSEClient] = []
                for n in 0..<20 { crowd.append(try await twenty.readyClient(of: "room\(n % 5)")) }

                try await TestDatabase.withConnection(settings) { database in
                    // Every client got `ready`: each instance's LISTEN is in effect, so its
                    // connection is in pg_stat_activity, its last query the LISTEN.
                    for instance in [one, twenty] {
                        let backends = try await TestDatabase.backends(
                            database, applicationName: instance.listenApplicationName)
                        #expect(backends.count == 1, "\(instance.name): \(backends)")
                        #expect(backends.allSatisfy { $0.query.hasPrefix("LISTEN") }, "\(instance.name): \(backends)")
                    }
                    #expect(
                        try await one.stats()
                            == .init(
                                instance: one.name, subscribers: 1, rooms: 1, listening: true,
                                listenConnectionsOpened: 1))
                    #expect(
                        try await twenty.stats()
                            == .init(
                                instance: twenty.name, subscribers: 20, rooms: 5, listening: true,
                                listenConnectionsOpened: 1))

                    // The last client of `one` leaves: its LISTEN connection goes (once its
                    // handler has noticed, ended and left); `twenty`'s stays.
                    lonely.close()
                    try await eventually("\(one.name)'s LISTEN connection leaves pg_stat_activity") {
                        let gone = try await TestDatabase.backends(
                            database, applicationName: one.listenApplicationName
                        ).isEmpty
                        let subscribers = try await one.stats().subscribers
                        return gone && subscribers == 0
                    }
                    #expect(
                        try await one.stats()
                            == .init(
                                instance: one.name, subscribers: 0, rooms: 0, listening: false,
                                listenConnectionsOpened: 1))

                    // 19 of the 20 leave: one client is still there, in one room, and so is the
                    // connection.
                    for client in crowd.dropLast() { client.close() }
                    try await eventually("19 of \(twenty.name)'s clients are noticed leaving") {
                        try await twenty.stats().subscribers == 1
                    }
                    try await eventually("4 of \(twenty.name)'s 5 rooms are freed") {
                        try await twenty.stats().rooms == 1
                    }
                    #expect(
                        try await TestDatabase.backends(database, applicationName: twenty.listenApplicationName).count
                            == 1)
                    #expect(try await twenty.stats().listening)

                    crowd.last!.close()
                    try await eventually("\(twenty.name)'s LISTEN connection leaves pg_stat_activity") {
                        let gone = try await TestDatabase.backends(
                            database, applicationName: twenty.listenApplicationName
                        ).isEmpty
                        let subscribers = try await twenty.stats().subscribers
                        return gone && subscribers == 0
                    }
                    #expect(
                        try await twenty.stats()
                            == .init(
                                instance: twenty.name, subscribers: 0, rooms: 0, listening: false,
                                listenConnectionsOpened: 1))

                    // A new client opens a new one, and only one.
                    let returning = try await one.readyClient(of: "lobby")
                    #expect(
                        try await TestDatabase.backends(database, applicationName: one.listenApplicationName).count == 1
                    )
                    #expect(
                        try await one.stats()
                            == .init(
                                instance: one.name, subscribers: 1, rooms: 1, listening: true,
                                listenConnectionsOpened: 2))
                    returning.close()
                }
            }
        }
    }

    @Test("a killed LISTEN connection: the clients are told, the instance reconnects, and they get what was sent meanwhile")
    func killedListenConnectionReconnects() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            // `killed` waits 2 s before reconnecting, so that the test can send a message in the
            // gap and see that its clients miss it.
            try await withInstances(["killed", "other"], reconnectDelay: .seconds(2)) { instances in
                let (killed, other) = (instances[0], instances[1])
                // Clients in two rooms on each instance: the status reaches every room.
                let rooms = ["red", "blue"]
                var killedClients: [(room: String, client: SSEClient)] = []
                var otherClients: [(room: String, client: SSEClient)] = []
                for room in ["red", "red", "blue"] { killedClients.append((room, try await killed.readyClient(of: room))) }
                for room in rooms { otherClients.append((room, try await other.readyClient(of: room))) }

                for room in rooms { try await killed.post("before in \(room)", to: room) }
                for index in killedClients.indices {
                    let room = killedClients[index].room
                    #expect(try await killedClients[index].client.expect("message", "killed").data == "before in \(room)")
                }
                for index in otherClients.indices {
                    let room = otherClients[index].room
                    #expect(try await otherClients[index].client.expect("message", "other").data == "before in \(room)")
                }

                let killedPID = try await TestDatabase.withConnection(settings) { database in
                    let backends = try await TestDatabase.backends(
                        database, applicationName: killed.listenApplicationName)
                    try #require(backends.count == 1, "\(backends)")
                    #expect(try await TestDatabase.terminate(database, pid: backends[0].pid))
                    return backends[0].pid
                }

                // Every client of `killed`, in every room, learns that its feed was interrupted...
                for index in killedClients.indices {
                    #expect(try await killedClients[index].client.expect("interrupted", "killed").data == killed.name)
                }
                // A client of a room nobody had joined arrives while the connection is down
                // (the instance waits 2 s to reconnect): it is told to wait, and its `ready`
                // comes through its room, to which the session sends the new connection's
                // status (the room's name recorded when it joined).
                var late = try await SSEClient.connect(port: killed.port, path: "/rooms/green/events")
                // ...and misses, live, what is sent until the new LISTEN is in effect; `other`'s don't.
                for room in rooms { try await other.post("during the gap in \(room)", to: room) }
                for index in otherClients.indices {
                    let room = otherClients[index].room
                    #expect(
                        try await otherClients[index].client.expect("message", "other").data
                            == "during the gap in \(room)")
                }
                // With `resumed`, the clients of `killed` that had seen a message get what was
                // committed in the gap, from the table.
                for index in killedClients.indices {
                    let room = killedClients[index].room
                    #expect(try await killedClients[index].client.expect("resumed", "killed").data == killed.name)
                    #expect(
                        try await killedClients[index].client.expect("message", "killed").data
                            == "during the gap in \(room)")
                }

                #expect(try await late.expect("ready", "the late client").data == killed.name)
                #expect(late.comments.first == "waiting for the LISTEN connection", "\(late.comments)")

                // Same streams, new connection: everything from now on arrives again.
                for room in rooms { try await killed.post("after in \(room)", to: room) }
                try await killed.post("after in green", to: "green")
                #expect(try await late.expect("message", "the late client").data == "after in green")
                for index in killedClients.indices {
                    let room = killedClients[index].room
                    #expect(try await killedClients[index].client.expect("message", "killed").data == "after in \(room)")
                }
                for index in otherClients.indices {
                    let room = otherClients[index].room
                    #expect(try await otherClients[index].client.expect("message", "other").data == "after in \(room)")
                }

                #expect(
                    try await killed.stats()
                        == .init(
                            instance: killed.name, subscribers: 4, rooms: 3, listening: true,
                            listenConnectionsOpened: 2))
                #expect(try await other.stats().listenConnectionsOpened == 1)
                try await TestDatabase.withConnection(settings) { database in
                    let backends = try await TestDatabase.backends(
                        database, applicationName: killed.listenApplicationName)
                    #expect(backends.count == 1 && backends[0].pid != killedPID, "\(backends), killed \(killedPID)")
                }

                for (_, client) in killedClients + otherClients { client.close() }
                late.close()
            }
        }
    }

    @Test("a client that stops reading is evicted by the soft limit and its connection closed; a reader goes on")
    func stalledClientIsEvictedAndItsConnectionClosed() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            // The default hard limit (4096) lets the whole burst through; more than 64 unread
            // events for 2 s evicts a client.
            let (softLimit, burst) = (64, 1500)
            try await withInstances(["evicting"], softLimit: softLimit, softLimitDuration: .seconds(2)) {
                instances in
                let instance = instances[0]
                var reader = try await instance.readyClient(of: "burst")
                var stalled = try await instance.readyClient(of: "burst")
                // A client of another room: the burst costs it nothing, and it is not evicted.
                var elsewhere = try await instance.readyClient(of: "quiet")
                // Connected, and taking nothing more from the socket.
                try await stalled.stopReading()

                // 1500 notifications of about 7 KB (10 MB) in one transaction: more than the
                // socket buffers between the instance and the stalled client hold, so its
                // handler ends up stuck in a write, and its subscription falls behind.
                try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.notifyBurst(
                        database, channel: instance.server.configuration.channel, room: "burst", count: burst,
                        padding: 7000)
                }

                // Its handler cannot learn of its eviction (it never gets back to reading the
                // subscription); the task waiting for it does, and closes the connection.
                var highestMark = 0
                try await eventually("the stalled client is evicted") {
                    let stats = try await instance.evictionStats()
                    highestMark = max(highestMark, stats.maxBacklogHighWaterMark)
                    return stats.evictions == 1
                }
                // Seen while it was past the soft limit, before it was evicted.
                #expect(highestMark > softLimit, "the highest backlog /stats reported: \(highestMark)")

                // The reader received the whole burst, in order, and is still served.
                for n in 1...burst {
                    let event = try await reader.expect("message", "reader, message \(n)")
                    guard event.data.hasPrefix("\(n):"), event.data.utf8.count == "\(n):".utf8.count + 7000 else {
                        throw TestFailure("reader: message \(n) was \(event)")
                    }
                }
                try await instance.post("after the eviction", to: "burst")
                #expect(try await reader.expect("message", "reader").data == "after the eviction")
                try await instance.post("the first in quiet", to: "quiet")
                #expect(try await elsewhere.expect("message", "quiet's client").data == "the first in quiet")
                // An evicted client counts until its handler ends: the stalled client's
                // handler, which was stuck in a write, has ended.
                #expect(try await instance.stats().subscribers == 2)
                let stats = try await instance.evictionStats()
                #expect(stats.evictions == 1)
                #expect((1...4096).contains(stats.maxBacklogHighWaterMark), "the reader's: \(stats)")

                // Reading again, the stalled client gets what its socket buffers held, then the
                // end of the connection: closed, without the `evicted` event that a writable
                // client gets.
                try await stalled.resumeReading()
                var received: [ServerSentEvent] = []
                do {
                    while let event = try await stalled.next() {
                        #expect(event.event == "message", "stalled client: \(event)")
                        received.append(event)
                    }
                } catch let failure as TestFailure {
                    throw failure
                } catch {
                    // The connection closed in the middle of the chunked body: the end too.
                }
                #expect(received.count < burst, "the stalled client received \(received.count) of \(burst)")

                // It reconnects with the id of the last message it got, and gets the rest of
                // the burst from the table, then the live messages: it lost nothing.
                let lastID = try #require(received.last?.id, "the stalled client's last message")
                var back = try await instance.readyClient(of: "burst", lastEventID: lastID)
                let rest = try await back.messages(burst - received.count + 1, "the evicted client, back")
                let numbers = (received.map(\.data) + rest.map(\.text)).map { $0.prefix(while: { $0 != ":" }) }
                #expect(numbers == (1...burst).map { "\($0)"[...] } + ["after the eviction"])
                back.close()

                reader.close()
                stalled.close()
                elsewhere.close()
            }
        }
    }
}
