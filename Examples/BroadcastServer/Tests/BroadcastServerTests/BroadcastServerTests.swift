import AsyncMulticast
import Broadcast
import NIOCore
import Testing

/// Every test runs the server on 127.0.0.1 and a free port, in this process (tests 11, 13: as a
/// child process, to send it a real SIGTERM), and talks to it over real TCP connections. The
/// tests run one after the other: test 4 measures rates.
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
            let expected = (0..<count).map { "\($0):message \($0 + 1)" }  // ids from 0
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
    /// each time; the other two are evicted at the hard limit, and their responses end at
    /// once through the eviction signal, not through the write timeout.
    @Test func stalledClientDoesNotSlowTheOthers() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick: the messages are the load
        configuration.hardLimit = 128
        configuration.softLimit = 64
        configuration.softLimitDuration = .seconds(3600)  // the hard limit alone acts here
        configuration.writeTimeout = .seconds(60)  // the backstop: it must not be what fires
        configuration.sendBufferSize = 16 * 1024  // so that ~100 kB fill a client's buffers
        let policy = configuration.bufferingPolicy
        try await TestServer.run(configuration) { server in
            let readerCount = 8
            let perRound = 400
            let payload = String(repeating: "x", count: 2000)
            let readers = try await server.connectClients(readerCount)

            /// Posts round `round`'s messages; returns how long until every reader had them.
            @Sendable func round(_ round: Int) async throws -> Duration {
                let ids = ((round - 1) * perRound)..<(round * perRound)  // ids from 0
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
            // Its buffers filled, a write to it stayed pending, and its subscription of the
            // messages went 128 behind: evicted, and closed at once (not after 60 s).
            _ = try await server.waitForSubscribers(readerCount, within: .seconds(10))
            try await server.waitForClients(readerCount, within: .seconds(10))
            var stats = try await fetchStats(port: server.port)
            #expect(stats.evictions == 1)
            #expect(stats.writeTimeouts == 0)
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
            _ = try await server.waitForSubscribers(readerCount, within: .seconds(10))
            try await server.waitForClients(readerCount, within: .seconds(10))
            stats = try await fetchStats(port: server.port)
            // Its response ended (the reader above saw the end) because it was evicted: with
            // `event: evicted` if no write to it was pending then, else by a closed connection.
            #expect(stats.evictions == 2)
            #expect(stats.writeTimeouts == 0)
            #expect(slowIDs.count < perRound)
            // Lossless until evicted: what it got is the start of round 3, without a gap.
            #expect(slowIDs == Array((2 * perRound)..<(2 * perRound + slowIDs.count)))

            func rate(_ elapsed: Duration) -> String {
                "\(Int((Double(perRound) / elapsed.seconds).rounded())) messages/s per reader (\(perRound) in \(elapsed.ms))"
            }
            print("[4] \(readerCount) readers, rounds of \(perRound) messages of 2 kB, \(policy), SO_SNDBUF 16 kB:")
            print("[4]   readers alone:                   \(rate(alone))")
            print("[4]   with a client that never reads:  \(rate(withStalled))")
            print(
                "[4]     evicted at the hard limit and closed at once (evictions: 1, writeTimeouts: 0); it had been sent \(stalledBytes) bytes"
            )
            print("[4]   with a client that reads slowly: \(rate(withSlow))")
            let ending = slowEvicted ? "`event: evicted` and the end of its response" : "its connection closed"
            print("[4]     it got \(slowIDs.count) messages in order, then \(ending) (evictions: 2, writeTimeouts: 0)")
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

    /// 7. A client that stops reading is evicted by the soft limit and its connection is
    /// closed at once, through `waitForEviction()`: its handler is stuck in a write and never
    /// asks its subscriptions for anything. Presence drops with it, the write timeout (60 s)
    /// has nothing to do, and a reading client next to it keeps receiving.
    ///
    /// The soft limit is timed on a manual clock: the stalled client is more than
    /// `softLimit` behind while the clock stands still (not evicted), then the clock moves
    /// past `softLimitDuration` and its deadline evicts it, with nothing produced since (the
    /// room has gone quiet).
    @Test func clientThatStopsReadingIsEvictedAndClosedAtOnce() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick: the messages are the load
        configuration.hardLimit = 1000
        configuration.softLimit = 16
        configuration.softLimitDuration = .seconds(10)
        configuration.writeTimeout = .seconds(60)  // the backstop: it must not be what fires
        configuration.sendBufferSize = 16 * 1024  // so that ~100 kB fill a client's buffers
        let softLimit = configuration.softLimit
        let clock = ManualClock()
        try await TestServer.run(configuration, clock: clock) { server in
            let reader = try await server.connectClients(1)[0]
            var stalled = RawEventStreamReader(try RawEventStreamClient(port: server.port, receiveBufferSize: 4096))
            _ = try await server.waitForSubscribers(2, within: .seconds(10))
            try await server.waitForClients(2, within: .seconds(10))

            // 200 messages of 2 kB: the reader takes them as they come; the stalled client's
            // socket buffers take ~100 kB, and its subscription holds the rest.
            let burst = 200
            let payload = String(repeating: "x", count: 2000)
            try await HTTPConnection.with(port: server.port) { http in
                for n in 1...burst { _ = try await http.post("\(n) \(payload)") }
            }
            let got = try await withTimeout(.seconds(30), "the reader to receive the burst") {
                var items = reader.items.makeAsyncIterator()
                var ids: [Int] = []
                while ids.count < burst, let message = await items.next(named: "message") {
                    ids.append(Int(message.id ?? "") ?? -1)
                }
                return ids
            }
            #expect(got == Array(0..<burst))

            // The reader holds nothing now (it was written all of it): what is held is the
            // stalled client's. More than the soft limit, for no time yet on the clock.
            var stats = try await fetchStats(port: server.port)
            #expect(stats.maxBacklog > softLimit, "the stalled client should be past the soft limit: \(stats)")
            #expect(stats.evictions == 0)
            #expect(stats.clients == 2)
            let heldBeforeEviction = stats.maxBacklog
            // What an operator's dashboard sees during the stall (GET /metrics, Prometheus).
            _ = try await waitForSample("broadcast_subscribers", #"feed="ticks""#, toBe: 2, port: server.port)
            var metrics = try await waitForSample(
                "broadcast_subscribers", #"feed="messages""#, toBe: 2, port: server.port)
            #expect(sample("broadcast_evictions_total", #"feed="messages",reason="softLimit""#, in: metrics) ?? 0 == 0)
            #expect(
                sample("broadcast_backlog_high_water_mark_count", #"feed="messages""#, in: metrics) ?? 0 >= 2,
                "each client's backlog is sampled at the scrape")

            // Past the duration, with nothing produced: the deadline evicts the stalled
            // client, and its connection is closed at once.
            let timer = ContinuousClock()
            let posted = timer.now
            clock.advance(by: .seconds(11))
            try await server.waitForClients(1, within: .seconds(10))
            _ = try await server.waitForSubscribers(1, within: .seconds(10))
            let noticed = timer.now - posted
            stats = try await fetchStats(port: server.port)
            #expect(stats.evictions == 1)
            #expect(stats.writeTimeouts == 0)
            #expect(stats.clients == 1)
            #expect(stats.subscribers == 1)
            #expect(stats.messageSubscribers == 1)
            // The eviction, counted under its reason; presence down to the reader.
            metrics = try await waitForSample("broadcast_subscribers", #"feed="messages""#, toBe: 1, port: server.port)
            #expect(
                sample("broadcast_evictions_total", #"feed="messages",reason="softLimit""#, in: metrics) == 1,
                "\(metrics)")
            #expect(sample("broadcast_evictions_total", #"feed="messages",reason="hardLimit""#, in: metrics) ?? 0 == 0)

            // Its connection was closed: it reads what its socket buffers held, then the end.
            try await stalled.read(within: .seconds(10), "the stalled client's connection to close") { _ in false }
            #expect(stalled.closed)
            #expect(stalled.messageIDs == Array(0..<stalled.messageIDs.count), "a gap in what it got")
            #expect(stalled.messageIDs.count < burst)
            // Its connection was not writable (a write to it waited): an `event: evicted`
            // would have queued behind what it does not read, so it was closed instead.
            #expect(!stalled.sawEvicted)

            // The reader keeps receiving.
            let trigger = try await HTTPConnection.with(port: server.port) { try await $0.post("after the eviction") }
            let next = try await HTTPConnection.with(port: server.port) { try await $0.post("still here?") }
            let after = try await withTimeout(.seconds(10), "the reader to receive two more messages") {
                var items = reader.items.makeAsyncIterator()
                let first = await items.next(named: "message")?.id
                let second = await items.next(named: "message")?.id
                return [first, second]
            }
            #expect(after == ["\(trigger)", "\(next)"])
            print(
                "[7] stalled client: \(heldBeforeEviction) messages held (soft limit \(softLimit)), evicted by the"
                    + " soft limit, closed and gone from presence \(noticed.ms) after its deadline passed, nothing produced since;"
                    + " it had received \(stalled.messageIDs.count)")
            await reader.close()
        }
    }

    /// 8. A burst that takes a healthy client past the soft limit, for less than its
    /// duration, does not evict it. The client stops reading (the test holds its reads) while
    /// 200 messages are posted, so its subscription holds far more than `softLimit`; the
    /// manual clock moves 5 s of the 10 s, and another message is produced while it is that
    /// far behind (the limit is checked, and passes). Then it reads everything; the clock
    /// moves past the 10 s since the burst began, and a message is produced: it caught up,
    /// so it is not evicted, and it receives every message in order.
    @Test func burstAboveTheSoftLimitIsAbsorbed() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick: the messages are the load
        configuration.hardLimit = 1000
        configuration.softLimit = 16
        configuration.softLimitDuration = .seconds(10)
        configuration.writeTimeout = .seconds(60)
        configuration.sendBufferSize = 16 * 1024
        let softLimit = configuration.softLimit
        let clock = ManualClock()
        try await TestServer.run(configuration, clock: clock) { server in
            // Reads only when the test says so.
            var client = RawEventStreamReader(try RawEventStreamClient(port: server.port, receiveBufferSize: 4096))
            _ = try await server.waitForSubscribers(1, within: .seconds(10))
            try await server.waitForClients(1, within: .seconds(10))

            let burst = 200
            let payload = String(repeating: "x", count: 2000)
            try await HTTPConnection.with(port: server.port) { http in
                for n in 1...burst { _ = try await http.post("\(n) \(payload)") }
            }
            var stats = try await fetchStats(port: server.port)
            let held = stats.maxBacklog
            #expect(held > softLimit, "the burst should take the client past the soft limit: \(stats)")
            #expect(stats.maxBacklogHighWaterMark >= held)

            // 5 s of the 10 s pass, and a message is produced: the soft limit is checked, and
            // the client, behind for less than its duration, stays. (The backlog is read
            // after the post returned, so after that check: an evicted client has none.)
            clock.advance(by: .seconds(5))
            _ = try await HTTPConnection.with(port: server.port) { try await $0.post("\(burst + 1) within the duration") }
            stats = try await fetchStats(port: server.port)
            #expect(stats.maxBacklog > softLimit)  // 0 if it had been evicted
            #expect(stats.evictions == 0)
            #expect(stats.clients == 1)

            // The client reads all of it.
            try await client.read(within: .seconds(30), "the client to read the burst") { $0.messageIDs.count == burst + 1 }
            #expect(!client.closed)
            #expect(client.messageIDs == Array(0...burst))

            // 15 s since the burst took it past the soft limit, and a message is produced: it
            // holds one message now, below the soft limit, so it stays.
            clock.advance(by: .seconds(10))
            let last = try await HTTPConnection.with(port: server.port) { try await $0.post("after the duration") }
            try await client.read(within: .seconds(10), "the client to read the last message") {
                $0.messageIDs.last == last
            }
            #expect(client.messageIDs == Array(0...last))
            #expect(!client.sawEvicted)
            #expect(!client.closed)
            stats = try await fetchStats(port: server.port)
            #expect(stats.evictions == 0)
            #expect(stats.writeTimeouts == 0)
            #expect(stats.clients == 1)
            #expect(stats.maxBacklogHighWaterMark >= held + 1)  // what it absorbed stays on record
            print(
                "[8] a burst of \(burst + 1) messages held \(held + 1) for a client (soft limit \(softLimit) for 10 s)"
                    + " for 5 s on the clock: absorbed, nothing evicted; high-water mark \(stats.maxBacklogHighWaterMark)")
        }
    }

    /// 9. A client that reads, but that a burst takes past the hard limit at once, is told:
    /// its connection is writable (it takes what it is sent), so instead of closing it the
    /// server hands it `event: evicted`, after what it had already been handed, and ends
    /// the response. The burst is posted in-process, faster than any client reads.
    @Test func readingClientPastTheHardLimitIsToldItWasEvicted() async throws {
        var configuration = TestServer.configuration
        configuration.tickInterval = .seconds(3600)  // one tick: the messages are the load
        configuration.hardLimit = 8
        configuration.softLimit = 4
        configuration.softLimitDuration = .seconds(3600)  // the hard limit alone acts here
        configuration.writeTimeout = .seconds(60)
        try await TestServer.run(configuration) { server in
            let client = try await server.connectClients(1)[0]
            let burst = 500
            for n in 1...burst { server.hub.post("\(n)") }  // no await: nobody reads meanwhile

            let (ids, events) = try await withTimeout(.seconds(10), "the client's response to end") {
                var items = client.items.makeAsyncIterator()
                var ids: [Int] = []
                var events: [String] = []
                while let item = await items.next() {
                    switch item {
                    case .event(let name, let id, _):
                        events.append(name)
                        if name == "message" { ids.append(Int(id ?? "") ?? -1) }
                    case .endOfResponse: return (ids, events)
                    case .comment: break
                    }
                }
                throw TimedOut(what: "the end of the response (the connection closed first)")
            }
            try await server.waitForClients(0, within: .seconds(10))
            _ = try await server.waitForSubscribers(0, within: .seconds(10))
            let stats = try await fetchStats(port: server.port)
            #expect(events.last == "evicted")
            #expect(events.filter { $0 == "evicted" }.count == 1)
            #expect(ids.count < burst)
            #expect(ids == Array(0..<ids.count), "a gap before the eviction: \(ids)")
            #expect(stats.evictions == 1)
            #expect(stats.writeTimeouts == 0)
            #expect(stats.clients == 0)
            print("[9] a reading client past the hard limit (8) got \(ids.count) of \(burst) messages in order, then `event: evicted` and the end of its response")
            await client.close()
        }
    }

    /// 10. The command line sets both limits, in any order, and refuses a soft limit that is
    /// not below the hard one (the library would stop the process on it).
    @Test func commandLineSetsBothLimits() throws {
        let defaults = BroadcastConfiguration()
        #expect(defaults.bufferingPolicy == .evicting(4096, softLimit: .above(256, for: .seconds(10))))
        #expect(defaults.writeTimeout == .seconds(60))

        let set = try BroadcastConfiguration(arguments: [
            "--soft-limit", "500", "--soft-limit-duration", "2.5", "--hard-limit", "1000",
        ])
        #expect(set.bufferingPolicy == .evicting(1000, softLimit: .above(500, for: .milliseconds(2500))))

        for arguments in [["--hard-limit", "100"], ["--soft-limit", "10", "--hard-limit", "10"]] {
            #expect(throws: BroadcastConfiguration.UsageError.self, "\(arguments)") {
                try BroadcastConfiguration(arguments: arguments)
            }
        }
        #expect(throws: BroadcastConfiguration.UsageError.self) {
            try BroadcastConfiguration(arguments: ["--soft-limit-duration", "0"])
        }
    }

    /// 11. SIGTERM to the server running as a child process (the built executable, as in
    /// production): the feeds end first, so every open stream receives what it was owed
    /// (every message posted before the signal, the ticks without a gap), then
    /// `event: shutdown`, then the end of its response; and the process exits with status 0
    /// within 10 s.
    @Test func sigtermEndsEveryStreamWithAFinalEventThenExits() async throws {
        let server = try await ServerProcess.start(["--tick", "0.05", "--heartbeat", "1"], within: .seconds(30))
        defer { server.kill() }  // if the test failed before it exited
        let clients = try await connectEventStreams(3, port: server.port)

        // Gates: the ticks reach every client, and the server counts three of them.
        var firstTicks: [Int] = []
        for client in clients {
            let tick = try await withTimeout(.seconds(10), "a first tick") { () async -> Int? in
                var items = client.items.makeAsyncIterator()
                return await items.next(named: "tick").flatMap { Int($0.data) }
            }
            firstTicks.append(try #require(tick))
        }
        let stats = try await fetchStats(port: server.port)
        #expect(stats.clients == 3)
        #expect(stats.subscribers == 3)
        #expect(stats.upstreamRunning)
        // Accepted (202) means held for every client: each must receive them before the end.
        let posted = try await HTTPConnection.with(port: server.port) { http in
            var ids: [Int] = []
            for n in 1...5 { ids.append(try await http.post("before the shutdown \(n)")) }
            return ids
        }

        let clock = ContinuousClock()
        let signalled = clock.now
        server.terminate()
        // Each client reads until its connection ends.
        let streams = try await withTimeout(.seconds(10), "every stream to end after SIGTERM") {
            try await withThrowingTaskGroup(of: (Int, [SSEItem], Duration).self) { group in
                for (index, client) in clients.enumerated() {
                    group.addTask {
                        var items: [SSEItem] = []
                        var finalEvent = Duration.zero
                        for await item in client.items {
                            items.append(item)
                            if case .event("shutdown", _, _) = item { finalEvent = clock.now - signalled }
                        }
                        return (index, items, finalEvent)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = ($1.1, $1.2) }
            }
        }
        let exit = try await server.waitForExit(within: .seconds(10))
        let exited = clock.now - signalled
        #expect(exit == ServerProcess.Exit(status: 0, exited: true), "it printed:\n\(server.printed)")
        #expect(exited < .seconds(10))

        for index in clients.indices {
            let items = try #require(streams[index]?.0)
            let events = items.compactMap { item -> (name: String, id: String?, data: String)? in
                if case .event(let name, let id, let data) = item { (name, id, data) } else { nil }
            }
            // What it was owed: every message posted before the signal, in order, and the
            // ticks after its first one, without a gap.
            let messageIDs = events.filter { $0.name == "message" }.map { Int($0.id ?? "") ?? -1 }
            #expect(messageIDs == posted, "client \(index)")
            let ticks = events.filter { $0.name == "tick" }.map { Int($0.data) ?? -1 }
            let first = firstTicks[index]
            #expect(ticks == Array((first + 1)..<(first + 1 + ticks.count)), "client \(index)")
            // Then the final event, once, and the end of the response right after it.
            #expect(events.last?.name == "shutdown", "client \(index): \(items.suffix(3))")
            #expect(events.filter { $0.name == "shutdown" }.count == 1, "client \(index)")
            #expect(items.suffix(2).last == .endOfResponse, "client \(index): \(items.suffix(3))")
            #expect(items.dropLast().last == .event(name: "shutdown", id: nil, data: "the server is shutting down; reconnect later"))
        }
        let finalEvents = clients.indices.compactMap { streams[$0]?.1 }
        print(
            "[11] SIGTERM to the server process (pid \(server.pid)) with 3 clients: each got the \(posted.count) messages"
                + " and its ticks, then `event: shutdown` (after \(finalEvents.map(\.ms)))"
                + " and the end of its response; the process exited with status \(exit.status) after \(exited.ms) (limit 10 s)")
    }

    /// 12. An upstream that ends by itself (a ``TickSource`` over a subject the test
    /// finishes) ends the sharing's `run()`, and that shuts the whole server down
    /// gracefully: the client gets the ticks, then `event: shutdown`, then the end of its
    /// response, and the service group returns.
    @Test func upstreamThatEndsShutsTheServerDownGracefully() async throws {
        let ticks = AsyncPassthroughSubject<Int, Never>()
        try await TestServer.run(upstream: TickSource(ticks)) { server in
            let client = try await server.connectClients(1)[0]
            try await withTimeout(.seconds(10), "the upstream to subscribe") {
                try await ticks.waitForSubscribers(atLeast: 1)
            }
            ticks.send(1)
            ticks.send(2)
            ticks.finish()
            let items = try await withTimeout(.seconds(10), "the response to end") {
                var items: [SSEItem] = []
                for await item in client.items { items.append(item) }
                return items
            }
            let events = items.compactMap { item -> String? in
                if case .event(let name, _, let data) = item { "\(name) \(data)" } else { nil }
            }
            #expect(events == ["tick 1", "tick 2", "shutdown the server is shutting down; reconnect later"])
            #expect(items.last == .endOfResponse)
            try await server.waitForClients(0, within: .seconds(10))
            print("[12] the upstream ended: the client got \(events.count - 1) ticks, `event: shutdown` and the end of its response")
        }
    }
}
