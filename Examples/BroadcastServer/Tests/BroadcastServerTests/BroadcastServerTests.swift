import AsyncMulticast
import Broadcast
import NIOCore
import Testing

/// Every test runs the server in this process on 127.0.0.1 and a free port, and talks to it
/// over real TCP connections. The tests run one after the other: test 4 measures rates.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct BroadcastServerTests {
    /// 1. 100 concurrent clients receive every posted message, in order.
    @Test func hundredClientsReceiveEveryMessageInOrder() async throws {
        try await TestServer.run { server in
            let clients = try await server.connectClients(100)
            #expect(try await fetchStats(port: server.port).subscribers == 100)

            let count = 20
            let clock = ContinuousClock()
            let start = clock.now
            let received = try await withTimeout(.seconds(30), "100 clients to receive \(count) messages") {
                try await withThrowingTaskGroup(of: [String].self) { group in
                    for client in clients {
                        group.addTask {
                            var items = client.items.makeAsyncIterator()
                            var texts: [String] = []
                            while texts.count < count, let message = await items.next(named: "message") {
                                texts.append("\(message.id ?? "?"):\(message.data)")
                            }
                            return texts
                        }
                    }
                    try await HTTPConnection.with(port: server.port) { http in
                        for n in 1...count { _ = try await http.post("message \(n)") }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let elapsed = clock.now - start
            let expected = (1...count).map { "\($0):message \($0)" }
            #expect(received.count == 100)
            #expect(received.allSatisfy { $0 == expected })
            print("[1] 100 clients x \(count) messages: all received in order, in \(elapsed.ms)")
            for client in clients { await client.close() }
        }
    }

    /// 2. Half the clients close their connection abruptly: the server's subscriber count
    /// drops to the other half within a second. (The server notices a closed connection at
    /// once; the heartbeats of test 6 are for clients that vanish without closing.)
    @Test func abruptDisconnectsAreNoticedWithinASecond() async throws {
        try await TestServer.run { server in
            let clients = try await server.connectClients(100)
            #expect(try await fetchStats(port: server.port).subscribers == 100)

            let clock = ContinuousClock()
            let start = clock.now
            await withTaskGroup(of: Void.self) { group in
                for client in clients.prefix(50) { group.addTask { await client.close() } }
            }
            let closed = clock.now - start
            let noticed = try await server.waitForSubscribers(50, within: .seconds(1))
            let stats = try await fetchStats(port: server.port)
            #expect(stats.subscribers == 50)
            #expect(stats.messageSubscribers == 50)
            print("[2] 50 of 100 clients closed their connection (in \(closed.ms)): subscribers 100 -> 50")
            print("[2]   \(noticed.ms) after the last close (limit 1 s)")

            // The other 50 are not affected.
            let id = try await HTTPConnection.with(port: server.port) { try await $0.post("still here?") }
            let got = try await withTimeout(.seconds(10), "the remaining clients to receive a message") {
                try await withThrowingTaskGroup(of: String?.self) { group in
                    for client in clients.suffix(50) {
                        group.addTask {
                            var items = client.items.makeAsyncIterator()
                            return await items.next(named: "message")?.id
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            #expect(got == Array(repeating: "\(id)", count: 50))
            for client in clients.suffix(50) { await client.close() }
        }
    }

    /// 3. The upstream starts with the first client, stops when the last one leaves, and
    /// starts again (from 1) for the next client.
    @Test func upstreamStopsWithTheLastClientAndRestarts() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .milliseconds(50)
        try await TestServer.run(configuration) { server in
            var stats = try await fetchStats(port: server.port)
            #expect(stats.upstreamStarts == 0)
            #expect(stats.upstreamRunning == false)

            let first = try await server.connectClients(2)
            for client in first {
                var items = client.items.makeAsyncIterator()
                #expect(await items.next(named: "tick") != nil)
            }
            stats = try await fetchStats(port: server.port)
            #expect(stats.upstreamStarts == 1)
            #expect(stats.upstreamRunning == true)

            for client in first { await client.close() }
            try await server.waitForUpstream(UpstreamState(starts: 1, running: false), within: .seconds(5))
            stats = try await fetchStats(port: server.port)
            #expect(stats.subscribers == 0)
            #expect(stats.upstreamStarts == 1)
            #expect(stats.upstreamRunning == false)
            #expect(stats.latestTick == nil)  // the replayed tick expired with the upstream

            let again = try await server.connectClients(1)
            var items = again[0].items.makeAsyncIterator()
            let tick = await items.next(named: "tick")
            #expect(tick?.data == "1")  // a new iteration, counting afresh
            stats = try await fetchStats(port: server.port)
            #expect(stats.upstreamStarts == 2)
            #expect(stats.upstreamRunning == true)

            await again[0].close()
            try await server.waitForUpstream(UpstreamState(starts: 2, running: false), within: .seconds(5))
            print("[3] upstream: started with the first client, stopped with the last, restarted (starts: 2)")
        }
    }

    /// 4. A client that never reads does not slow the others down. Eight readers receive
    /// three rounds of 400 messages of 2 kB: alone, next to a client that never reads its
    /// socket, and next to a client that reads too slowly. The readers receive everything
    /// each time; the stalled client's connection is closed by the write timeout, the slow
    /// one is evicted (`event: evicted`, then the end of its response).
    @Test func stalledClientDoesNotSlowTheOthers() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick: the messages are the load
        configuration.evictAfter = 128
        configuration.writeTimeout = .seconds(3)
        configuration.sendBufferSize = 16 * 1024  // so that ~100 kB fill a client's buffers
        try await TestServer.run(configuration) { server in
            let readerCount = 8
            let perRound = 400
            let payload = String(repeating: "x", count: 2000)
            let readers = try await server.connectClients(readerCount)

            /// Posts round `round`'s messages; returns how long until every reader had them.
            @Sendable func round(_ round: Int) async throws -> Duration {
                let ids = ((round - 1) * perRound + 1)...(round * perRound)
                let clock = ContinuousClock()
                let start = clock.now
                let received = try await withTimeout(.seconds(30), "round \(round)") {
                    try await withThrowingTaskGroup(of: [Int].self) { group in
                        for reader in readers {
                            group.addTask {
                                var items = reader.items.makeAsyncIterator()
                                var got: [Int] = []
                                while got.count < perRound, let message = await items.next(named: "message") {
                                    got.append(Int(message.id ?? "") ?? -1)
                                }
                                return got
                            }
                        }
                        try await HTTPConnection.with(port: server.port) { http in
                            for n in ids { _ = try await http.post("\(n) \(payload)") }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                }
                let elapsed = clock.now - start
                #expect(received.count == readerCount)
                #expect(received.allSatisfy { $0 == Array(ids) }, "round \(round): a reader missed messages")
                return elapsed
            }

            // Round 1: the readers alone.
            let alone = try await round(1)

            // Round 2: next to a client that never reads.
            let stalled = try RawEventStreamClient(port: server.port, receiveBufferSize: 4096)
            _ = try await server.waitForSubscribers(readerCount + 1, within: .seconds(10))
            let withStalled = try await round(2)
            // Its buffers are full, a write to it is pending: the write timeout closes it.
            _ = try await server.waitForSubscribers(readerCount, within: .seconds(10))
            var stats = try await fetchStats(port: server.port)
            #expect(stats.writeTimeouts == 1)
            // Its subscriptions were evicted too, but that is counted only if its forwarding
            // task got to see it before it was cancelled: 0 or 1.
            let evictionsBefore = stats.evictions
            let stalledBytes = try await withTimeout(.seconds(10), "the stalled client to see the end") {
                var total = 0
                while true {
                    switch stalled.read(upTo: 65536) {
                    case .bytes(let bytes): total += bytes.readableBytes
                    case .nothingYet: try await Task.sleep(for: .milliseconds(10))
                    case .closed: return total
                    }
                }
            }

            // Round 3: next to a client that reads, but too slowly (2 kB per 50 ms) while the
            // round is posted, then reads what it has left as fast as it can.
            let slow = try RawEventStreamClient(port: server.port, receiveBufferSize: 4096)
            _ = try await server.waitForSubscribers(readerCount + 1, within: .seconds(10))
            let roundPosted = TestFlag()
            let slowReader = Task {
                try await withTimeout(.seconds(30), "the slow client's response to end") {
                    var parser = EventStreamParser()
                    var ids: [Int] = []
                    var evicted = false
                    while true {
                        switch slow.read(upTo: roundPosted.isSet ? 65536 : 2048) {
                        case .bytes(let bytes):
                            for item in try parser.feed(bytes) {
                                switch item {
                                case .event("message", let id, _): ids.append(Int(id ?? "") ?? -1)
                                case .event("evicted", _, _): evicted = true
                                case .endOfResponse: return (ids, evicted)
                                default: break
                                }
                            }
                            if !roundPosted.isSet { try await Task.sleep(for: .milliseconds(50)) }
                        case .nothingYet: try await Task.sleep(for: .milliseconds(10))
                        case .closed: return (ids, evicted)
                        }
                    }
                }
            }
            let withSlow = try await round(3)
            roundPosted.set()
            let (slowIDs, slowEvicted) = try await slowReader.value
            stats = try await fetchStats(port: server.port)
            #expect(slowEvicted, "the slow client was not told it was evicted: \(stats)")
            #expect(stats.evictions == evictionsBefore + 1)
            // Lossless until evicted: what it got is the start of round 3, without a gap.
            #expect(slowIDs == Array((2 * perRound + 1)...(2 * perRound + slowIDs.count)))
            _ = try await server.waitForSubscribers(readerCount, within: .seconds(10))

            func rate(_ elapsed: Duration) -> String {
                "\(Int((Double(perRound) / elapsed.seconds).rounded())) messages/s per reader (\(perRound) in \(elapsed.ms))"
            }
            print("[4] \(readerCount) readers, rounds of \(perRound) messages of 2 kB, evicting(128), SO_SNDBUF 16 kB:")
            print("[4]   readers alone:                   \(rate(alone))")
            print("[4]   with a client that never reads:  \(rate(withStalled))")
            print(
                "[4]     it was closed by the 3 s write timeout (writeTimeouts: 1); it had been sent \(stalledBytes) bytes"
            )
            print("[4]   with a client that reads slowly: \(rate(withSlow))")
            print(
                "[4]     it got \(slowIDs.count) messages in order, then `event: evicted` and the end of its response")
            print(
                "[4]   rate with the stalled client / alone: \(String(format: "%.2f", alone.seconds / withStalled.seconds))"
            )
            for reader in readers { await reader.close() }
        }
    }

    /// 5. A client that connects late receives the latest tick first, then the live ones.
    @Test func lateClientReceivesTheLatestValueFirst() async throws {
        // An upstream the test drives: every iteration subscribes to this subject.
        let ticks = AsyncPassthroughSubject<Int, Never>()
        try await TestServer.run(upstream: TickSource(ticks)) { server in
            let early = try await server.connectClients(1)[0]
            try await withTimeout(.seconds(10), "the upstream to subscribe") {
                try await ticks.waitForSubscribers(atLeast: 1)
            }
            var earlyItems = early.items.makeAsyncIterator()
            for n in 1...3 {
                ticks.send(n)
                #expect(await earlyItems.next(named: "tick")?.data == "\(n)")
            }

            let late = try await server.connectClients(1)[0]
            var lateItems = late.items.makeAsyncIterator()
            #expect(await lateItems.next(named: "tick")?.data == "3")  // the latest, at once
            ticks.send(4)
            #expect(await lateItems.next(named: "tick")?.data == "4")
            #expect(await earlyItems.next(named: "tick")?.data == "4")
            print("[5] late client: first tick 3 (the latest of 1, 2, 3), then 4")
            await early.close()
            await late.close()
        }
    }

    /// 6. An idle stream carries a `: heartbeat` comment after each `heartbeatInterval` of
    /// silence: how the server notices a client that vanished without closing.
    @Test func idleStreamsCarryHeartbeats() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick, then silence
        try await TestServer.run(configuration) { server in
            let client = try await server.connectClients(1)[0]
            var items = client.items.makeAsyncIterator()
            #expect(await items.next() == .event(name: "tick", id: nil, data: "1"))
            let clock = ContinuousClock()
            var arrivals: [ContinuousClock.Instant] = [clock.now]
            for _ in 1...3 {
                #expect(await items.next() == .comment("heartbeat"))
                arrivals.append(clock.now)
            }
            let gaps = zip(arrivals.dropFirst(), arrivals).map { $0 - $1 }
            print("[6] heartbeats on an idle stream (interval 100 ms) arrived after \(gaps.map(\.ms))")
            await client.close()
        }
    }
}
