// Shared building blocks for the scenarios: sources, a start barrier, a
// stop flag, a monotonic clock and the per-subscriber checks.

import CHeapStats
import Synchronization

// MARK: - Buffering policies

/// The three policies the fan-out scenario runs, named after AsyncMulticast's
/// `SharedBufferingPolicy`. Each implementation maps it to its own nearest
/// equivalent (see `Ours.swift`, `SAA.swift`, `HandRolled.swift`).
public enum BenchPolicy: String, Sendable, CaseIterable, CustomStringConvertible {
    /// `.bounded(64)`: lossless, the upstream waits for the slowest subscriber.
    case bounded64
    /// `.unbounded`: lossless, no back-pressure.
    case unbounded
    /// `.bufferingNewest(64)`: lossy, slow subscribers skip to the newest 64.
    case newest64

    public var isLossless: Bool { self != .newest64 }

    public var description: String {
        switch self {
        case .bounded64: ".bounded(64)"
        case .unbounded: ".unbounded"
        case .newest64: ".bufferingNewest(64)"
        }
    }
}

/// Which implementation a scenario runs against.
public enum Implementation: String, Sendable, CaseIterable, CustomStringConvertible {
    /// AsyncMulticast `share()` / `AsyncPassthroughSubject`.
    case ours
    /// swift-async-algorithms `share(bufferingPolicy:)`.
    case saa
    /// `HandRolledBroadcaster`: a Mutex-held dictionary of AsyncStream continuations.
    case handRolled
    /// The upstream iterated directly by one consumer (N = 1 only): the floor.
    case base
    /// OpenCombine 0.14.0 `PassthroughSubject` with N `sink`s, sent to synchronously:
    /// the synchronous anchor of the cost-per-delivery scenarios (fan-out and subject
    /// only; there is no async subscriber to churn, keep idle or cancel).
    case openCombine

    public var description: String {
        switch self {
        case .ours: "AsyncMulticast"
        case .saa: "swift-async-algorithms"
        case .handRolled: "hand-rolled"
        case .base: "base (no sharing)"
        case .openCombine: "OpenCombine"
        }
    }
}

// MARK: - Sources

/// `0..<count` as an AsyncSequence that never suspends. Sendable, `Failure == Never`.
public struct CountingSequence: AsyncSequence, Sendable {
    public typealias Element = Int
    public typealias Failure = Never

    public let count: Int

    public init(_ count: Int) { self.count = count }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = Int
        public typealias Failure = Never

        var current = 0
        let count: Int

        @inline(__always)
        mutating func step() -> Int? {
            guard current < count else { return nil }
            defer { current &+= 1 }
            return current
        }

        public mutating func next() async -> Int? { step() }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> Int? { step() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count) }
}

/// `0..<count` like `CountingSequence`, but `next()` is an out-of-line call
/// (`@inline(never)`), as it is for a sequence whose code the consumer cannot inline
/// (another module's non-`@inlinable` type, `AsyncStream`, most real sources). Iterating
/// `CountingSequence` directly compiles to a plain loop (hundreds of millions of elements
/// per second), which no consumer in another task can approach; this one is the floor a
/// real base gives.
public struct OpaqueCountingSequence: AsyncSequence, Sendable {
    public typealias Element = Int
    public typealias Failure = Never

    let counting: CountingSequence

    public init(_ count: Int) { self.counting = CountingSequence(count) }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = Int
        public typealias Failure = Never

        var counting: CountingSequence.AsyncIterator

        @inline(never)
        public mutating func next() async -> Int? { counting.step() }

        @inline(never)
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> Int? {
            counting.step()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(counting: counting.makeAsyncIterator()) }
}

/// A shared flag plus the number of elements a `StoppableCounter` produced.
public final class StopFlag: Sendable {
    let stopped = Atomic<Bool>(false)
    let produced = Atomic<Int>(0)

    public init() {}

    public func stop() { stopped.store(true, ordering: .releasing) }
    public var isStopped: Bool { stopped.load(ordering: .acquiring) }
    public var producedCount: Int { produced.load(ordering: .acquiring) }
}

/// 0, 1, 2, ... until the flag is stopped (or `limit` is reached), then nil.
/// Records how many elements it produced in the flag. Like a real source it
/// suspends now and then (`Task.yield()` every `yieldEvery` elements), so a
/// producer task pulling it cannot monopolise a thread of the cooperative pool.
public struct StoppableCounter: AsyncSequence, Sendable {
    public typealias Element = Int
    public typealias Failure = Never

    let flag: StopFlag
    let limit: Int
    let yieldEvery: Int

    public init(flag: StopFlag, limit: Int = .max, yieldEvery: Int = 8) {
        self.flag = flag
        self.limit = limit
        self.yieldEvery = Swift.max(1, yieldEvery)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = Int
        public typealias Failure = Never

        var current = 0
        let flag: StopFlag
        let limit: Int
        let yieldEvery: Int

        public mutating func next() async -> Int? {
            await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> Int? {
            if current % yieldEvery == yieldEvery - 1 { await Task.yield() }
            guard current < limit, !flag.isStopped else { return nil }
            defer {
                current &+= 1
                flag.produced.store(current, ordering: .releasing)
            }
            return current
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(flag: flag, limit: limit, yieldEvery: yieldEvery)
    }
}

/// Wraps an upstream and reports (once) when it is first pulled, i.e. when a
/// subscriber's demand has reached the upstream.
public struct SignalOnPull<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Failure == Never, Base.Element: Sendable {
    public typealias Element = Base.Element
    public typealias Failure = Never

    let base: Base
    let pulled: OneShot

    public init(_ base: Base, pulled: OneShot) {
        self.base = base
        self.pulled = pulled
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = Base.Element
        public typealias Failure = Never

        var base: Base.AsyncIterator
        let pulled: OneShot

        public mutating func next() async -> Element? {
            pulled.fire()
            return await base.next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Never) -> Element? {
            pulled.fire()
            return await base.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), pulled: pulled)
    }
}

// MARK: - Synchronisation helpers

/// Every party calls `arriveAndWait()`; all are released when the last one arrives.
/// `waitForAll()` waits without being a party.
public final class StartBarrier: Sendable {
    struct State {
        var remaining: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    let state: Mutex<State>

    public init(parties: Int) {
        state = Mutex(State(remaining: parties))
    }

    public func arriveAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let release: [CheckedContinuation<Void, Never>] = state.withLock { state in
                state.remaining -= 1
                state.waiters.append(continuation)
                guard state.remaining <= 0 else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in release { waiter.resume() }
        }
    }

    public func waitForAll() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.remaining <= 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}

/// A one-shot event: `fire()` (idempotent) releases everyone in `wait()`.
public final class OneShot: Sendable {
    struct State {
        var fired = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    let state = Mutex(State())

    public init() {}

    public func fire() {
        let release: [CheckedContinuation<Void, Never>] = state.withLock { state in
            guard !state.fired else { return [] }
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in release { waiter.resume() }
    }

    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.fired { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}

/// A timestamp slot that can be written from any thread (e.g. an `onTermination` handler).
public final class TimestampSlot: Sendable {
    let value = Atomic<UInt64>(0)

    public init() {}

    public func record() { value.store(monotonicNanos(), ordering: .releasing) }
    public var nanos: UInt64? {
        let v = value.load(ordering: .acquiring)
        return v == 0 ? nil : v
    }
}

// MARK: - Clock

/// Monotonic nanoseconds (never 0).
public func monotonicNanos() -> UInt64 {
    let epoch = clockEpoch  // initialise the (lazy) epoch before reading the clock
    let elapsed = ContinuousClock.now - epoch
    let (seconds, attoseconds) = elapsed.components
    return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000) &+ 1
}

private let clockEpoch = ContinuousClock.now

/// Wall time of `body` in seconds. Runs in the caller's isolation.
public func measureSeconds<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> T
) async rethrows -> (T, Double) {
    let start = monotonicNanos()
    let result = try await body()
    return (result, Double(monotonicNanos() - start) / 1e9)
}

// MARK: - Heap measurement

/// Bytes currently allocated from the C heap (glibc `mallinfo2()`: `uordblks + hblkhd`);
/// nil where that call does not exist.
public func heapBytesInUse() -> Int? {
    let bytes = cheapstats_heap_bytes_in_use()
    return bytes < 0 ? nil : Int(bytes)
}

// MARK: - Per-subscriber checks

/// What one subscriber saw.
public struct SubscriberTally: Sendable {
    public var received = 0
    public var failure: String?

    public init() {}
}

/// What all subscribers of one run saw.
public struct FanOutTally: Sendable {
    public var deliveries = 0
    public var subscribers = 0
    public var failures: [String] = []

    public init() {}

    public mutating func add(_ tally: SubscriberTally) {
        deliveries += tally.received
        subscribers += 1
        if let failure = tally.failure, failures.count < 5 { failures.append(failure) }
    }

    public var ok: Bool { failures.isEmpty }
}

/// Drains `iterator`. Lossless: must see exactly `0..<expected` in order
/// (any count when `expected` is nil). Lossy: must see a strictly increasing
/// subset of `0..<expected`.
public func consume<I: AsyncIteratorProtocol>(
    _ iterator: inout I,
    expected: Int?,
    lossless: Bool
) async -> SubscriberTally where I.Element == Int, I.Failure == Never {
    var tally = SubscriberTally()
    var last = -1
    let bound = expected ?? .max
    while let value = await iterator.next(isolation: nil) {
        if tally.failure == nil {
            if lossless ? (value != last + 1) : (value <= last || value >= bound) {
                tally.failure = "got \(value) after \(last)"
            }
        }
        last = value
        tally.received += 1
    }
    if tally.failure == nil, lossless, let expected, tally.received != expected {
        tally.failure = "received \(tally.received) of \(expected)"
    }
    return tally
}

// MARK: - Statistics

/// The value at quantile `q` (0...1) of `values` (nearest rank); nil when empty.
public func percentile(_ values: [Double], _ q: Double) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let rank = Int((q * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

public func median(_ values: [Double]) -> Double? { percentile(values, 0.5) }
