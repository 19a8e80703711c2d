import Foundation
import PostgresFanout
import Testing

/// Two server instances in this process, each with its own HTTP server on 127.0.0.1 and its
/// own `FanoutServer`, against the real PostgreSQL that `ci.sh` starts.
@Suite(.serialized, .enabled(if: TestDatabase.enabled, Comment(rawValue: TestDatabase.howToRun)))
struct FanoutTests {
    @Test("a message posted to either instance reaches every client of both, in order")
    func everyClientOfBothInstancesReceivesEveryMessageInOrder() async throws {
        try await withHangGuard {
            try await withInstances(["a", "b"]) { instances in
                let (a, b) = (instances[0], instances[1])
                var clients: [(instance: String, client: SSEClient)] = []
                for _ in 0..<3 { clients.append((a.name, try await a.readyClient())) }
                for _ in 0..<4 { clients.append((b.name, try await b.readyClient())) }

                // Posted one after another, half to each instance: each POST returns once its
                // NOTIFY is committed, so the order of commits is the order of the list.
                var messages = (1...20).map { "message \($0)" }
                messages += [
                    "two\nlines", "ünïcødé ✓", String(repeating: "x", count: FanoutServer.maximumPayloadBytes),
                ]
                for (index, message) in messages.enumerated() {
                    try await (index.isMultiple(of: 2) ? a : b).post(message)
                }

                for index in clients.indices {
                    var received: [String] = []
                    while received.count < messages.count {
                        let event = try await clients[index].client.expect(
                            "message", "client \(index) of \(clients[index].instance)")
                        received.append(event.data)
                    }
                    #expect(received == messages, "client \(index) of \(clients[index].instance)")
                }

                #expect(try await a.stats().subscribers == 3)
                #expect(try await b.stats().subscribers == 4)
                #expect(try await a.stats().listenConnectionsOpened == 1)

                // PostgreSQL refuses payloads of 8000 bytes or more; the instance says so first.
                let tooLong = String(repeating: "x", count: FanoutServer.maximumPayloadBytes + 1)
                let response = try await httpRequest(port: a.port, .POST, "/messages", body: tooLong)
                #expect(response.status.code == 413)

                for (_, client) in clients { client.close() }
            }
        }
    }

    @Test("one LISTEN connection per instance, whatever its number of clients, released by the last")
    func oneListenConnectionPerInstance() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            try await withInstances(["one", "twenty"]) { instances in
                let (one, twenty) = (instances[0], instances[1])
                let lonely = try await one.readyClient()
                var crowd: [SSEClient] = []
                for _ in 0..<20 { crowd.append(try await twenty.readyClient()) }

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
                            == .init(instance: one.name, subscribers: 1, listening: true, listenConnectionsOpened: 1))
                    #expect(
                        try await twenty.stats()
                            == .init(
                                instance: twenty.name, subscribers: 20, listening: true, listenConnectionsOpened: 1))

                    // The last client of `one` leaves: its LISTEN connection goes; `twenty`'s stays.
                    lonely.close()
                    try await eventually("\(one.name)'s LISTEN connection leaves pg_stat_activity") {
                        try await TestDatabase.backends(database, applicationName: one.listenApplicationName).isEmpty
                    }
                    #expect(
                        try await one.stats()
                            == .init(instance: one.name, subscribers: 0, listening: false, listenConnectionsOpened: 1))

                    // 19 of the 20 leave: one client is still there, and so is the connection.
                    for client in crowd.dropLast() { client.close() }
                    try await eventually("19 of \(twenty.name)'s clients are noticed leaving") {
                        try await twenty.stats().subscribers == 1
                    }
                    #expect(
                        try await TestDatabase.backends(database, applicationName: twenty.listenApplicationName).count
                            == 1)
                    #expect(try await twenty.stats().listening)

                    crowd.last!.close()
                    try await eventually("\(twenty.name)'s LISTEN connection leaves pg_stat_activity") {
                        try await TestDatabase.backends(database, applicationName: twenty.listenApplicationName).isEmpty
                    }
                    #expect(
                        try await twenty.stats()
                            == .init(
                                instance: twenty.name, subscribers: 0, listening: false, listenConnectionsOpened: 1))

                    // A new client opens a new one, and only one.
                    let returning = try await one.readyClient()
                    #expect(
                        try await TestDatabase.backends(database, applicationName: one.listenApplicationName).count == 1
                    )
                    #expect(
                        try await one.stats()
                            == .init(instance: one.name, subscribers: 1, listening: true, listenConnectionsOpened: 2))
                    returning.close()
                }
            }
        }
    }

    @Test("a killed LISTEN connection: the clients are told, the instance reconnects, their streams go on")
    func killedListenConnectionReconnects() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            // `killed` waits 2 s before reconnecting, so that the test can send a message in the
            // gap and see that its clients miss it.
            try await withInstances(["killed", "other"], reconnectDelay: .seconds(2)) { instances in
                let (killed, other) = (instances[0], instances[1])
                var killedClients: [SSEClient] = []
                var otherClients: [SSEClient] = []
                for _ in 0..<3 { killedClients.append(try await killed.readyClient()) }
                for _ in 0..<2 { otherClients.append(try await other.readyClient()) }

                try await killed.post("before")
                for index in killedClients.indices {
                    #expect(try await killedClients[index].expect("message", "killed").data == "before")
                }
                for index in otherClients.indices {
                    #expect(try await otherClients[index].expect("message", "other").data == "before")
                }

                let killedPID = try await TestDatabase.withConnection(settings) { database in
                    let backends = try await TestDatabase.backends(
                        database, applicationName: killed.listenApplicationName)
                    try #require(backends.count == 1, "\(backends)")
                    #expect(try await TestDatabase.terminate(database, pid: backends[0].pid))
                    return backends[0].pid
                }

                // Every client of `killed` learns that its feed was interrupted...
                for index in killedClients.indices {
                    #expect(try await killedClients[index].expect("interrupted", "killed").data == killed.name)
                }
                // ...and misses what is sent until the new LISTEN is in effect; `other`'s don't.
                try await other.post("during the gap")
                for index in otherClients.indices {
                    #expect(try await otherClients[index].expect("message", "other").data == "during the gap")
                }
                for index in killedClients.indices {
                    #expect(try await killedClients[index].expect("resumed", "killed").data == killed.name)
                }

                // Same streams, new connection: everything from now on arrives again.
                try await killed.post("after")
                for index in killedClients.indices {
                    #expect(try await killedClients[index].expect("message", "killed").data == "after")
                }
                for index in otherClients.indices {
                    #expect(try await otherClients[index].expect("message", "other").data == "after")
                }

                #expect(
                    try await killed.stats()
                        == .init(instance: killed.name, subscribers: 3, listening: true, listenConnectionsOpened: 2))
                #expect(try await other.stats().listenConnectionsOpened == 1)
                try await TestDatabase.withConnection(settings) { database in
                    let backends = try await TestDatabase.backends(
                        database, applicationName: killed.listenApplicationName)
                    #expect(backends.count == 1 && backends[0].pid != killedPID, "\(backends), killed \(killedPID)")
                }

                for client in killedClients + otherClients { client.close() }
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
                var reader = try await instance.readyClient()
                var stalled = try await instance.readyClient()
                // Connected, and taking nothing more from the socket.
                try await stalled.stopReading()

                // 1500 notifications of about 7 KB (10 MB) in one transaction: more than the
                // socket buffers between the instance and the stalled client hold, so its
                // handler ends up stuck in a write, and its subscription falls behind.
                try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.notifyBurst(
                        database, channel: instance.server.configuration.channel, count: burst, padding: 7000)
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
                try await instance.post("after the eviction")
                #expect(try await reader.expect("message", "reader").data == "after the eviction")
                // An evicted subscriber counts until its iteration ends: the stalled client's
                // handler, which was stuck in a write, has ended.
                #expect(try await instance.stats().subscribers == 1)
                let stats = try await instance.evictionStats()
                #expect(stats.evictions == 1)
                #expect((1...4096).contains(stats.maxBacklogHighWaterMark), "the reader's: \(stats)")

                // Reading again, the stalled client gets what its socket buffers held, then the
                // end of the connection: closed, without the `evicted` event that a writable
                // client gets.
                try await stalled.resumeReading()
                var received = 0
                do {
                    while let event = try await stalled.next() {
                        #expect(event.event == "message", "stalled client: \(event)")
                        received += 1
                    }
                } catch let failure as TestFailure {
                    throw failure
                } catch {
                    // The connection closed in the middle of the chunked body: the end too.
                }
                #expect(received < burst, "the stalled client received \(received) of \(burst)")

                reader.close()
                stalled.close()
            }
        }
    }
}
