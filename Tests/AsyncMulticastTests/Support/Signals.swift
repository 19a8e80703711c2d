// Ways for a test to learn that something happened in another task, without sleeping:
//
// - `Signal`: values sent from anywhere, awaited one at a time by one task, under a hang guard.
// - `Latch`: a one-shot release that any number of tasks wait for, ignoring cancellation.
// - `Tally`: a count that any task adds to, awaited by one task until it reaches a value.
// - `LockedLog` and `LockedFlag`: lock-protected records to read after the fact.

import Testing

@testable import AsyncMulticast

/// A one-consumer signal: `send` from anywhere (never blocks), `next()` waits for the next
/// value under a hang guard.
struct Signal<Value: Sendable>: Sendable {
    let stream: AsyncStream<Value>
    let continuation: AsyncStream<Value>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: Value.self)
    }

    func send(_ value: Value) {
        self.continuation.yield(value)
    }

    /// The next value sent, or `nil` (and a recorded issue) on a hang.
    func next(_ what: String = "signal", sourceLocation: SourceLocation = #_sourceLocation) async -> Value? {
        let stream = self.stream
        let value = await withTimeoutOrNil(what, sourceLocation: sourceLocation) { () async -> Value? in
            var iterator = stream.makeAsyncIterator()
            return await iterator.next()
        }
        return value ?? nil
    }
}

/// `wait()` suspends until `release()`, ignoring cancellation; once released, it returns at
/// once. A start line: releases many waiting tasks together.
final class Latch: Sendable {
    private let state = Lock<(released: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = self.state.withLock { state -> Bool in
                if state.released { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func release() {
        let waiters = self.state.withLock { state in
            state.released = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A lock-protected list of values appended from any task.
final class LockedLog<Value: Sendable>: Sendable {
    private let state = Lock([Value]())

    func append(_ value: Value) {
        self.state.withLock { $0.append(value) }
    }

    var values: [Value] {
        self.state.withLock { $0 }
    }

    var count: Int {
        self.state.withLock { $0.count }
    }
}

/// A lock-protected flag.
final class LockedFlag: Sendable {
    private let state = Lock(false)
    func set() { self.state.withLock { $0 = true } }
    var isSet: Bool { self.state.withLock { $0 } }
}

/// A count that any number of tasks add to; `wait(for:)` suspends until it reaches a value,
/// under a hang guard. Many tasks reporting progress to one test task: "all 100 readers got
/// this burst" without one `Signal` value per reader.
final class Tally: Sendable {
    private struct State: Sendable {
        var count = 0
        var waiters: [(target: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Lock(State())

    func add(_ amount: Int = 1) {
        let ready = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count += amount
            let count = state.count
            var ready: [CheckedContinuation<Void, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.target <= count else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    var count: Int { self.state.withLock { $0.count } }

    /// Suspends until the count is at least `target`; `false` (and a recorded issue) on a hang.
    @discardableResult
    func wait(
        for target: Int, _ what: String = "tally", sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Bool {
        let reached: Void? = await withTimeoutOrNil("\(what) reaching \(target)", sourceLocation: sourceLocation) {
            await self.waitUnguarded(for: target)
        }
        return reached != nil
    }

    private func waitUnguarded(for target: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let readyNow = self.state.withLock { state -> Bool in
                if state.count >= target { return true }
                state.waiters.append((target, continuation))
                return false
            }
            if readyNow { continuation.resume() }
        }
    }
}

/// Runs `first` and `second` in two tasks let go together by one latch, and waits for both:
/// two events racing, with nothing to order them.
func race(
    _ first: @escaping @Sendable () async -> Void, against second: @escaping @Sendable () async -> Void
) async {
    let start = Latch()
    let one = Task {
        await start.wait()
        await first()
    }
    let other = Task {
        await start.wait()
        await second()
    }
    start.release()
    await one.value
    await other.value
}
