/// One observer of a storage's subscriber count: the latest count it has not read yet, and
/// the task waiting for it. It conflates: a slow observer skips to the latest count.
///
/// The storage numbers each change under its own lock and offers it afterwards, outside
/// that lock, so offers may arrive out of order; the version makes a late, older offer
/// harmless.
@usableFromInline
final class SubscriberCountCell: Sendable {
    @usableFromInline
    struct State: Sendable {
        /// The newest count offered, and its version.
        @usableFromInline
        var latest: (version: UInt64, count: Int) = (0, 0)
        /// The version the observer read last.
        @usableFromInline
        var delivered: UInt64 = 0
        /// The observer's suspended `next()`.
        @usableFromInline
        var waiting: UnsafeContinuation<Int?, Never>?
        /// The observer left (cancelled or released): `next()` returns `nil`.
        @usableFromInline
        var ended = false

        @inlinable
        init() {}
    }

    @usableFromInline
    let state = Lock(State())

    @inlinable
    init() {}

    /// Offers count `count`, the storage's change number `version`.
    @inlinable
    func offer(version: UInt64, count: Int) {
        let resuming = self.state.withLock { state -> UnsafeContinuation<Int?, Never>? in
            guard version > state.latest.version else { return nil }
            state.latest = (version, count)
            guard let waiting = state.waiting else { return nil }
            state.waiting = nil
            state.delivered = version
            return waiting
        }
        resuming?.resume(returning: count)
    }

    /// Ends the observation: a waiting `next()` returns `nil`.
    @inlinable
    func end() {
        let resuming = self.state.withLock { state -> UnsafeContinuation<Int?, Never>? in
            state.ended = true
            defer { state.waiting = nil }
            return state.waiting
        }
        resuming?.resume(returning: nil)
    }

    /// The next count not read yet, waiting for a change if there is none; `nil` once ended.
    @inlinable
    func next(isolation actor: isolated (any Actor)?) async -> Int? {
        if let ready = self.takeReady() { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Int?, Never>) in
                let resumeNow = self.state.withLock { state -> Int?? in
                    if state.ended || Task.isCancelled { return .some(nil) }
                    if state.latest.version > state.delivered {
                        state.delivered = state.latest.version
                        return .some(state.latest.count)
                    }
                    state.waiting = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            self.end()
        }
    }

    @inlinable
    func takeReady() -> Int?? {
        self.state.withLock { state -> Int?? in
            if state.ended { return .some(nil) }
            guard state.latest.version > state.delivered else { return nil }
            state.delivered = state.latest.version
            return .some(state.latest.count)
        }
    }
}

extension SubscriberCountCell.State: InvariantChecking {
    @usableFromInline
    func checkInvariants() {
        precondition(self.delivered <= self.latest.version, "a count was delivered before it was offered")
    }
}
