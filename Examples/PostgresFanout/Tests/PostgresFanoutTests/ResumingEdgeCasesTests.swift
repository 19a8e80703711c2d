import Foundation
import PostgresFanout
import PostgresNIO
import Synchronization
import Testing

/// Reconnecting clients at the edges of the catch-up: an id past the room's newest while
/// messages commit, a room freed and joined again between messages, a catch-up of whole
/// pages, and clients that arrive while the LISTEN connection is being killed.
@Suite(.serialized, .enabled(if: TestDatabase.enabled, Comment(rawValue: TestDatabase.howToRun)))
struct ResumingEdgeCasesTests {
    /// Inserts and notifies one message as `EventHistory.append` does, on the test's own
    /// connection (inside whatever transaction it has open).
    static func append(
        _ message: String, to room: String, channel: String, on connection: PostgresConnection
    ) async throws {
        _ = try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended(\(channel) || '/' || \(room), 0))",
            logger: TestDatabase.logger)
        let rows = try await connection.query(
            """
            WITH event AS (
                INSERT INTO fanout_events (channel, room, message) VALUES (\(channel), \(room), \(message))
                RETURNING id
            )
            SELECT pg_notify(\(channel), \(room) || E'\\t' || id::text || E'\\t' || \(message))::text FROM event
            """, logger: TestDatabase.logger)
        for try await _ in rows {}
    }

    @Test(
        "a client with an id past the room's newest gets a message committed after it joined, while its catch-up read waited"
    )
    func idPastTheNewestKeepsAMessageCommittedDuringTheCatchUp() async throws {
        // An id past the room's newest says nothing of what the client has: a message
        // committed between the client's join and the catch-up's reading of the newest id
        // must reach it (brought down to that newest, the id hid such a message).
        try await withHangGuard {
            let settings = try TestDatabase.require()
            try await withInstances(["ahead"]) { instances in
                let instance = instances[0]
                let (channel, room) = (instance.server.configuration.channel, "ahead")
                var keeper = try await instance.readyClient(of: room)
                try await instance.post("before", to: room)
                #expect(try await keeper.messages(1, "the keeper").map(\.text) == ["before"])
                try await TestDatabase.withConnection(settings) { database in
                    _ = try await database.query("BEGIN", logger: TestDatabase.logger)
                    // Holds the table: the catch-up's reads wait until the commit below.
                    _ = try await database.query(
                        "LOCK TABLE fanout_events IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.logger)
                    // `ready` is written before the catch-up: the client has joined the room.
                    var client = try await instance.readyClient(of: room, lastEventID: "9000000000000000000")
                    try await Self.append("during", to: room, channel: channel, on: database)
                    _ = try await database.query("COMMIT", logger: TestDatabase.logger)
                    // "during" was committed after the client joined: it is one of the room's
                    // next messages, which an id past the newest must not hide.
                    try await instance.post("after", to: room)
                    try await instance.post("later", to: room)
                    #expect(
                        try await keeper.messages(3, "the keeper").map(\.text) == ["during", "after", "later"])
                    let received = try await client.messages(2, "the client from the future").map(\.text)
                    #expect(received == ["during", "after"])
                    client.close()
                }
                keeper.close()
            }
        }
    }

    @Test(
        "a room freed, messaged while free, and joined again: reconnects from before, during and after are caught up without a gap"
    )
    func roomFreedAndJoinedAgainBetweenMessagesLeavesNoGap() async throws {
        try await withHangGuard {
            try await withInstances(["rejoin"]) { instances in
                let instance = instances[0]
                // Keeps the LISTEN connection (and its local history) up while "r" comes and goes.
                var keeper = try await instance.readyClient(of: "keep")
                var first = try await instance.readyClient(of: "r")
                try await instance.post("r1", to: "r")
                try await instance.post("r2", to: "r")
                let r12 = try await first.messages(2, "the first client")
                first.close()
                try await eventually("room r is freed") { try await instance.subscribers(of: "r") == 0 }
                // r3 arrives while r has no subscriber; k1, after it, tells when it has arrived.
                try await instance.post("r3", to: "r")
                try await instance.post("k1", to: "keep")
                #expect(try await keeper.messages(1, "the keeper").map(\.text) == ["k1"])
                var second = try await instance.readyClient(of: "r")
                try await instance.post("r4", to: "r")
                let r4 = try await second.messages(1, "the second client")
                #expect(r4.map(\.text) == ["r4"])

                var fromR2 = try await instance.readyClient(of: "r", lastEventID: r12[1].id)
                #expect(try await fromR2.messages(2, "back from r2").map(\.text) == ["r3", "r4"])
                var fromR1 = try await instance.readyClient(of: "r", lastEventID: r12[0].id)
                #expect(try await fromR1.messages(3, "back from r1").map(\.text) == ["r2", "r3", "r4"])

                // Freed and joined again with no message in between: what the instance held is
                // still every message since, and the next one follows it.
                for client in [second, fromR2, fromR1] { client.close() }
                try await eventually("room r is freed again") { try await instance.subscribers(of: "r") == 0 }
                var third = try await instance.readyClient(of: "r")
                try await instance.post("r5", to: "r")
                let r5 = try await third.messages(1, "the third client")
                #expect(r5.map(\.text) == ["r5"])
                var fromR3 = try await instance.readyClient(of: "r", lastEventID: String(Int64(r4[0].id)! - 1))
                var fromR4 = try await instance.readyClient(of: "r", lastEventID: r4[0].id)
                #expect(try await fromR4.messages(1, "back from r4").map(\.text) == ["r5"])
                #expect(try await fromR3.messages(2, "back from just before r4").map(\.text) == ["r4", "r5"])
                try await instance.post("r6", to: "r")
                for var client in [third, fromR3, fromR4] {
                    #expect(try await client.messages(1, "a client of r").map(\.text) == ["r6"])
                    client.close()
                }
                keeper.close()
            }
        }
    }

    @Test("a client 1000 messages behind is caught up in whole pages, from the table alone or with the local history")
    func catchUpOfWholePages() async throws {
        try await withHangGuard {
            let settings = try TestDatabase.require()
            try await withInstances(["near", "far"], recentMessagesPerRoom: 4) { instances in
                let (near, far) = (instances[0], instances[1])
                let room = "pages"
                var keeper = try await near.readyClient(of: room)
                try await near.post("m0", to: room)
                let m0 = try await keeper.messages(1, "the keeper")
                try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.notifyBurst(
                        database, channel: near.server.configuration.channel, room: room, count: 1000, padding: 10)
                }
                let burst = try await keeper.messages(1000, "the keeper")
                // `near` holds the last 4: 996 from the table (a page of 500, one of 496), then
                // memory. `far` has no subscriber in the room: 1000 from the table, two full
                // pages and an empty one.
                var onNear = try await near.readyClient(of: room, lastEventID: m0[0].id)
                var onFar = try await far.readyClient(of: room, lastEventID: m0[0].id)
                #expect(try await onNear.messages(1000, "back on near").map(\.id) == burst.map(\.id))
                #expect(try await onFar.messages(1000, "back on far").map(\.id) == burst.map(\.id))
                try await near.post("next", to: room)
                for var client in [keeper, onNear, onFar] {
                    #expect(try await client.messages(1, "a client").map(\.text) == ["next"])
                    client.close()
                }
            }
        }
    }

    /// Each reconnect got, after `ready`, exactly the messages that follow its id in the
    /// table (as many as it read), and nothing before `ready`; prints how many did not.
    static func expectEachArrival(_ all: [Arrival], continuing ids: [Int64]) throws {
        var failed = 0
        for arrival in all {
            let start = try #require(ids.firstIndex(of: arrival.from)) + 1
            let expected = Array(ids[start..<min(start + arrival.ids.count, ids.count)])
            if arrival.ids != expected || !arrival.problems.isEmpty { failed += 1 }
            #expect(arrival.problems.isEmpty, "back from \(arrival.from): \(arrival.problems)")
            #expect(arrival.ids == expected, "back from \(arrival.from): \(arrival.ids)")
        }
        print("reconnects: \(all.count), with a gap or a message before ready: \(failed)")
    }

    /// What one reconnecting client of the storm saw.
    struct Arrival: Sendable {
        var from: Int64
        var ids: [Int64]
        /// Messages written before `ready`, and any other oddity.
        var problems: [String]
    }

    @Test(
        "clients that reconnect with an id while the LISTEN connection is killed again and again get ready first, then the messages after their id, without a gap"
    )
    func reconnectsDuringListenKillsLeaveNoGap() async throws {
        let (kills, connectors, window) = (30, 8, 5)
        try await withHangGuard(seconds: 150) {
            let settings = try TestDatabase.require()
            try await withInstances(["storm", "poster"]) { instances in
                let (storm, poster) = (instances[0], instances[1])
                let room = "storm"
                let seen = Locked<[Int64]>([])
                let done = Locked(false)
                let arrivals = Locked<[Arrival]>([])
                try await withThrowingTaskGroup(of: Void.self) { keeping in
                    // The keeper stays on `storm` throughout, and ends with every message.
                    let (ready, readySink) = AsyncStream.makeStream(of: Void.self)
                    keeping.addTask {
                        var keeper = try await storm.readyClient(of: room)
                        readySink.yield()
                        while true {
                            guard let event = try await keeper.next() else {
                                throw TestFailure("the keeper's stream ended")
                            }
                            guard event.event == "message" else { continue }
                            if event.data == "end" { break }
                            seen.withLock { $0.append(Int64(event.id!)!) }
                        }
                        keeper.close()
                    }
                    var waiting = ready.makeAsyncIterator()
                    await waiting.next()
                    // The keeper has an id before the first kill (one without resumes from now).
                    try await poster.post("start", to: room)
                    try await eventually("the keeper has a message") { seen.withLock { !$0.isEmpty } }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        // Posts, two at a time, until the storm is over.
                        for lane in 0..<2 {
                            group.addTask {
                                var n = 0
                                while !done.withLock({ $0 }) {
                                    try await poster.post("p\(lane).\(n)", to: room)
                                    n += 1
                                }
                            }
                        }
                        // Clients that come back with an id 20 messages old, over and over.
                        for _ in 0..<connectors {
                            group.addTask {
                                while !done.withLock({ $0 }) {
                                    guard let from = seen.withLock({ $0.count > 20 ? $0[$0.count - 20] : nil })
                                    else {
                                        try await Task.sleep(for: .milliseconds(5))
                                        continue
                                    }
                                    let arrival = try await Self.reconnect(
                                        to: storm, room: room, from: from, messages: window)
                                    arrivals.withLock { $0.append(arrival) }
                                }
                            }
                        }
                        // Kills the LISTEN connection of `storm`, and waits until it listens again.
                        try await TestDatabase.withConnection(settings) { database in
                            for _ in 0..<kills {
                                try await eventually("storm listens") { try await storm.stats().listening }
                                let opened = try await storm.stats().listenConnectionsOpened
                                let backends = try await TestDatabase.backends(
                                    database, applicationName: storm.listenApplicationName)
                                for backend in backends {
                                    _ = try await TestDatabase.terminate(database, pid: backend.pid)
                                }
                                try await eventually("storm reconnects") {
                                    let stats = try await storm.stats()
                                    return stats.listening && stats.listenConnectionsOpened > opened
                                }
                            }
                        }
                        done.withLock { $0 = true }
                        try await group.waitForAll()
                    }
                    // After every other post: tells the keeper it has everything.
                    try await poster.post("end", to: room)
                    try await keeping.waitForAll()
                }

                let table = try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.messages(
                        database, channel: storm.server.configuration.channel, room: room)
                }
                let ids = table.map(\.id)
                #expect(seen.withLock { $0 } == Array(ids.dropLast()), "the keeper, through \(kills) kills")
                let all = arrivals.withLock { $0 }
                #expect(all.count > kills, "reconnects during the storm")
                try Self.expectEachArrival(all, continuing: ids)
            }
        }
    }

    @Test(
        "clients that reconnect with an id while a burst is being delivered and the LISTEN connection is killed get ready first, then no gap"
    )
    func reconnectsDuringABurstCutByAKillLeaveNoGap() async throws {
        let (kills, connectors, window) = (25, 16, 5)
        try await withHangGuard(seconds: 150) {
            let settings = try TestDatabase.require()
            try await withInstances(["burst"], reconnectDelay: .milliseconds(300)) { instances in
                let instance = instances[0]
                let (channel, room) = (instance.server.configuration.channel, "burst")
                var keeper = try await instance.readyClient(of: room)
                var all: [Arrival] = []
                var kept: [Int64] = []
                try await TestDatabase.withConnection(settings) { database in
                    for _ in 0..<kills {
                        try await eventually("the instance listens") { try await instance.stats().listening }
                        try await instance.post("mark", to: room)
                        let from = try await keeper.messagesAcrossInterruptions(1, "the keeper")[0].id
                        kept.append(Int64(from)!)
                        let opened = try await instance.stats().listenConnectionsOpened
                        let pids = try await TestDatabase.backends(
                            database, applicationName: instance.listenApplicationName
                        ).map(\.pid)
                        let arrivals = try await withThrowingTaskGroup(of: Arrival.self) { group in
                            for _ in 0..<connectors {
                                group.addTask {
                                    try await Task.sleep(for: .microseconds(Int.random(in: 0..<4000)))
                                    return try await Self.reconnect(
                                        to: instance, room: room, from: Int64(from)!, messages: window)
                                }
                            }
                            // A burst, and the LISTEN connection killed while it is delivered.
                            try await TestDatabase.notifyBurst(
                                database, channel: channel, room: room, count: 300, padding: 200)
                            for pid in pids { _ = try await TestDatabase.terminate(database, pid: pid) }
                            return try await group.reduce(into: []) { $0.append($1) }
                        }
                        all += arrivals
                        try await eventually("the instance listens again") {
                            try await instance.stats().listenConnectionsOpened > opened
                        }
                        // The keeper takes the burst (after its interruption, from the table).
                        kept += try await keeper.messagesAcrossInterruptions(300, "the keeper").map {
                            Int64($0.id)!
                        }
                    }
                }
                keeper.close()
                let ids = try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.messages(database, channel: channel, room: room)
                }.map(\.id)
                #expect(kept == ids, "the keeper, through \(kills) kills")
                try Self.expectEachArrival(all, continuing: ids)
            }
        }
    }

    /// Connects with `Last-Event-ID: from`, reads until `messages` messages, and closes.
    static func reconnect(
        to instance: RunningInstance, room: String, from: Int64, messages: Int
    ) async throws -> Arrival {
        var client = try await SSEClient.connect(
            port: instance.port, path: "/rooms/\(room)/events", lastEventID: String(from))
        var arrival = Arrival(from: from, ids: [], problems: [])
        var ready = false
        while arrival.ids.count < messages {
            guard let event = try await client.next() else {
                arrival.problems.append("the stream ended")
                break
            }
            switch event.event {
            case "ready": ready = true
            case "message":
                if !ready { arrival.problems.append("message \(event.id ?? "?") before ready") }
                arrival.ids.append(Int64(event.id!)!)
            case "evicted": arrival.problems.append("evicted")
            default: break
            }
        }
        client.close()
        return arrival
    }
}

/// A value behind a lock, shared by the tasks of a test.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { self.mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { self.mutex.withLock { body(&$0) } }
}

extension SSEClient {
    /// The next `count` messages, past `interrupted` and `resumed`.
    mutating func messagesAcrossInterruptions(_ count: Int, _ context: String) async throws -> ResumingTests.Received {
        var received: ResumingTests.Received = []
        while received.count < count {
            guard let event = try await self.next() else { throw TestFailure("\(context): the stream ended") }
            switch event.event {
            case "interrupted", "resumed": continue
            case "message": received.append((try #require(event.id, "\(context): an id"), event.data))
            default: throw TestFailure("\(context): unexpected \(event)")
            }
        }
        return received
    }
}
