// The state of one shard of an `AsyncSubjectTopics` registry: its keys and their subjects,
// changed only by the transitions below, under the shard's lock. Each transition is named
// after the event the registry observed and returns what must happen outside the lock
// (resume, cancel, start a timer, complete a subject); it never resumes, cancels or starts
// anything itself.
//
// The rule that makes joining and leaving race-free: a subscriber joins a key's subject only
// under the shard's lock (`subscriberJoining`, then the join, in one critical section), and a
// key is removed only under that lock, after reading its subject's count there (0) or while
// its idle window is open (a join closes it). So a subject that is removed has no subscriber
// and never gets one: a join either finds it live (and keeps it) or finds none (and creates
// a fresh one).

/// How long a key outlives its last subscriber.
@usableFromInline
enum TopicWindow: Sendable, Equatable {
    /// Freed as soon as its last subscriber leaves.
    case none
    /// Kept for this long on the registry's clock, then freed if nobody joined meanwhile.
    case timed(Duration)
    /// Never freed (a window of 2^40 seconds or longer).
    case forever
}

/// How the registry ended: `finish()` or `fail(_:)`.
@usableFromInline
enum TopicsCompletion<Failure: Error>: Sendable {
    case finished
    case failed(Failure)

    /// The argument of `MulticastStorage.complete(failure:)`.
    @inlinable
    var failure: Failure? {
        switch self {
        case .finished: return nil
        case .failed(let error): return error
        }
    }
}

@usableFromInline
struct TopicShard<Key: Hashable & Sendable, Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias Subject = MulticastStorage<Element, Failure>
    @usableFromInline
    typealias FreeWaiter = (token: UInt64, continuation: UnsafeContinuation<Bool, Never>)

    /// A live key.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline
        let subject: Subject
        /// Names this subject among the ones the key has had: a listener or timer of an
        /// older one finds another number and does nothing.
        @usableFromInline
        let number: UInt64
        /// The number of the idle window open now: the key has no subscriber and its timer
        /// runs. `nil` while the key has subscribers, or has none but nobody looked yet.
        @usableFromInline
        var idleWindow: UInt64?
        /// The timer of the open idle window, once its task is created.
        @usableFromInline
        var timer: Task<Void, Never>?
        /// Tasks in `waitUntilFreed(_:)`, resumed with `true` when this subject is freed.
        @usableFromInline
        var freeWaiters: [FreeWaiter] = []

        @inlinable
        init(subject: Subject, number: UInt64, idleWindow: UInt64?) {
            self.subject = subject
            self.number = number
            self.idleWindow = idleWindow
        }
    }

    @usableFromInline
    var entries: [Key: Entry] = [:]
    @usableFromInline
    var completion: TopicsCompletion<Failure>?
    /// The source of entry, window and waiter numbers.
    @usableFromInline
    var lastNumber: UInt64 = 0

    @inlinable
    init() {}

    @inlinable
    mutating func takeNumber() -> UInt64 {
        self.lastNumber &+= 1
        return self.lastNumber
    }

    // MARK: Joining

    /// What a subscriber joining a key must do.
    @usableFromInline
    enum Joining: Sendable {
        /// Join `subject` now, in this critical section. `created` is the number of a subject
        /// created for this join (its listener is registered outside the lock); `cancelling`
        /// is the timer of the idle window this join closed.
        case join(Subject, created: UInt64?, cancelling: Task<Void, Never>?)
        /// The registry has completed: the subscriber gets an ended subscription.
        case completed(TopicsCompletion<Failure>)
    }

    /// A subscriber asks to join `key`: its subject, created by `makeSubject` if the key has
    /// none. A join closes the key's idle window.
    @inlinable
    mutating func subscriberJoining(_ key: Key, makeSubject: () -> Subject) -> Joining {
        if let completion = self.completion { return .completed(completion) }
        if let index = self.entries.index(forKey: key) {
            let cancelling = self.entries.values[index].timer
            self.entries.values[index].idleWindow = nil
            self.entries.values[index].timer = nil
            return .join(self.entries.values[index].subject, created: nil, cancelling: cancelling)
        }
        let number = self.takeNumber()
        let subject = makeSubject()
        self.entries[key] = Entry(subject: subject, number: number, idleWindow: nil)
        return .join(subject, created: number, cancelling: nil)
    }

    // MARK: Sending

    /// Where an element sent to a key goes.
    @usableFromInline
    enum Sending: Sendable {
        /// To `subject`, outside the lock. `created`: a subject created by this send (a key
        /// that keeps a replay), whose listener is registered and whose idle window, number
        /// `window`, is timed outside the lock.
        case deliver(Subject, created: (number: UInt64, window: UInt64)?)
        /// Nowhere: the key has no subject and keeps no replay, or the registry completed.
        case nowhere
    }

    /// An element is sent to `key`. A key without a subject gets one only if `keepsReplay`:
    /// the element is kept for later subscribers, its idle window open from now.
    @inlinable
    mutating func sending(to key: Key, keepsReplay: Bool, makeSubject: () -> Subject) -> Sending {
        guard self.completion == nil else { return .nowhere }
        if let entry = self.entries[key] { return .deliver(entry.subject, created: nil) }
        guard keepsReplay else { return .nowhere }
        let number = self.takeNumber()
        let window = self.takeNumber()
        let subject = makeSubject()
        self.entries[key] = Entry(subject: subject, number: number, idleWindow: window)
        return .deliver(subject, created: (number, window))
    }

    // MARK: Leaving

    /// What follows a key's subject reporting a count of 0.
    @usableFromInline
    enum Emptied: Sendable {
        case nothing
        /// The key was removed: resume its waiters, drop the subject outside the lock.
        case freed(Entry)
        /// The key's idle window opened: time it outside the lock.
        case windowOpened(UInt64)
    }

    /// Subject `number` of `key` reported a count of 0 (a subscriber left or was evicted,
    /// or its listener was registered). Offers come late and out of order, so the count is
    /// read again here, under the lock (`subscriberCount`, the subject's own lock nested in
    /// this one): only a key that has no subscriber now, and is not idle yet, is freed or
    /// starts its window.
    @inlinable
    mutating func subjectEmptied(
        _ key: Key, number: UInt64, window: TopicWindow, subscriberCount: (Subject) -> Int
    ) -> Emptied {
        guard let index = self.entries.index(forKey: key) else { return .nothing }
        let entry = self.entries.values[index]
        guard entry.number == number, entry.idleWindow == nil, subscriberCount(entry.subject) == 0 else {
            return .nothing
        }
        switch window {
        case .none:
            self.entries.remove(at: index)
            return .freed(entry)
        case .forever:
            return .nothing
        case .timed:
            let opened = self.takeNumber()
            self.entries.values[index].idleWindow = opened
            return .windowOpened(opened)
        }
    }

    /// The timer task of window `window` of subject `number` was created: it is kept for a
    /// join to cancel, or returned, to be cancelled at once, if that window is closed.
    @inlinable
    mutating func timerCreated(
        _ task: Task<Void, Never>, key: Key, number: UInt64, window: UInt64
    ) -> Task<Void, Never>? {
        guard let index = self.entries.index(forKey: key), self.entries.values[index].number == number,
            self.entries.values[index].idleWindow == window
        else { return task }
        self.entries.values[index].timer = task
        return nil
    }

    /// The timer of window `window` of subject `number` expired: the key is freed if that
    /// window is still open (no join since, so no subscriber).
    @inlinable
    mutating func timerExpired(_ key: Key, number: UInt64, window: UInt64) -> Entry? {
        guard let index = self.entries.index(forKey: key), self.entries.values[index].number == number,
            self.entries.values[index].idleWindow == window
        else { return nil }
        return self.entries.remove(at: index).value
    }

    // MARK: Waiting for a key to be freed

    /// A task waits for `key` to be freed: `false` if it has no subject (resume it at once).
    @inlinable
    mutating func freeWaitRequested(
        _ key: Key, token: UInt64, continuation: UnsafeContinuation<Bool, Never>
    ) -> Bool {
        guard let index = self.entries.index(forKey: key) else { return false }
        self.entries.values[index].freeWaiters.append((token, continuation))
        return true
    }

    /// A task waiting for `key` to be freed was cancelled: its continuation, to resume with
    /// `false`, if it still waits.
    @inlinable
    mutating func freeWaitCancelled(_ key: Key, token: UInt64) -> UnsafeContinuation<Bool, Never>? {
        guard let index = self.entries.index(forKey: key),
            let position = self.entries.values[index].freeWaiters.firstIndex(where: { $0.token == token })
        else { return nil }
        return self.entries.values[index].freeWaiters.remove(at: position).continuation
    }

    // MARK: Completing

    /// The registry completes: every key is forgotten, to be completed outside the lock
    /// (empty if it had completed already).
    @inlinable
    mutating func completed(_ completion: TopicsCompletion<Failure>) -> [Entry] {
        guard self.completion == nil else { return [] }
        self.completion = completion
        defer { self.entries = [:] }
        return Array(self.entries.values)
    }
}
