// Real continuations for tests that drive `MulticastStateMachine` directly: the machine stores
// and returns `UnsafeContinuation`s, so a test needs real ones, each suspended in a task of its
// own. `Suspended` is one, whose resumption is recorded; `ContinuationPool` is a fixed set of
// them that a test hands out as tokens, tells apart by identity and never resumes while it
// runs (the state machine explorer copies machines that hold them), then resumes each exactly
// once at its end.

import Testing

@testable import AsyncMulticast

/// A real continuation, suspended in a task of its own, whose resumption is recorded: the
/// machine stores and returns real continuations, and a test can only tell which one it
/// resumed by what the waiting task received (or, never resuming it, by its `identity`).
struct Suspended<Value: Sendable>: Sendable {
    let continuation: UnsafeContinuation<Value, Never>
    let received: Lock<Value?>

    static func make() async -> Suspended<Value> {
        let received = Lock<Value?>(nil)
        let (handoff, sender) = AsyncStream.makeStream(of: UnsafeContinuation<Value, Never>.self)
        Task {
            let value = await withUnsafeContinuation { sender.yield($0) }
            received.withLock { $0 = value }
        }
        for await continuation in handoff { return Suspended(continuation: continuation, received: received) }
        preconditionFailure("no continuation was handed over")
    }

    /// Which suspended task this is: see `UnsafeContinuation.identity`.
    var identity: UInt { self.continuation.identity }

    /// Waits until the waiting task received its value; `nil` (and a recorded issue) after
    /// 30 s, a hang guard: a count of yields could run out while the resumed task waits for
    /// a thread.
    func value() async -> Value? {
        try? await waitUntil("the resumed task to receive its value", seconds: 30) {
            self.received.withLock { $0 } != nil
        }
        return self.received.withLock { $0 }
    }
}

extension UnsafeContinuation {
    /// The suspended task this continuation resumes, as a number: two continuations are the
    /// same exactly when their identities are. (An `UnsafeContinuation` is one pointer to its
    /// task; it is neither `Equatable` nor `Hashable`.) Reading it resumes nothing.
    var identity: UInt { unsafeBitCast(self, to: UInt.self) }
}

/// Continuations suspended for as long as a test runs, handed to machines as tokens: a machine
/// state may be copied and each copy driven on, so its continuations must never be resumed
/// while the test runs; a test tells which of them a transition would resume by `identity`.
/// `release()` resumes each of them exactly once, at the end.
final class ContinuationPool: Sendable {
    typealias SubscriberResult = Result<Int?, TestError>

    /// For subscribers suspended in `next()`.
    let subscribers: [Suspended<SubscriberResult>]
    /// For producers and senders waiting for room.
    let producers: [Suspended<Bool>]
    /// For a hosted `run()` waiting for an iteration (a state holds at most one).
    let host: Suspended<UInt64?>

    private init(subscribers: [Suspended<SubscriberResult>], producers: [Suspended<Bool>], host: Suspended<UInt64?>) {
        self.subscribers = subscribers
        self.producers = producers
        self.host = host
    }

    static func make(subscribers: Int, producers: Int) async -> ContinuationPool {
        var waiting: [Suspended<SubscriberResult>] = []
        for _ in 0..<subscribers { waiting.append(await .make()) }
        var parked: [Suspended<Bool>] = []
        for _ in 0..<producers { parked.append(await .make()) }
        return ContinuationPool(subscribers: waiting, producers: parked, host: await .make())
    }

    /// The first of `pool` that is not `inUse` (identities): a state holds each at most once.
    static func first<Value>(of pool: [Suspended<Value>], notIn inUse: [UInt]) -> Suspended<Value> {
        guard let free = pool.first(where: { !inUse.contains($0.identity) }) else {
            preconditionFailure("a continuation pool of \(pool.count) is too small: every one is in use")
        }
        return free
    }

    /// Resumes every continuation of the pool, once, and waits until each task received its
    /// value. Returns whether every one did (the hang guard of `Suspended.value()` records
    /// an issue for one that did not).
    func release() async -> Bool {
        for waiting in self.subscribers { waiting.continuation.resume(returning: .success(nil)) }
        for parked in self.producers { parked.continuation.resume(returning: false) }
        self.host.continuation.resume(returning: nil)
        var all = await self.host.value() != nil
        for waiting in self.subscribers {
            if await waiting.value() == nil { all = false }
        }
        for parked in self.producers {
            if await parked.value() == nil { all = false }
        }
        return all
    }
}
