import AsyncMulticast
import Broadcast
import Foundation
import Testing

extension BroadcastServerTests {
    /// 14. Two WebSocket clients on `GET /ws`: one reads, one never reads its socket (4 kB
    /// buffers on both sides), while 300 messages of 1 kB are posted. The staller's handler
    /// gets stuck in a write, its subscription falls behind the hard limit (64) and is
    /// evicted; the handler's `waitForEviction()` watcher finds the connection unwritable and
    /// closes it at once, so the staller, reading only now, gets a gap-free prefix and then
    /// the end of the connection, without a close frame. Without the watcher (tried), the
    /// handler stayed in its write until the staller read again, then wrote it the rest of
    /// its backlog (77 messages) and a close frame 1008. The reader receives every message,
    /// in order.
    @Test func webSocketClientThatNeverReadsIsEvictedAndClosedAtOnce() async throws {
        var configuration = TestServer.configuration
        configuration.hardLimit = 64
        configuration.softLimit = 32
        configuration.sendBufferSize = 4096
        try await TestServer.run(configuration) { server in
            var reader = WebSocketReader(try RawWebSocketClient(port: server.port, receiveBufferSize: 1 << 20))
            var staller = WebSocketReader(try RawWebSocketClient(port: server.port, receiveBufferSize: 4096))
            try await reader.read(within: .seconds(10), "the reader connected") { $0.texts == ["connected"] }
            try await staller.read(within: .seconds(10), "the staller connected") { $0.texts == ["connected"] }

            let text = String(repeating: "x", count: 1000)
            let count = 300
            let messages = server.hub.messages
            async let evicted: Void = withTimeout(.seconds(20), "the staller's eviction") {
                for await subscribers in messages.subscriberCounts where subscribers == 1 { return }
            }
            let posted = try await HTTPConnection.with(port: server.port) { http in
                var ids: [Int] = []
                for n in 1...count { ids.append(try await http.post("\(n) \(text)")) }
                return ids
            }
            try await evicted
            try await reader.read(within: .seconds(20), "the reader to receive \(count)") {
                $0.texts.count > count
            }
            let received = reader.texts.dropFirst().compactMap {
                try? JSONDecoder().decode(Message.self, from: Data($0.utf8))
            }
            #expect(received.map(\.id) == posted, "the reader got every message, in order")

            // Only now does the staller read: what reached its socket, then the end.
            try await staller.read(within: .seconds(10), "the staller's connection to end") { _ in false }
            let prefix = staller.texts.dropFirst().compactMap {
                try? JSONDecoder().decode(Message.self, from: Data($0.utf8))
            }
            #expect(prefix.count < count, "it did not get everything")
            #expect(prefix.map(\.id) == Array(posted.prefix(prefix.count)), "a prefix, without a gap")
            #expect(staller.closed)
            #expect(staller.closeCode == nil, "closed at once, not sent a close frame")
            #expect(try await fetchStats(port: server.port).evictions == 1)
            print(
                "[14] a WebSocket client that never read: evicted at the hard limit (64) and closed at once, after"
                    + " \(prefix.count) of \(count) messages in order; the reader got all \(count)")
        }
    }
}
