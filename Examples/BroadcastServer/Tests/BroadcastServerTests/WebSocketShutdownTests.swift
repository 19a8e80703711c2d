import Broadcast
import Foundation
import Testing

extension BroadcastServerTests {
    /// 13. The executable as a child process, 4 WebSocket clients on `GET /ws` that do not
    /// read while 200 messages of 1 kB are posted (with 4 kB socket buffers, most of them are
    /// still in the server when the signal arrives: in the client's subscription, or in a
    /// write that waits for the client), then SIGTERM. The messages' `DrainingService` finishes
    /// the room and waits until every client has read it to the end, before the HTTP server
    /// stops (and with it, hummingbird-websocket closes every WebSocket). Each client, now
    /// reading, receives `connected`, the 200 messages in order, then a close frame with 1000
    /// (normal closure), then the end of the connection; the process exits with status 0
    /// within the shutdown deadline (10 s).
    @Test func sigtermDrainsEveryWebSocketBeforeClosingIt() async throws {
        let server = try await ServerProcess.start(
            ["--send-buffer", "4096", "--shutdown-deadline", "10"], within: .seconds(30))
        defer { server.kill() }  // if the test failed before it exited
        var connected = try (0..<4).map { _ in
            WebSocketReader(try RawWebSocketClient(port: server.port, receiveBufferSize: 4096))
        }
        for index in connected.indices {
            try await connected[index].read(within: .seconds(10), "client \(index) connected") {
                $0.texts == ["connected"]
            }
        }
        #expect(try await fetchStats(port: server.port).messageSubscribers == 4)

        // Accepted (202) means held for every client: each must receive them before the close.
        let text = String(repeating: "x", count: 1000)
        let posted = try await HTTPConnection.with(port: server.port) { http in
            var ids: [Int] = []
            for n in 0..<200 { ids.append(try await http.post("\(n) \(text)")) }  // ids from 0
            return ids
        }

        let clock = ContinuousClock()
        let signalled = clock.now
        server.terminate()
        // Only now do the clients read, all at once, each until its connection ends.
        let waiting = connected
        let results = try await withTimeout(.seconds(10), "every WebSocket to close after SIGTERM") {
            try await withThrowingTaskGroup(of: (Int, WebSocketReader).self) { group in
                for (index, reader) in waiting.enumerated() {
                    group.addTask {
                        var reader = reader
                        try await reader.read(within: .seconds(10), "client \(index) to the end") { _ in false }
                        return (index, reader)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
        }
        let readers = waiting.indices.compactMap { results[$0] }
        let exit = try await server.waitForExit(within: .seconds(10))
        let exited = clock.now - signalled
        #expect(exit == ServerProcess.Exit(status: 0, exited: true), "it printed:\n\(server.printed)")
        #expect(exited < .seconds(10))

        #expect(readers.count == 4)
        for (index, reader) in readers.enumerated() {
            #expect(reader.texts.first == "connected", "client \(index)")
            let messages = reader.texts.dropFirst().compactMap {
                try? JSONDecoder().decode(Message.self, from: Data($0.utf8))
            }
            #expect(messages.count == reader.texts.count - 1, "client \(index): only messages after `connected`")
            #expect(messages.map(\.id) == posted, "client \(index): every message posted before the signal, in order")
            #expect(messages.allSatisfy { $0.text == "\($0.id) \(text)" }, "client \(index)")
            #expect(reader.closeCode == 1000, "client \(index): a normal closure")
            #expect(reader.closed, "client \(index): then the end of the connection")
        }
        print(
            "[13] SIGTERM to the server process (pid \(server.pid)) with 4 WebSocket clients that had not read"
                + " \(posted.count) messages of 1 kB: then each got \(readers.map { $0.texts.count - 1 }) of them, in order,"
                + " and a close frame \(readers.map { $0.closeCode.map(String.init) ?? "none" });"
                + " the process exited with status \(exit.status) after \(exited.ms) (limit 10 s)")
    }
}
