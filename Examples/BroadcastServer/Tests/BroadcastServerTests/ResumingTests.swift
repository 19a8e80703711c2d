import Broadcast
import Testing

extension BroadcastServerTests {
    /// What one connection of a resuming client read: its messages' ids, and its gaps.
    struct ResumedRead: Sendable, Equatable {
        var ids: [Int] = []
        var gaps: [String] = []
    }

    /// Reads `connection`'s messages (and `event: gap`s) until `done` holds, or the
    /// response ends.
    static func readMessages(
        of connection: SSEClient, until done: @Sendable (ResumedRead) -> Bool
    ) async -> ResumedRead {
        var read = ResumedRead()
        var items = connection.items.makeAsyncIterator()
        while !done(read), let item = await items.next() {
            switch item {
            case .event("message", let id, _): read.ids.append(Int(id ?? "") ?? -1)
            case .event("gap", let id, let data): read.gaps.append("id \(id ?? "nil") \(data)")
            default: break  // `: connected`, ticks, heartbeats
            }
        }
        return read
    }

    /// 10b. `--history` (the messages kept for `Last-Event-ID`): 1024 by default, a whole
    /// number >= 0.
    @Test func commandLineSetsTheHistory() throws {
        #expect(BroadcastConfiguration().history == 1024)
        #expect(try BroadcastConfiguration(arguments: ["--history", "0"]).history == 0)
        for value in ["-1", "many"] {
            #expect(throws: BroadcastConfiguration.UsageError.self, "\(value)") {
                try BroadcastConfiguration(arguments: ["--history", value])
            }
        }
    }

    /// 15. 50 clients read a stream of 60 messages (the history keeps all 60). Each one
    /// resets its connection (SO_LINGER 0, then close: an RST) after a random number of
    /// messages from 1 to 59, while the server may still be writing to it and the messages
    /// are still being posted, then reconnects with `Last-Event-ID:` the last id it read
    /// and reads on until it has 60. Every client ends with exactly 0..<60, in order: no
    /// duplicate, no gap, and no `event: gap`.
    @Test func clientsResetMidStreamResumeWithLastEventIDWithoutDuplicatesOrGaps() async throws {
        let clientCount = 50
        let total = 60
        var configuration = TestServer.configuration
        configuration.history = total
        let cuts = (0..<clientCount).map { _ in Int.random(in: 1..<total) }
        try await TestServer.run(configuration) { server in
            let clients = try await server.connectClients(clientCount)
            let results = try await withTimeout(.seconds(30), "\(clientCount) clients to resume") {
                try await withThrowingTaskGroup(of: (Int, ResumedRead, ResumedRead).self) { group in
                    for (index, client) in clients.enumerated() {
                        let cut = cuts[index]
                        group.addTask {
                            let before = await Self.readMessages(of: client) { $0.ids.count == cut }
                            try await client.reset()
                            let last = try #require(before.ids.last, "client \(index) read nothing")
                            let resumed = try await SSEClient.connect(port: server.port, lastEventID: "\(last)")
                            let after = await Self.readMessages(of: resumed) { before.ids.count + $0.ids.count >= total }
                            await resumed.close()
                            return (index, before, after)
                        }
                    }
                    // Posted while the clients read, reset and reconnect.
                    try await HTTPConnection.with(port: server.port) { http in
                        for n in 0..<total { _ = try await http.post("message \(n)") }
                    }
                    return try await group.reduce(into: [:]) { $0[$1.0] = ($1.1, $1.2) }
                }
            }
            #expect(results.count == clientCount)
            for (index, (before, after)) in results.sorted(by: { $0.key < $1.key }) {
                #expect(before.ids.count == cuts[index], "client \(index)")
                #expect(before.ids + after.ids == Array(0..<total), "client \(index) cut after \(cuts[index])")
                #expect(before.gaps.isEmpty && after.gaps.isEmpty, "client \(index): \(after.gaps)")
            }
            print(
                "[15] \(clientCount) clients reset (RST) after 1 to \(total - 1) of \(total) messages"
                    + " (cuts \(cuts.min()!)...\(cuts.max()!)), resumed with Last-Event-ID: each got 0..<\(total) exactly once, in order"
            )
        }
    }

    /// 16. The history keeps the latest 4 messages. A client reads message 0 and resets its
    /// connection; 9 more are posted (ids 1...9; the history keeps 6...9). It reconnects
    /// with `Last-Event-ID: 0`: its first event is `event: gap` with `id: 5` and data
    /// `{"after":0,"before":6}`, then messages 6...9 and nothing else. The same through the
    /// `lastEventId` query parameter, for clients that cannot set headers. A client that
    /// resumes after the gap's id (5) gets 6...9 without a gap.
    @Test func clientResumingBehindTheHistoryGetsTheGapEventFirstThenTheRest() async throws {
        var configuration = TestServer.configuration
        configuration.history = 4
        try await TestServer.run(configuration) { server in
            let client = try #require(try await server.connectClients(1).first)
            try await HTTPConnection.with(port: server.port) { _ = try await $0.post("message 0") }
            let before = try await withTimeout(.seconds(10), "message 0") {
                await Self.readMessages(of: client) { $0.ids.count == 1 }
            }
            #expect(before.ids == [0])
            try await client.reset()
            try await HTTPConnection.with(port: server.port) { http in
                for n in 1...9 { _ = try await http.post("message \(n)") }
            }
            // The history holds the latest 4.
            #expect(server.hub.messages.replayCache.map(\.id) == [6, 7, 8, 9])

            let expectedGap = #"id 5 {"after":0,"before":6}"#
            for (how, target, header) in [
                ("Last-Event-ID", "/events", "0" as String?), ("lastEventId", "/events?lastEventId=0", nil),
            ] {
                let resumed = try await SSEClient.connect(port: server.port, target: target, lastEventID: header)
                let items = try await withTimeout(.seconds(10), "the resumption (\(how))") {
                    var items = resumed.items.makeAsyncIterator()
                    var got: [String] = []
                    while got.count < 5, let item = await items.next() {
                        switch item {
                        case .event("message", let id, let data): got.append("message \(id ?? "nil") \(data)")
                        case .event("gap", let id, let data): got.append("id \(id ?? "nil") \(data)")
                        default: break
                        }
                    }
                    return got
                }
                await resumed.close()
                #expect(items == [expectedGap] + (6...9).map { "message \($0) message \($0)" }, "\(how)")
            }

            // Resuming after the gap event's id: nothing lost, so no gap.
            let after = try await SSEClient.connect(port: server.port, lastEventID: "5")
            let read = try await withTimeout(.seconds(10), "the resumption after 5") {
                await Self.readMessages(of: after) { $0.ids.count == 4 }
            }
            await after.close()
            #expect(read == ResumedRead(ids: [6, 7, 8, 9], gaps: []))
            print("[16] history 4, resumed after 0 with 9 more posted: `event: gap` id 5 {\"after\":0,\"before\":6} first, then 6...9 (header and query)")
        }
    }
}
