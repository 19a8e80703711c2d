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
        /// The count the observer read last (`nil` before the first): a newer offer of the
        /// same count (0 → 1 → 0 while it was not reading) is not a change.
        @usableFromInline
        var deliveredCount: Int?
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

    /// Set for an observer that is told every offer as it comes, outside the storage's
    /// lock, instead of reading counts with `next()`: a topic registry's
    /// (`AsyncSubjectTopics`), which acts on a count of 0. Offers may come out of order and
    /// repeat, so it reads the count again under its own lock before it acts.
    @usableFromInline
    let listener: (@Sendable (Int) -> Void)?

    @inlinable
    init(listener: (@Sendable (Int) -> Void)? = nil) {
        self.listener = listener
    }

    /// Offers count `count`, the storage's change number `version`.
    @inlinable
    func offer(version: UInt64, count: Int) {
        if let listener = self.listener {
            listener(count)
            return
        }
        let resuming = self.state.withLock { state -> UnsafeContinuation<Int?, Never>? in
            guard version > state.latest.version else { return nil }
            state.latest = (version, count)
            guard let waiting = state.waiting, state.takeLatest() != nil else { return nil }
            state.waiting = nil
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
                    if let count = state.takeLatest() { return .some(count) }
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
            return state.takeLatest().map { .some($0) }
        }
    }
}

extension SubscriberCountCell.State {
    /// The latest count if the observer has not read it and it differs from the count it
    /// read last; marks it read either way.
    @inlinable
    mutating func takeLatest() -> Int? {
        guard self.latest.version > self.delivered else { return nil }
        self.delivered = self.latest.version
        guard self.latest.count != self.deliveredCount else { return nil }
        self.deliveredCount = self.latest.count
        return self.latest.count
    }
}

extension SubscriberCountCell.State: InvariantChecking {
    @usableFromInline
    func checkInvariants() {
        precondition(self.delivered <= self.latest.version, "a count was delivered before it was offered")
    }
}
