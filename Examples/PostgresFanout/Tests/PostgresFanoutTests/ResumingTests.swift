import Foundation
import PostgresFanout
import Testing

/// Clients that reconnect with `Last-Event-ID`, to the instance they left or to another: each
/// ends with exactly the messages of its room in the table, in order, once each.
@Suite(.serialized, .enabled(if: TestDatabase.enabled, Comment(rawValue: TestDatabase.howToRun)))
struct ResumingTests {
    /// What one client received: each message's id and text, in order.
    typealias Received = [(id: String, text: String)]

    /// Three posters post at once, through both instances, so that posts to the room race:
    /// a room's ids must still arrive in order (the advisory lock of `EventHistory`), or a
    /// client would take a late smaller id for one it has.
    @Test(
        "clients cut mid-stream (RST) reconnect round-robin to the other instance and end with exactly the table's messages"
    )
    func clientsCutMidStreamResumeOnTheOtherInstance() async throws {
        let (clientCount, posters, perPoster, room) = (30, 3, 40, "resume")
        let total = posters * perPoster
        let cuts = (0..<clientCount).map { _ in Int.random(in: 1..<total) }
        try await withHangGuard(seconds: 90) {
            let settings = try TestDatabase.require()
            try await withInstances(["a", "b"]) { instances in
                let results = try await withThrowingTaskGroup(of: (Int, Received, Received).self) { group in
                    // Each client connects in its own task and says when it is ready.
                    let (ready, readySink) = AsyncStream.makeStream(of: Void.self)
                    for index in 0..<clientCount {
                        let (first, second) = (instances[index % 2], instances[(index + 1) % 2])
                        let cut = cuts[index]
                        group.addTask {
                            var client = try await first.readyClient(of: room)
                            readySink.yield()
                            let before = try await client.messages(cut, "client \(index) on \(first.name)")
                            // Cut while the messages are still being posted and written to it.
                            try await client.reset()
                            var resumed = try await second.readyClient(of: room, lastEventID: before.last!.id)
                            let after = try await resumed.messages(
                                total - cut, "client \(index) resumed on \(second.name)")
                            resumed.close()
                            return (index, before, after)
                        }
                    }
                    var waiting = ready.makeAsyncIterator()
                    for _ in 0..<clientCount { await waiting.next() }
                    // Each poster alternately through each instance, one post after another.
                    try await withThrowingTaskGroup(of: Void.self) { posting in
                        for poster in 0..<posters {
                            posting.addTask {
                                for n in 0..<perPoster {
                                    try await instances[(poster + n) % 2].post("message \(poster).\(n)", to: room)
                                }
                            }
                        }
                        try await posting.waitForAll()
                    }
                    return try await group.reduce(into: [:]) { $0[$1.0] = ($1.1, $1.2) }
                }

                let table = try await TestDatabase.withConnection(settings) { database in
                    try await TestDatabase.messages(
                        database, channel: instances[0].server.configuration.channel, room: room)
                }
                let posted = (0..<posters).flatMap { poster in (0..<perPoster).map { "message \(poster).\($0)" } }
                #expect(Set(table.map(\.text)) == Set(posted) && table.count == total)
                let expected = table.map { "\($0.id) \($0.text)" }
                #expect(results.count == clientCount)
                for (index, (before, after)) in results.sorted(by: { $0.key < $1.key }) {
                    #expect(before.count == cuts[index], "client \(index)")
                    #expect(
                        (before + after).map { "\($0.id) \($0.text)" } == expected,
                        "client \(index), cut after \(cuts[index]) of \(total)")
                }
                // Each reconnect was caught up once: from the other instance's local history
                // (which held every message, the room being live there all along) or, if
                // that room had no subscriber for a moment, with the table.
                var catchUps: [RunningInstance.CatchUpStats] = []
                for instance in instances { catchUps.append(try await instance.catchUpStats()) }
                #expect(catchUps.map { $0.catchUpsFromMemory + $0.catchUpsFromTable }.reduce(0, +) == clientCount)
            }
        }
    }

    @Test(
        "a client that comes back after its room was freed gets what it missed from the table, then the live messages once"
    )
    func clientComingBackToAFreedRoomCatchesUpFromTheTable() async throws {
        try await withHangGuard {
            try await withInstances(["alone"]) { instances in
                let instance = instances[0]
                var client = try await instance.readyClient(of: "quiet")
                try await instance.post("one", to: "quiet")
                try await instance.post("two", to: "quiet")
                let seen = try await client.messages(2, "the first client")
                #expect(seen.map(\.text) == ["one", "two"])
                client.close()
                // Nobody in the room, no LISTEN connection: nothing of the room is in memory.
                try await eventually("the room is freed and the LISTEN connection closed") {
                    let stats = try await instance.stats()
                    return stats.subscribers == 0 && stats.rooms == 0 && !stats.listening
                }
                try await instance.post("three", to: "quiet")
                try await instance.post("four", to: "quiet")

                // Back with the id of "two": "three" and "four" from the table, after `ready`,
                // then a live message, once.
                var back = try await instance.readyClient(of: "quiet", lastEventID: seen[1].id)
                var missed = try await back.messages(2, "the returning client")
                #expect(missed.map(\.text) == ["three", "four"])
                try await instance.post("five", to: "quiet")
                missed += try await back.messages(1, "the returning client")
                #expect(missed.map(\.text) == ["three", "four", "five"])
                #expect(missed.map { Int64($0.id)! } == missed.map { Int64($0.id)! }.sorted())

                // A client that cannot set headers passes `lastEventId` in the query.
                var byQuery = try await SSEClient.connect(
                    port: instance.port, path: "/rooms/quiet/events?lastEventId=\(seen[0].id)")
                try await byQuery.expect("ready", "the client with a query parameter")
                #expect(
                    try await byQuery.messages(4, "the client with a query parameter").map(\.text)
                        == ["two", "three", "four", "five"])

                // An id past the room's newest (another room's, or made up) and one that is
                // not a number: both start from now.
                var ahead = try await instance.readyClient(of: "quiet", lastEventID: "9000000000000000000")
                var garbled = try await instance.readyClient(of: "quiet", lastEventID: "not an id")
                try await instance.post("six", to: "quiet")
                #expect(try await ahead.messages(1, "the client from the future").map(\.text) == ["six"])
                #expect(try await garbled.messages(1, "the client with a garbled id").map(\.text) == ["six"])
                #expect(try await back.messages(1, "the returning client").map(\.text) == ["six"])
                #expect(try await byQuery.messages(1, "the client with a query parameter").map(\.text) == ["six"])
                // The room had no local history when "back" came (nobody was in it), and held only
                // "five" when the query client came: both read the table, as did the client
                // from the future (to learn the room's newest id); the garbled one had no id.
                #expect(try await instance.catchUpStats() == .init(catchUpsFromMemory: 0, catchUpsFromTable: 3))

                for client in [back, byQuery, ahead, garbled] { client.close() }
            }
        }
    }

    @Test(
        "an id the instance still holds is caught up from memory; an older one gets the older part from the table, then memory"
    )
    func catchUpFromTheLocalHistoryAndTheTable() async throws {
        try await withHangGuard {
            // Each instance keeps the latest 4 messages of each live room.
            try await withInstances(["near", "far"], recentMessagesPerRoom: 4) { instances in
                let (near, far) = (instances[0], instances[1])
                // A client of `far` keeps the room live there: `far` records its messages.
                var keeper = try await far.readyClient(of: "history")
                var leaving = try await near.readyClient(of: "history")
                try await near.post("m1", to: "history")
                let first = try await leaving.messages(1, "the leaving client")
                leaving.close()
                for n in 2...8 { try await near.post("m\(n)", to: "history") }
                let kept = try await keeper.messages(8, "the keeper")
                #expect(kept.map(\.text) == (1...8).map { "m\($0)" })

                // Back on `far`, which holds m5...m8: m2...m4 from the table, m5...m8 from
                // memory, then a live message, once.
                var back = try await far.readyClient(of: "history", lastEventID: first[0].id)
                #expect(try await back.messages(7, "the client back from m1").map(\.id) == kept.dropFirst().map(\.id))
                #expect(try await far.catchUpStats() == .init(catchUpsFromMemory: 0, catchUpsFromTable: 1))
                try await near.post("m9", to: "history")
                #expect(try await back.messages(1, "the client back from m1").map(\.text) == ["m9"])

                // Back from m7, which `far` holds (m6...m9): m8 and m9 from memory alone.
                var recent = try await far.readyClient(of: "history", lastEventID: kept[6].id)
                #expect(try await recent.messages(2, "the client back from m7").map(\.text) == ["m8", "m9"])
                #expect(try await far.catchUpStats() == .init(catchUpsFromMemory: 1, catchUpsFromTable: 1))
                // Caught up already: from memory, nothing to write; the next message live.
                let newest = try await keeper.messages(1, "the keeper")
                let current = try await far.readyClient(of: "history", lastEventID: newest[0].id)
                #expect(try await far.catchUpStats() == .init(catchUpsFromMemory: 2, catchUpsFromTable: 1))
                try await near.post("m10", to: "history")
                for var client in [current, recent, back, keeper] {
                    #expect(try await client.messages(1, "a client of far").map(\.text) == ["m10"])
                }
                for client in [current, recent, back, keeper] { client.close() }
            }
        }
    }
}

extension SSEClient {
    /// The next `count` events, which must all be messages with an id.
    mutating func messages(_ count: Int, _ context: String) async throws -> ResumingTests.Received {
        var received: ResumingTests.Received = []
        while received.count < count {
            let event = try await self.expect("message", "\(context), message \(received.count + 1) of \(count)")
            guard let id = event.id else { throw TestFailure("\(context): a message without an id: \(event)") }
            received.append((id, event.data))
        }
        return received
    }
}
