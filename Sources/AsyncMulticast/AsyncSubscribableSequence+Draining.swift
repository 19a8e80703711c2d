// A drained shutdown: end a subject or a source and wait, with a deadline, until the end has
// reached every subscriber (MulticastStateMachine+Draining.swift decides when it has).

extension AsyncSubscribableSequence {
    /// Waits until the end of this sequence has reached every subscriber, for at most
    /// `timeout`. Returns `true` once the sequence has ended (finished or failed) and no
    /// subscriber is left: each one read what was buffered for it and then the end, or left
    /// otherwise (cancelled, released). Returns `false` when `timeout` passes first, and at
    /// once when the calling task is cancelled. It ends nothing itself: a subject's
    /// ``AsyncSubject/finish(drainingWithin:)`` and a source's
    /// ``AsyncSharedSource/finish(drainingWithin:)`` end it and then wait; wait for an
    /// ``AsyncSharedService`` after its ``AsyncSharedService/run()`` returned.
    ///
    /// ```swift
    /// hosting.cancel()   // the shared service's run() ends the upstream
    /// await hosting.value
    /// let drained = await ticks.waitUntilDrained(within: .seconds(5))
    /// print(drained ? "every client got every tick" : "\(ticks.subscriberCount) did not")
    /// ```
    ///
    /// - **Drained means read to the end.** A subscriber counts until it asks for the
    ///   element after its last one and gets the end: only then has it been handed
    ///   everything and is done with it (an iterator takes ready elements in batches, and a
    ///   `for await` loop whose body writes each element to a connection has written them
    ///   all). One that holds elements, or was handed everything but does not ask again (its
    ///   task is stuck in a write, or never iterates), keeps the wait until the deadline;
    ///   then ``subscriberCount`` says how many were left.
    /// - A subscriber that joins after the end reads what it is replayed (if anything) and
    ///   the end at once: it delays the return only until it has.
    /// - `timeout` is timed on the sequence's clock (the `clock:` it was created with,
    ///   `ContinuousClock` by default); a sleep of that clock that fails ends the wait as
    ///   the deadline would.
    /// - It never slows the subscribers or the producer; several tasks may wait at once.
    ///
    /// - Parameter timeout: how long to wait at most; `.zero` only checks; not negative.
    @inlinable
    @discardableResult
    public func waitUntilDrained(within timeout: Duration) async -> Bool {
        precondition(timeout >= .zero, "waitUntilDrained(within:): timeout must not be negative, got \(timeout)")
        return await self._core.storage.waitUntilDrained(within: timeout)
    }
}

extension AsyncSubject {
    /// Ends the subject, as ``finish()`` does, then waits for at most `timeout` until every
    /// subscriber has read what was buffered for it and the end, or has left
    /// (``AsyncSubscribableSequence/waitUntilDrained(within:)``). Returns `true` if they all did,
    /// `false` if `timeout` passed first or the calling task was cancelled (then at once).
    /// If the subject had completed already, it only waits.
    ///
    /// A server's graceful shutdown: it ends each room and lets every client be handed what
    /// was sent to it before the server closes the connections.
    ///
    /// ```swift
    /// let room = AsyncPassthroughSubject<String, Never>()
    /// let client = room.subscribe()   // a connected client
    /// room.send("last words")
    /// let reading = Task { for await line in client { print(line) } }
    /// let drained = await room.finish(drainingWithin: .seconds(5))
    /// print("drained:", drained)   // last words, then drained: true
    /// ```
    ///
    /// Why a method, not a `run()` as ``AsyncSharedService`` has: a subject hosts no
    /// upstream, so a `run()` would only wait to be cancelled, and then wait again, for the
    /// subscribers, in a cancelled task, where a deadline's sleep returns at once. Called
    /// where the shutdown happens (a `ServiceGroup` service after `gracefulShutdown()`, a
    /// signal handler, a test), it waits only for the subscribers, and a cancellation of the
    /// caller (a forced shutdown) ends the wait at once. Guides/ServingClients.md, "Shutting
    /// down", shows the service and where it goes among a Hummingbird server's services.
    ///
    /// - Parameter timeout: how long to wait at most, on the subject's clock; not negative.
    @inlinable
    @discardableResult
    public func finish(drainingWithin timeout: Duration) async -> Bool {
        precondition(timeout >= .zero, "finish(drainingWithin:): timeout must not be negative, got \(timeout)")
        self._core.storage.complete(failure: nil)
        return await self._core.storage.waitUntilDrained(within: timeout)
    }
}

extension AsyncSharedSource {
    /// Ends the source from outside, then waits for at most `timeout` until every subscriber
    /// has read what was buffered for it and the end, or has left
    /// (``AsyncSubscribableSequence/waitUntilDrained(within:)``). Returns `true` if they all did,
    /// `false` if `timeout` passed first or the calling task was cancelled (then at once).
    ///
    /// The running session, if any, is cancelled: `stop` is called in its task, as when the
    /// last subscriber leaves, and the values the producer sends afterwards are ignored. The
    /// source then stays ended, as after ``Emitter/finish()``: a later subscriber gets the
    /// replayed values, if any, then the end, and `start` is never called again. This waits
    /// for the subscribers, not for `stop` to return. If the source had ended already, it
    /// only waits.
    ///
    /// ```swift
    /// let reading = Task { for await path in paths { print(path) } }
    /// // ... at shutdown: the session stops; the reader gets what was sent, then the end
    /// let drained = await paths.finish(drainingWithin: .seconds(5))
    /// print("drained:", drained)   // drained: true
    /// ```
    ///
    /// A method rather than a `run()` for the reasons ``AsyncSubject/finish(drainingWithin:)``
    /// gives: the session runs in a task of the source's own, started by demand.
    ///
    /// - Parameter timeout: how long to wait at most, on the source's clock; not negative.
    @inlinable
    @discardableResult
    public func finish(drainingWithin timeout: Duration) async -> Bool {
        precondition(timeout >= .zero, "finish(drainingWithin:): timeout must not be negative, got \(timeout)")
        self._core.storage.finishByOwner()
        return await self._core.storage.waitUntilDrained(within: timeout)
    }
}
