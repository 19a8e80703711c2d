// When a key's subject is freed: its listener (told each subscriber count of the subject,
// outside the subject's lock) reports a count of 0, the shard reads the count again under its
// lock and frees the key or opens its idle window, whose timer frees it unless a subscriber
// joins first. And what can be observed of it: counts, live keys, waiting for a key to go.

extension AsyncSubjectTopics {
    // MARK: Observing

    /// The number of subscribers of `key` now: 0 if it has no subject. An evicted subscriber
    /// no longer counts.
    ///
    /// ```swift
    /// print(rooms.subscriberCount(of: "swift"))   // presence in the room
    /// ```
    @inlinable
    public func subscriberCount(of key: Key) -> Int {
        let subject = self.shard(for: key).withLock { $0.entries[key]?.subject }
        return subject?.subscriberCount ?? 0
    }

    /// Whether `key` has a subject now: it has subscribers, or is kept by `keepAlive`.
    ///
    /// ```swift
    /// if !rooms.isLive("swift") { print("nobody in the room") }
    /// ```
    @inlinable
    public func isLive(_ key: Key) -> Bool {
        self.shard(for: key).withLock { $0.entries[key] != nil }
    }

    /// The number of keys that have a subject now. Each shard is read in turn, so while keys
    /// come and go the sum is approximate; it is exact when nothing changes.
    ///
    /// ```swift
    /// print("open rooms:", rooms.keyCount)
    /// ```
    @inlinable
    public var keyCount: Int {
        self.shards.reduce(0) { sum, shard in sum + shard.withLock { $0.entries.count } }
    }

    /// Returns once `key` has no subject: at once if it has none now, else when that subject
    /// is freed (after its last subscriber left, and `keepAlive`), or when the topics
    /// complete. Throws `CancellationError` if the task is cancelled first. A subject created
    /// for the key afterwards is not waited for.
    ///
    /// ```swift
    /// try await rooms.waitUntilFreed("swift")
    /// print(rooms.isLive("swift"))   // false, unless someone joined since
    /// ```
    @inlinable
    public func waitUntilFreed(_ key: Key) async throws(CancellationError) {
        let shard = self.shard(for: key)
        let token = shard.withLock { $0.takeNumber() }
        let freed = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                // Read before the lock: if the handler already ran, it found nothing to
                // resume, so a waiter stored now would never be resumed.
                let cancelled = Task.isCancelled
                let resumeNow = shard.withLock { shard -> Bool? in
                    if cancelled { return false }
                    return shard.freeWaitRequested(key, token: token, continuation: continuation) ? nil : true
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            shard.withLock { $0.freeWaitCancelled(key, token: token) }?.resume(returning: false)
        }
        if !freed { throw CancellationError() }
    }

    // MARK: Freeing

    /// Registers the listener of subject `number` of `key`, outside any lock. It is told the
    /// current count first: if the subscriber that created the subject left already, that
    /// 0 frees the key.
    @inlinable
    func listen(to subject: Subject, of key: Key, number: UInt64) {
        // Weak: a key kept for good holds its subject, which holds this listener.
        _ = subject.observeSubscriberCount { [weak self] count in
            if count == 0 { self?.subjectEmptied(key, number: number) }
        }
    }

    /// Subject `number` of `key` told its listener its count is 0.
    @inlinable
    func subjectEmptied(_ key: Key, number: UInt64) {
        let (emptied, noneLive) = self.shard(for: key).withLock { shard in
            let emptied = shard.subjectEmptied(key, number: number, window: self.window) { $0.subscriberCount }
            guard case .freed = emptied else { return (emptied, false) }
            return (emptied, self.session?.keysRemoved(1) ?? false)
        }
        switch emptied {
        case .nothing: return
        case .freed(let entry):
            self.free(entry, completing: nil)
            if noneLive { self.session?.lastKeyFreed() }
        case .windowOpened(let window): self.startTimer(of: key, number: number, window: window)
        }
    }

    /// Times idle window `window` of subject `number` of `key`, in a task of its own.
    @inlinable
    func startTimer(of key: Key, number: UInt64, window: UInt64) {
        guard case .timed(let length) = self.window else { return }
        let clock = self.clock
        // Detached, as a shared sequence's timer is: it inherits nothing of the task whose
        // leave opened the window (its priority, its task-locals).
        let task = Task.detached { [weak self] in
            let deadline = clock.now().saturatingAdding(length)
            do {
                try await clock.sleepUntil(deadline)
            } catch {
                // Cancelled: a subscriber joined. A clock that fails closes the window at
                // once, as a shared sequence's windows do.
                if Task.isCancelled { return }
            }
            self?.timerExpired(of: key, number: number, window: window)
        }
        let stale = self.shard(for: key).withLock { shard in
            shard.timerCreated(task, key: key, number: number, window: window)
        }
        stale?.cancel()
    }

    @inlinable
    func timerExpired(of key: Key, number: UInt64, window: UInt64) {
        let (freed, noneLive) = self.shard(for: key).withLock { shard in
            let freed = shard.timerExpired(key, number: number, window: window)
            return (freed, freed != nil && (self.session?.keysRemoved(1) ?? false))
        }
        if let freed { self.free(freed, completing: nil) }
        if noneLive { self.session?.lastKeyFreed() }
    }

    /// Outside the lock: a removed key's subject is completed (if the topics complete), its
    /// timer cancelled and its waiters resumed; the subject itself goes when the last
    /// reference does (a subscription that has left, or here: its elements' `deinit`s run
    /// outside the lock).
    @inlinable
    func free(_ entry: Shard.Entry, completing completion: TopicsCompletion<Failure>?) {
        if let completion { entry.subject.complete(failure: completion.failure) }
        entry.timer?.cancel()
        for waiter in entry.freeWaiters { waiter.continuation.resume(returning: true) }
    }
}
