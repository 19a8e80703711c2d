import AsyncMulticast
import Foundation
import Testing

@testable import ChatRooms

extension BroadcastServerTests.ChatRoomsTests {
    /// Three readers in a room, one of whom says 300 messages of 1 kB, each once the
    /// previous one came back to it (so that a reader is never a burst behind): first alone,
    /// then next to a client that never reads its socket (4 kB buffers on both sides). The
    /// staller's writes fill the buffers, its subscription falls 64 behind and it is evicted;
    /// its handler, stuck in a write, learns it through `waitForEviction()` and closes the
    /// connection (not writable: a close frame would queue behind what it does not read). The
    /// readers get every message, in order, and `left` with `evicted: true`. The rates are
    /// printed, not asserted.
    @Test func aClientThatNeverReadsIsEvictedWhileTheOthersReceiveEverything() async throws {
        try await ChatTestServer.run { server in
            var readers = [try await server.join("busy", as: "ann"), try await server.join("busy", as: "bob")]
            readers.append(try await server.join("busy", as: "cid"))
            let text = String(repeating: "x", count: 1000)
            let count = 300

            let alone = try await Self.converse(&readers, count: count, text: text, round: "alone")
            var staller = try await server.join("busy", as: "staller", receiveBufferSize: 4096)
            let withStaller = try await Self.converse(&readers, count: count, text: text, round: "staller")
            for index in readers.indices {
                try await readers[index].read("\(readers[index].name) to hear the staller leave") {
                    $0.contains { $0.type == "left" }
                }
                #expect(
                    readers[index].frames.last { $0.type == "left" }
                        == ChatFrame(type: "left", user: "staller", present: 3, evicted: true))
            }
            #expect(server.server.evictions == 1)
            #expect(try await server.presence(in: "busy") == RoomPresence(room: "busy", present: 3, live: true))

            // Only now does the staller read: what reached its socket, in order, then the end
            // of the connection, without a close frame.
            try await staller.read("the staller to the end") { _ in false }
            let got = staller.messages
            let said = (1...count).map { "ann: staller \($0) \(text)" }
            #expect(got.count < count, "it did not get everything")
            #expect(got == Array(said.prefix(got.count)), "a prefix, without a gap")
            #expect(staller.reader.closed)
            #expect(staller.reader.closeCode == nil, "closed at once, not sent a close frame")
            print(
                "[chat 4] readers alone: \(alone) messages/s per reader; with a client that never reads:"
                    + " \(withStaller) (it got \(got.count) of \(count), in order, then its connection closed;"
                    + " the readers got all \(count))")
            for index in readers.indices { try await readers[index].leave() }
            try await server.waitUntilFreed("busy")
        }
    }

    /// `readers[0]` says `count` messages of `text`, each once its previous one came back to
    /// it; every reader receives all of them, in order. Returns the messages per second.
    static func converse(_ readers: inout [ChatClient], count: Int, text: String, round: String) async throws -> Int {
        let speaker = readers[0].name
        let said = (1...count).map { "\(speaker): \(round) \($0) \(text)" }
        let clock = ContinuousClock()
        let start = clock.now
        let listeners = readers.dropFirst()
        async let heard: [ChatClient] = withThrowingTaskGroup(of: ChatClient.self) { group in
            for listener in listeners {
                group.addTask {
                    var listener = listener
                    try await listener.read("\(listener.name) to hear \(round)") {
                        $0.count { $0.type == "message" && $0.text?.hasPrefix("\(round) ") == true } >= count
                    }
                    return listener
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for n in 1...count {
            try readers[0].say("\(round) \(n) \(text)")
            try await readers[0].read("\(speaker) to hear \(round) \(n) back") {
                $0.last { $0.type == "message" }?.text == "\(round) \(n) \(text)"
            }
        }
        let others = try await heard
        let elapsed = clock.now - start
        readers = [readers[0]] + readers.dropFirst().map { reader in others.first { $0.name == reader.name }! }
        for reader in readers {
            #expect(
                reader.messages.filter { $0.hasPrefix("\(speaker): \(round) ") } == said,
                "\(reader.name) got every message of \(round), in order")
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return Int(Double(count) / seconds)
    }

    /// A client that reads, but a burst (500 messages sent in-process at once) takes past
    /// the hard limit (8): its connection is writable, so its writer writes what its
    /// subscription still handed it, without a gap, then a close frame 1008 (policy
    /// violation); the room, whose only client it was, is freed.
    @Test func aReadingClientPastTheHardLimitGetsACloseFrame1008() async throws {
        var configuration = ChatTestServer.configuration
        configuration.hardLimit = 8
        configuration.softLimit = 4
        try await ChatTestServer.run(configuration) { server in
            var client = try await server.join("burst", as: "ann")
            let count = 500
            // Encoded first, so that the sends come faster than the client's writer can write.
            let frames = (1...count).map { ChatFrame(type: "message", user: "bot", text: "\($0)").json }
            for frame in frames { server.server.rooms.send(frame, to: "burst") }
            try await client.read("ann to the end") { _ in false }
            let got = client.messages
            #expect(got.count < count)
            #expect(got == (1...count).prefix(got.count).map { "bot: \($0)" }, "a prefix, without a gap")
            #expect(client.reader.closeCode == 1008)
            #expect(client.reader.closed)
            #expect(server.server.evictions == 1)
            try await server.waitUntilFreed("burst")
            print("[chat 5] got \(got.count) of \(count) messages in order, then a close frame 1008 and the end")
        }
    }
}
