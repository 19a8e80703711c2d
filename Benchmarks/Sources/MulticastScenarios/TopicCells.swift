// The "topics" scenario's cells: one feed fanned out by key. `keys` keys with `perKey`
// subscribers each, `elements` elements over keys drawn from a seeded generator; each
// subscriber must receive exactly its key's elements, in order. Three ways:
//
// - `keyed`: topics of one upstream, `feed.share(by: \.key)`: one upstream iterator, each
//   element routed to its key's subscribers only;
// - `subjects`: topics of subjects, `AsyncSubjectTopics`, a producer sending each element to
//   its key;
// - `filtered`: the hand-made way, one `share()` of the feed and a `where element.key == key`
//   in every subscriber: every subscriber is woken for every element.

import AsyncMulticast

/// An element of the topic cells: its key, and its number among its key's elements.
public struct KeyedElement: Sendable {
    public let key: Int
    public let sequence: Int
}

/// The keys of one run, drawn from a seeded generator, and how many elements each key gets.
public struct KeyDraw: Sendable {
    public let keys: [Int]
    public let perKeyCounts: [Int]

    public init(keys: Int, elements: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) {
        var state = seed
        var drawn = [Int]()
        drawn.reserveCapacity(elements)
        var counts = [Int](repeating: 0, count: keys)
        for _ in 0..<elements {
            // SplitMix64: cheap, and the same keys on every run and platform.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z &>> 31
            let key = Int(z % UInt64(keys))
            drawn.append(key)
            counts[key] += 1
        }
        self.keys = drawn
        self.perKeyCounts = counts
    }
}

/// The feed: the drawn keys, each element numbered within its key. Its iterator is opaque
/// to the optimizer, like the other cells' upstreams. With a `start` barrier, it produces its
/// first element only once the barrier's other party arrived: `share(by:)` starts its
/// upstream at the first subscriber of any key, and a key nobody holds yet drops its
/// elements, so the cell lets every subscriber join first.
public struct KeyedFeed: AsyncSequence, Sendable {
    public typealias Element = KeyedElement
    public typealias Failure = Never

    let draw: KeyDraw
    let start: StartBarrier?

    public init(_ draw: KeyDraw, start: StartBarrier? = nil) {
        self.draw = draw
        self.start = start
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let keys: [Int]
        var index = 0
        var numbers: [Int]
        var start: StartBarrier?

        @inline(never)
        public mutating func next() async -> KeyedElement? {
            if let start = self.start.take() { await start.arriveAndWait() }
            return self.step()
        }

        @inline(never)
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> KeyedElement? {
            if let start = self.start.take() { await start.arriveAndWait() }
            return self.step()
        }

        mutating func step() -> KeyedElement? {
            guard self.index < self.keys.count else { return nil }
            let key = self.keys[self.index]
            self.index += 1
            defer { self.numbers[key] += 1 }
            return KeyedElement(key: key, sequence: self.numbers[key])
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            keys: self.draw.keys, numbers: [Int](repeating: 0, count: self.draw.perKeyCounts.count), start: self.start)
    }
}

public enum TopicCells {
    /// The ways of fanning out by key that the scenario compares.
    public enum Way: String, CaseIterable, Sendable {
        case keyed, subjects, filtered
    }

    /// Runs one cell: `keys × perKey` subscribers, `elements` elements. Its deliveries are
    /// the elements that reached a subscriber of their key (a filtered-out one is not one).
    public static func run(_ way: Way, keys: Int, perKey: Int, elements: Int) async -> FanOutTally {
        let draw = KeyDraw(keys: keys, elements: elements)
        switch way {
        case .keyed: return await self.keyed(draw, perKey: perKey)
        case .subjects: return await self.subjects(draw, perKey: perKey)
        case .filtered: return await self.filtered(draw, perKey: perKey)
        }
    }

    static func keyed(_ draw: KeyDraw, perKey: Int) async -> FanOutTally {
        let start = StartBarrier(parties: 2)
        let topics = KeyedFeed(draw, start: start).share(by: \.key)
        var subscriptions: [(key: Int, subscription: SharedSubscription<KeyedElement, Never>)] = []
        for key in draw.perKeyCounts.indices {
            for _ in 0..<perKey {
                subscriptions.append((key, topics.subscribe(to: key, buffering: .bounded(64))))
            }
        }
        let all = subscriptions
        return await withTaskGroup(of: FanOutTally.self) { group in
            group.addTask { await self.drain(all, draw: draw) }
            await start.arriveAndWait()
            return await group.next()!
        }
    }

    static func subjects(_ draw: KeyDraw, perKey: Int) async -> FanOutTally {
        let topics = AsyncSubjectTopics<Int, KeyedElement, Never>()
        var subscriptions: [(key: Int, subscription: SharedSubscription<KeyedElement, Never>)] = []
        for key in draw.perKeyCounts.indices {
            for _ in 0..<perKey {
                subscriptions.append((key, topics.subscribe(to: key, buffering: .unbounded)))
            }
        }
        let all = subscriptions
        return await withTaskGroup(of: FanOutTally.self) { group in
            group.addTask { await self.drain(all, draw: draw) }
            var iterator = KeyedFeed(draw).makeAsyncIterator()
            while let element = iterator.step() { topics.send(element, to: element.key) }
            topics.finish()
            return await group.next()!
        }
    }

    static func filtered(_ draw: KeyDraw, perKey: Int) async -> FanOutTally {
        let shared = KeyedFeed(draw).share(buffering: .bounded(64))
        return await withTaskGroup(of: SubscriberTally.self) { group in
            let barrier = StartBarrier(parties: draw.perKeyCounts.count * perKey)
            for key in draw.perKeyCounts.indices {
                for _ in 0..<perKey {
                    group.addTask {
                        var iterator = shared.makeAsyncIterator()
                        await barrier.arriveAndWait()
                        return await self.tally(
                            &iterator, key: key, expected: draw.perKeyCounts[key], othersAre: .skipped)
                    }
                }
            }
            var total = FanOutTally()
            for await tally in group { total.add(tally) }
            return total
        }
    }

    /// Topics of either kind, as the churn and memory cells use them: joining a key, a key's
    /// count, and the end.
    struct Joinable: Sendable {
        let subscribe: @Sendable (Int) -> SharedSubscription<KeyedElement, Never>
        let count: @Sendable (Int) -> Int
        let finish: @Sendable () -> Void

        /// Topics of `way`: of one upstream that produces nothing until it is finished (its
        /// keys stay live, idle), or of subjects; `nil` for the filtered way, which has no keys.
        init?(_ way: Way) {
            switch way {
            case .keyed:
                let (feed, input) = AsyncStream.makeStream(of: KeyedElement.self)
                let topics = feed.share(by: \.key)
                (self.subscribe, self.count) = ({ topics.subscribe(to: $0) }, { topics.subscriberCount(of: $0) })
                self.finish = { input.finish() }
            case .subjects:
                let topics = AsyncSubjectTopics<Int, KeyedElement, Never>()
                (self.subscribe, self.count) = ({ topics.subscribe(to: $0) }, { topics.subscriberCount(of: $0) })
                self.finish = { topics.finish() }
            case .filtered:
                return nil
            }
        }
    }

    /// Joins and leaves on live keys: `keys` keys each kept live by a subscriber that stays,
    /// then two tasks at once make `joins` subscribers in all join a key drawn at random and
    /// leave at once (their subscription released): with one key, every join meets the
    /// other task's on that key's locks; with many, on a shard's lock now and then. Returns
    /// what went wrong (nothing, normally) and the seconds the joins and leaves took (wall).
    public static func churn(_ way: Way, keys: Int, joins: Int) async -> (failures: [String], seconds: Double) {
        guard let topics = Joinable(way) else { return (["the \(way.rawValue) way has no keys to join"], 0) }
        let draw = KeyDraw(keys: keys, elements: joins)
        let halves = [Array(draw.keys[..<(joins / 2)]), Array(draw.keys[(joins / 2)...])]
        let stayers = (0..<keys).map(topics.subscribe)
        let start = monotonicNanos()
        await withTaskGroup(of: Void.self) { group in
            for half in halves {
                group.addTask { for key in half { _ = topics.subscribe(key) } }
            }
        }
        let seconds = Double(monotonicNanos() - start) / 1e9
        let live = (0..<keys).allSatisfy { topics.count($0) == 1 }
        topics.finish()
        withExtendedLifetime(stayers) {}
        return (live ? [] : ["a key did not come back to its one subscriber after the churn"], seconds)
    }

    /// The heap bytes one live, idle key costs with its one subscriber: `keys` keys joined,
    /// measured with `heapBytesInUse()` before and after; `nil` where the heap cannot be read.
    public static func bytesPerKey(_ way: Way, keys: Int) async -> Double? {
        guard let before = heapBytesInUse(), let topics = Joinable(way) else { return nil }
        let stayers = (0..<keys).map(topics.subscribe)
        let after = heapBytesInUse()
        topics.finish()
        withExtendedLifetime(stayers) {}
        return after.map { Double($0 - before) / Double(keys) }
    }

    /// Iterates every subscription in a task of its own; each must see its key's elements,
    /// numbered 0, 1, 2, … up to the key's count.
    static func drain(
        _ subscriptions: [(key: Int, subscription: SharedSubscription<KeyedElement, Never>)], draw: KeyDraw
    ) async -> FanOutTally {
        await withTaskGroup(of: SubscriberTally.self) { group in
            for (key, subscription) in subscriptions {
                group.addTask {
                    var iterator = subscription.makeAsyncIterator()
                    return await self.tally(&iterator, key: key, expected: draw.perKeyCounts[key], othersAre: .failures)
                }
            }
            var total = FanOutTally()
            for await tally in group { total.add(tally) }
            return total
        }
    }

    /// What a subscriber does with an element of another key: the filtered way skips it, the
    /// keyed ways must never see one.
    enum OtherKeys { case skipped, failures }

    /// Reads `iterator` to its end as the subscriber of `key`: its key's elements must be
    /// numbered 0, 1, 2, … up to `expected`.
    static func tally<I: AsyncIteratorProtocol>(
        _ iterator: inout I, key: Int, expected: Int, othersAre others: OtherKeys
    ) async -> SubscriberTally where I.Element == KeyedElement, I.Failure == Never {
        var tally = SubscriberTally()
        while let element = await iterator.next(isolation: nil) {
            if element.key != key {
                if others == .skipped { continue }
                if tally.failure == nil { tally.failure = "key \(key) received an element of key \(element.key)" }
            }
            self.check(element, &tally)
        }
        self.checkEnd(&tally, expected: expected)
        return tally
    }

    static func check(_ element: KeyedElement, _ tally: inout SubscriberTally) {
        if element.sequence != tally.received, tally.failure == nil {
            tally.failure = "key \(element.key): got \(element.sequence), expected \(tally.received)"
        }
        tally.received += 1
    }

    static func checkEnd(_ tally: inout SubscriberTally, expected: Int) {
        if tally.received != expected, tally.failure == nil {
            tally.failure = "received \(tally.received) of \(expected)"
        }
    }
}
