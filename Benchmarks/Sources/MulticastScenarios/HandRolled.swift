// The hand-rolled broadcaster: what apps write today without a library.
// A Mutex-held dictionary of AsyncStream continuations, one stream per
// subscriber; `send` yields into every continuation under the lock.

import Synchronization

public final class HandRolledBroadcaster<Element: Sendable>: Sendable {
    struct State {
        var nextID = 0
        var continuations: [Int: AsyncStream<Element>.Continuation] = [:]
        var finished = false
        /// Cancelled when the last subscriber leaves (only if `cancelUpstreamWhenEmpty`).
        var upstream: Task<Void, Never>?
    }

    let state = Mutex(State())
    let bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy
    let cancelUpstreamWhenEmpty: Bool

    public init(
        bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy = .unbounded,
        cancelUpstreamWhenEmpty: Bool = false
    ) {
        self.bufferingPolicy = bufferingPolicy
        self.cancelUpstreamWhenEmpty = cancelUpstreamWhenEmpty
    }

    /// A new subscriber: registered immediately, sees everything sent from now on.
    public func subscribe() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: bufferingPolicy)
        let id: Int? = state.withLock { state in
            guard !state.finished else { return nil }
            defer { state.nextID += 1 }
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        // Fires when the subscriber's task is cancelled or its iterator is dropped.
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    func remove(_ id: Int) {
        let upstream: Task<Void, Never>? = state.withLock { state in
            state.continuations[id] = nil
            guard cancelUpstreamWhenEmpty, state.continuations.isEmpty else { return nil }
            defer { state.upstream = nil }
            return state.upstream
        }
        upstream?.cancel()
    }

    public func send(_ element: Element) {
        state.withLock { state in
            for continuation in state.continuations.values {
                continuation.yield(element)
            }
        }
    }

    public func finish() {
        let continuations: [AsyncStream<Element>.Continuation] = state.withLock { state in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        // Outside the lock: finish() runs onTermination, which takes the lock.
        for continuation in continuations { continuation.finish() }
    }

    public var subscriberCount: Int { state.withLock { $0.continuations.count } }

    /// Starts a task that forwards `upstream` to every subscriber, then finishes.
    @discardableResult
    public func forward<Upstream: AsyncSequence & Sendable>(_ upstream: Upstream) -> Task<Void, Never>
    where Upstream.Element == Element, Upstream.Failure == Never {
        let task = Task {
            for await element in upstream {
                self.send(element)
            }
            self.finish()
        }
        let cancelNow: Bool = state.withLock { state in
            if cancelUpstreamWhenEmpty, state.continuations.isEmpty { return true }
            state.upstream = task
            return false
        }
        if cancelNow { task.cancel() }
        return task
    }
}

extension BenchPolicy {
    /// AsyncStream has no back-pressure, so `.bounded(64)` maps to `.unbounded`
    /// (lossless, but a fast producer is never slowed down).
    public var handRolled: AsyncStream<Int>.Continuation.BufferingPolicy {
        switch self {
        case .bounded64, .unbounded: .unbounded
        case .newest64: .bufferingNewest(64)
        }
    }

    public var handRolledName: String {
        switch self {
        case .bounded64, .unbounded: ".unbounded"
        case .newest64: ".bufferingNewest(64)"
        }
    }
}
