// share(by:) under load, checked against the joining contract: the upstream produces
// continuously, slow `.bounded` readers hold the router now and then, and joiners of every
// key (some with a key's replay, some leaving early) come while it runs; or, with no reader
// that stays, every key is freed again and again, so that the router stops and restarts
// while joins race the last leaves. For each joiner,
// what the upstream had produced just before `subscribe(to:)` (a) and just after it
// returned (b) is read from the upstream's own record; the upstream produces n at index n.
// Whatever the interleaving, a joiner gets its key's elements only, strictly in order (none
// twice), at most `replay + 2` of those produced before a, and, if it is lossless, every
// element of its key produced from b on, up to the last one it read (to the end, if it read
// until `nil`).

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("AsyncSharedTopics: the joining contract under load")
    struct SharedTopicsContractLoadTests {
        static let keys = 8
        static let total = 4_000
        static let joins = 160

        /// One joiner's record.
        struct Joined: Sendable {
            let key: Int
            let producedBefore: Int
            let producedAfter: Int
            let received: [Int]
            /// It read until `nil`.
            let readToTheEnd: Bool
            /// It keeps every element (`.bounded`, `.unbounded`).
            var lossless = true
        }

        /// What a joiner of `key` may receive and must receive (see the file's comment).
        func check(_ joined: Joined, replay: Int, total: Int, label: String) {
            let keys = Self.keys
            #expect(joined.received.allSatisfy { $0 % keys == joined.key }, "\(label): another key's element")
            #expect(
                zip(joined.received, joined.received.dropFirst()).allSatisfy { $0 < $1 },
                "\(label): out of order or twice")
            let early = joined.received.filter { $0 < joined.producedBefore }
            #expect(
                early.count <= replay + 2,
                "\(label): \(early) produced before it joined (replay \(replay)); joined at \(joined.producedBefore)..<\(joined.producedAfter)"
            )
            if joined.lossless {
                let end = joined.readToTheEnd ? total : (joined.received.last ?? -1) + 1
                let due = stride(from: joined.producedAfter, to: end, by: 1).filter { $0 % keys == joined.key }
                let missing = Set(due).subtracting(joined.received)
                #expect(
                    missing.isEmpty, "\(label): missed \(missing.sorted().prefix(8)) of those produced after it joined")
            }
        }

        @Test(
            "joiners of every key while the upstream runs and slow lossless readers hold the router: in order, none twice, at most replay + 2 produced before",
            arguments: [0, 2])
        func joinersUnderLoad(replay: Int) async throws {
            let keys = Self.keys
            let total = Self.total
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            let pulled = LockedLog<Int>()
            let topics = HookedStream(stream, pulled: { [pulled] in pulled.append($0) })
                .share(by: { $0 % keys }, replay: replay, keepAlive: .seconds(Int64.max))
            let records = LockedLog<Joined>()
            try await withProgressWatchdog("joiners under load") { progress in
                // Slow lossless readers, joined before anything is produced, read to the end.
                let slow = (0..<3).map { key in
                    let subscription = topics.subscribe(to: key, buffering: .bounded(1 + key % 2))
                    return Task.detached {
                        var received: [Int] = []
                        for await n in subscription {
                            received.append(n)
                            progress.tick()
                            for _ in 0..<(n % 7) { await Task.yield() }
                        }
                        records.append(
                            Joined(
                                key: key, producedBefore: 0, producedAfter: 0, received: received, readToTheEnd: true))
                    }
                }
                let producer = Task.detached {
                    for n in 0..<total {
                        feed.yield(n)
                        if n % 16 == 15 { await Task.yield() }
                    }
                    feed.finish()
                }
                var joiners: [Task<Void, Never>] = []
                var generator = SystemRandomNumberGenerator()
                for j in 0..<Self.joins {
                    let threshold = j * (total - 200) / Self.joins
                    try await waitUntil("the upstream to reach \(threshold)") { pulled.count >= threshold }
                    let key = Int.random(in: 0..<keys, using: &generator)
                    let policy: SharedBufferingPolicy = [.bounded(1), .bounded(4), .unbounded].randomElement(
                        using: &generator)!
                    let leaveAfter = Bool.random(using: &generator) ? Int.random(in: 0..<6, using: &generator) : nil
                    joiners.append(
                        Task.detached {
                            let before = pulled.count
                            let subscription = topics.subscribe(to: key, buffering: policy)
                            let after = pulled.count
                            var received: [Int] = []
                            var iterator = subscription.makeAsyncIterator()
                            while leaveAfter.map({ received.count < $0 }) ?? true, let n = await iterator.next() {
                                received.append(n)
                                progress.tick()
                            }
                            records.append(
                                Joined(
                                    key: key, producedBefore: before, producedAfter: after, received: received,
                                    readToTheEnd: leaveAfter == nil))
                        })
                    progress.tick()
                }
                await producer.value
                for task in slow + joiners { await task.value }
            }
            #expect(pulled.values == Array(0..<total), "one iteration, every element produced once")
            #expect(records.count == 3 + Self.joins)
            for (index, joined) in records.values.enumerated() {
                self.check(joined, replay: replay, total: Self.total, label: "joiner \(index) of key \(joined.key)")
            }
        }

        /// A joiner of `key` that reads until an element `reach` past what the upstream had
        /// produced when it joined (or the end), slowly if `slow`, then leaves.
        static func visit(
            _ topics: AsyncSharedTopics<Int, Int, Never>, key: Int, policy: SharedBufferingPolicy, reach: Int,
            slow: Bool, pulled: LockedLog<Int>, progress: WatchdogProgress
        ) async -> Joined {
            let before = pulled.count
            let subscription = topics.subscribe(to: key, buffering: policy)
            let after = pulled.count
            var received: [Int] = []
            var iterator = subscription.makeAsyncIterator()
            var ended = true
            while let n = await iterator.next() {
                received.append(n)
                progress.tick()
                if n >= after + reach {
                    ended = false
                    break
                }
                if slow { await Task.yield() }
            }
            var joined = Joined(
                key: key, producedBefore: before, producedAfter: after, received: received, readToTheEnd: ended)
            if case .bufferingNewest = policy { joined.lossless = false }
            return joined
        }

        @Test(
            "joiners racing the last leaves while the router stops and restarts: in order, none twice, at most replay + 2 produced before",
            arguments: [0, 1])
        func joinersRacingRouterRestarts(replay: Int) async throws {
            let keys = Self.keys
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            let pulled = LockedLog<Int>()
            let topics = HookedStream(stream, pulled: { [pulled] in pulled.append($0) })
                .share(by: { $0 % keys }, replay: replay, keepAlive: .seconds(Int64.max))
            let session = try #require(topics.topics.session)
            let records = LockedLog<Joined>()
            let done = LockedFlag()
            let produced = try await withProgressWatchdog("joiners racing restarts") { progress -> Int in
                // Produces until the rounds are done, a few elements ahead of the upstream.
                let producer = Task.detached { () -> Int in
                    var n = 0
                    while !done.isSet {
                        while n < pulled.count + 4 {
                            feed.yield(n)
                            n += 1
                        }
                        await Task.yield()
                    }
                    feed.finish()
                    return n
                }
                var previous: [Task<Void, Never>] = []
                var generator = SystemRandomNumberGenerator()
                for round in 0..<400 {
                    // Every fourth round, the last wave has left and every key is freed first:
                    // the router stops, and this wave starts another.
                    if round % 4 == 0 {
                        for task in previous { await task.value }
                        try await waitUntil("round \(round): every key freed") { topics.keyCount == 0 }
                        try await waitUntil("round \(round): the router stopped") {
                            session.state.withLock { $0.pump == nil }
                        }
                    }
                    let wave = (0..<Int.random(in: 1...3, using: &generator)).map { _ in
                        let key = Int.random(in: 0..<keys, using: &generator)
                        let policy: SharedBufferingPolicy =
                            [.bounded(1), .bounded(2), .unbounded, .bufferingNewest(2)].randomElement(
                                using: &generator)!
                        let reach = Int.random(in: 0..<24, using: &generator)
                        let slow = Bool.random(using: &generator)
                        return Task.detached {
                            records.append(
                                await Self.visit(
                                    topics, key: key, policy: policy, reach: reach, slow: slow, pulled: pulled,
                                    progress: progress))
                        }
                    }
                    // The last wave leaves while this one joins.
                    for task in previous { await task.value }
                    previous = wave
                    progress.tick()
                }
                for task in previous { await task.value }
                done.set()
                let produced = await producer.value
                // One reader to the end, so that the stream is drained and the upstream's end routed.
                for await _ in topics.subscribe(to: 0) { progress.tick() }
                return produced
            }
            #expect(pulled.values == Array(0..<produced), "one iteration, every element produced once")
            let generations = session.state.withLock { $0.generation }
            #expect(generations >= 100, "the router stopped and restarted (\(generations) routers)")
            for (index, joined) in records.values.enumerated() {
                self.check(joined, replay: replay, total: produced, label: "joiner \(index) of key \(joined.key)")
            }
        }

        /// An endless upstream that produces on demand: iteration i yields i * 1,000,000 + k for
        /// k = 0, 1, …, recording each element it produces, and counts iterations that overlap.
        struct Iterations: AsyncSequence, Sendable {
            final class Record: Sendable {
                let produced = LockedLog<Int>()
                let state = Lock<(started: Int, live: Int, overlaps: Int)>((0, 0, 0))
            }
            final class Token: Sendable {
                let record: Record
                init(_ record: Record) { self.record = record }
                deinit { self.record.state.withLock { $0.live -= 1 } }
            }
            let record: Record

            struct AsyncIterator: AsyncIteratorProtocol {
                let base: Int
                var k = 0
                let token: Token
                mutating func next() async -> Int? {
                    await Task.yield()
                    if Task.isCancelled { return nil }
                    let n = self.base + self.k
                    self.k += 1
                    self.token.record.produced.append(n)
                    return n
                }
            }

            func makeAsyncIterator() -> AsyncIterator {
                let index = self.record.state.withLock { state in
                    if state.live > 0 { state.overlaps += 1 }
                    state.live += 1
                    state.started += 1
                    return state.started - 1
                }
                return AsyncIterator(base: index * 1_000_000, token: Token(self.record))
            }
        }

        @Test(
            "joiners while the upstream stops and restarts: never an element of an older iteration after a newer one, none twice, at most replay + 2 produced before, each element keyed once"
        )
        func joinersAcrossUpstreamRestarts() async throws {
            let keys = Self.keys
            let record = Iterations.Record()
            let keyed = LockedLog<Int>()
            let topics = Iterations(record: record).share(
                by: { n in
                    keyed.append(n)
                    return n % keys
                }, replay: 1)
            let records = LockedLog<(Joined, want: Int)>()
            try await withProgressWatchdog("joiners across restarts") { progress in
                var previous: [Task<Void, Never>] = []
                var generator = SystemRandomNumberGenerator()
                for round in 0..<300 {
                    if round % 4 == 0 {
                        for task in previous { await task.value }
                        try await waitUntil("round \(round): the upstream stopped") {
                            record.state.withLock { $0.live } == 0
                        }
                    }
                    let wave = (0..<Int.random(in: 1...3, using: &generator)).map { _ in
                        let key = Int.random(in: 0..<keys, using: &generator)
                        let policy: SharedBufferingPolicy =
                            [.bounded(1), .bounded(3), .unbounded].randomElement(using: &generator)!
                        let want = Int.random(in: 1...12, using: &generator)
                        return Task.detached {
                            let before = record.produced.count
                            let subscription = topics.subscribe(to: key, buffering: policy)
                            let after = record.produced.count
                            var received: [Int] = []
                            var iterator = subscription.makeAsyncIterator()
                            while received.count < want, let n = await iterator.next() {
                                received.append(n)
                                progress.tick()
                            }
                            let joined = Joined(
                                key: key, producedBefore: before, producedAfter: after, received: received,
                                readToTheEnd: false)
                            records.append((joined, want))
                        }
                    }
                    for task in previous { await task.value }
                    previous = wave
                    progress.tick()
                }
                for task in previous { await task.value }
                try await waitUntil("the upstream stopped at the end") { record.state.withLock { $0.live } == 0 }
            }
            let (started, overlaps) = record.state.withLock { ($0.started, $0.overlaps) }
            #expect(overlaps == 0)
            #expect(started >= 50, "the upstream stopped and restarted (\(started) iterations)")
            let produced = record.produced.values
            #expect(Set(produced).count == produced.count, "every element produced once")
            let keyedValues = keyed.values
            #expect(Set(keyedValues).count == keyedValues.count, "the key function called at most once per element")
            let position = Dictionary(uniqueKeysWithValues: produced.enumerated().map { ($1, $0) })
            for (index, (joined, want)) in records.values.enumerated() {
                let label = "joiner \(index) of key \(joined.key)"
                #expect(joined.received.count == want, "\(label): the upstream never ends")
                #expect(joined.received.allSatisfy { $0 % keys == joined.key }, "\(label): another key's element")
                #expect(
                    zip(joined.received, joined.received.dropFirst()).allSatisfy { $0 < $1 },
                    "\(label): \(joined.received): out of order or twice")
                let early = joined.received.filter { position[$0, default: 0] < joined.producedBefore }
                #expect(early.count <= 1 + 2, "\(label): \(early) produced before it joined")
                // Lossless within the iteration it ended in, from when it joined to its last element.
                guard let last = joined.received.last else { continue }
                let iteration = last / 1_000_000
                let end = position[last]! + 1
                let due = produced[min(joined.producedAfter, end)..<end].filter {
                    $0 % keys == joined.key && $0 / 1_000_000 == iteration
                }
                let missing = Set(due).subtracting(joined.received)
                #expect(missing.isEmpty, "\(label): missed \(missing.sorted().prefix(8))")
            }
        }
    }
}
