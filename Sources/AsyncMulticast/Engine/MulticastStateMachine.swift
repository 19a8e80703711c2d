// The engine behind every face of the library. Its state and its transitions are split by
// concern: +Effects (what a transition leaves to do), +Subscribers (the subscriber table),
// +Lanes (per-policy histograms and all index arithmetic; +Pending: what a subscriber has
// left to read), +Reading (+HeldBatches: what a `.bufferingNewest` read takes ahead that its
// policy may still drop), +Producing (+Parking: producers waiting for room), +Upstream
// (start, stop, connections, the end), +Timer (the windows and the timer task), +Hosting (a
// hosted run()), +Resuming (a join after a position), +Priority, +Observers (who hears a
// count change or the completion), +Draining (who waits until the end has reached every
// subscriber) and +Invariants (the rules below, checked by code). Overflow.swift maps each buffering
// policy to the one rule its lane follows; PrivateQueue.swift holds the private queues.
//
// POSITIONS. Every element produced gets an absolute position; `tail` is the next one. For
// one lane (the subscribers sharing a buffering policy, so one `Overflow` rule):
//
//   elements.startIndex        lane.minCursor      replayStart                        tail
//        |                          |                     |                            |
//        v                          v                     v                            v
//        [ kept for a slower lane ][ counts[p]: members whose cursor is p, for p < tail ]
//                               (stored up to the newest occupied position: CursorHistogram)
//                                                              + atTail: members at tail
//                                                              + waiting: those suspended
//   - `.dropOldest(keep)` (`.bufferingNewest(keep)`, `.bufferingOldest(0)`): its members
//     read from max(their cell, tail - keep) (`Lane.minCursor`): a cell before that has
//     dropped its oldest, and is moved there lazily (`Lane.settle()`), when a member reads
//     or leaves or once it is far behind; a send moves no cell.
//   - `.freeze(keep)` (`.bufferingOldest(keep)`, keep > 0): a full cell freezes: its keep
//     elements are copied into a FrozenGroup keyed by its old cursor (< minCursor); each
//     member then reads a private queue (`privateQueues`) with room for keep, and rejoins
//     at the tail when it is empty.
//   - `.evict(limit)` (`.evicting(limit)`): a cell that would hold limit + 1 leaves the
//     histogram; its members are `evicted` and learn it on their next read, with why and
//     what they held then (`Lane.evictions`, one record per limit and tail). They stop
//     counting in `subscriberCount` at once (an eviction is a leave for the count, and for
//     an `.automatic` upstream whose last subscriber it was). A soft limit is a deadline per
//     position past its count (`Lane.softDeadlines`), written at a clock reading the storage
//     takes after the lock (`FollowUp.reading`, `clockRead(at:through:)`) and timed by the timer.
//   - `.park(bound)` (`.bounded(bound)`): the producer parks once a member holds bound.
//   - Elements taken into an iterator's batch are past the cursor: handed over, not counted.
//     A `.dropOldest(keep)` member's batch (keep >= 2) may still be dropped: its iterator
//     checks each element against the tail the storage publishes (`HeldBatch.take`).
//   - An `.evict` subscriber joins at the tail; its replayed elements are a private
//     greeting (`greetings`) it reads first, so only what is produced after it joined can
//     evict it.
//   - When a multicast connection ends, every subscriber leaves its lane with a private
//     queue of what it still had to read (`Slot.noLane`), then ends.
//
// INVARIANTS (see +Invariants):
// - elements.endIndex == tail; elements.startIndex == max(0, min(replayStart, every
//   lane's minCursor)): everything someone may read is stored, and nothing else.
// - A lane exists exactly while it has members, and no two lanes share a policy; its
//   `overflow` is its policy's; it holds batches (`.dropOldest` ones) exactly when its policy
//   says so (`Lane.holdsBatches(_:)`, which a subscription reads).
// - lane.members == atTail + sum(counts) + frozen members + members reading a private queue
//   + evicted members.
// - counts.endIndex == tail; its first stored count is positive, none is negative.
// - lane.waiting == its members suspended in `next()`, all of them at the tail (in atTail).
// - A `.dropOldest` or `.freeze` member holds at most keep, an `.evict` one at most limit.
//   (A `.park` one holds at most its bound, except past a subject's synchronous `send`,
//   which cannot wait.)
// - Evicted members are on `.evict` lanes only; frozen cells, room lists and members reading
//   a private queue on `.freeze` lanes only.
// - Every evicted member's cursor lies in one of its lane's eviction records, which are
//   disjoint, in order, below minCursor, held at or above their cursors, and count exactly
//   the lane's evicted members (none is empty).
// - A subscriber of an ended connection (`Slot.noLane`) reads only its private queue, which
//   ends it, and is never waiting.
// - An upstream's producer is parked only while some member holds more than its lane's
//   resume level; a subject's senders only while some member has no room for one more.
// - A subject's parked producers are its senders, each with the element it waits to send, in
//   the order they parked; an upstream's producer parks without one (its element is in).
// - Positions are the numbering of the elements a subscriber receives, for the machine's
//   whole life (an upstream restart goes on from `tail`); the history a resumed subscriber
//   reads (`historyStart..<tail`, the replay window) is stored (+Resuming).
// - The end (finished or failed) is part of the upstream state: `.terminated(Terminal)`.
// - A greeting belongs to a live, not waiting, not evicted `.evict` subscriber, and is not
//   used up.
// - No waiting subscriber's priority is above the upstream task's (`upstreamPriority`).
// - A timer task is the machine's only while a window or a soft deadline may need timing; it
//   is counted among the timer tasks running, and wakes no later than its window's deadline
//   and the next soft deadline. (The storage: it holds a timer task iff the machine says one
//   runs.)
// - subscriberCount == live slots - evicted ones. Unless a reading is awaited
//   (`FollowUp.reading`): a member past a soft limit has its deadline written, and an
//   `.automatic` upstream does not run without subscribers.
// - A hosted `run()` waits for an iteration only while none runs; once it returned, the
//   machine has terminated; only a returned `run()` waits for the timer tasks.
// - A drain observer is kept only until the machine has ended with no subscriber left.
// - A departed eviction (`departedEvictions`) belongs to a slot no subscriber holds.
// - (The storage, after every critical section: no observer is left untold, and the
//   upstream task it holds is the current iteration's.)

/// Identifies one subscriber inside a ``MulticastStateMachine``.
///
/// `slot` indexes the machine's subscriber table; `generation` changes every time a slot is
/// freed, so an id that outlived its subscriber never touches the slot's next occupant.
@usableFromInline
struct SubscriberID: Hashable, Sendable {
    @usableFromInline
    var slot: UInt32
    @usableFromInline
    var generation: UInt32

    @inlinable
    init(slot: UInt32, generation: UInt32) {
        self.slot = slot
        self.generation = generation
    }
}

/// Who drives the upstream, and when it starts and stops.
@usableFromInline
enum UpstreamMode: Sendable, Hashable {
    /// `share()` / `replay(_:)`: the first demand starts the upstream, the last subscriber
    /// leaving stops it (after the keep-alive window), a later demand restarts it.
    case automatic
    /// `multicast()`: `connect()` starts it, and only the connection stops it. The iterators
    /// of `autoconnect()` also start it by waiting (`Slot.connectsOnDemand`).
    case manual
    /// Subjects: there is no upstream task; elements are pushed in with `send`.
    case push
}

/// The engine behind every face of the library: `share`, `replay`, `multicast` and subjects.
///
/// A pure, synchronous state machine: it owns the shared buffer, every subscriber's cursor,
/// the suspended subscribers' continuations and the upstream's lifecycle, and each transition
/// returns what must happen next (resume these continuations, start or cancel the upstream).
/// It never resumes a continuation itself, never creates a task and holds no lock; the
/// ``MulticastStorage`` that owns it does those things, outside its lock.
///
/// ## The shared buffer
/// Every element the upstream produces gets an absolute position (0, 1, 2, …). Elements are
/// stored once, in `elements`, which keeps the window from the oldest position some
/// subscriber still has to read (or the replay window, if that starts earlier) to `tail`.
/// A subscriber is a cursor: the position it reads next.
///
/// ## Why taking an element scans no subscriber
/// Subscribers are grouped in *lanes*, one per buffering policy in use (normally just one).
/// A lane keeps a histogram `counts[p]` = number of its subscribers whose cursor is `p`, for
/// `p` in `minCursor..<tail`, plus `atTail` for the caught-up ones. Its counts are stored
/// only up to the newest position a subscriber was put at, so appending an element costs a
/// count only when caught-up subscribers stop at it (once per batch they take, not once per
/// element). Reading moves one unit from one count to a later one: two writes, whatever
/// the number of subscribers. The window's start is the first positive count. Nobody is
/// scanned when the slowest subscriber advances (unlike a min-over-all-cursors rescan);
/// the zeros it leaves behind are skipped once, so that is amortized O(1) per element.
///
/// Each lane follows one rule, its policy's `Overflow`. The dropping ones act on whole
/// histogram cells too:
/// - `.dropOldest(n)` (`.bufferingNewest(n)`): a subscriber never holds more than the last
///   `n` elements: the lane's window starts at `tail - n` at the earliest. Cells before it
///   are not moved by the producer, as tokio's broadcast receivers learn their lag when they
///   read: a member reads from the window start and learns there what it missed, and its
///   cell is moved there then (or when a member leaves, or once it is far behind). Stored
///   cursors are fixed lazily too: a cursor below the window start reads from it.
/// - `.freeze(n)` (`.bufferingOldest(n)`): that cell instead *freezes*: its `n` pending
///   elements are copied once into a `FrozenGroup` and its subscribers stop holding the
///   shared buffer (so a sleeping subscriber cannot pin memory). Each member, on its next
///   read, continues from a private queue (`PrivateQueue`) that receives new elements only
///   while it has room, and rejoins the shared buffer when that queue is empty.
/// - `.evict(n)` (`.evicting(n)`): the cell instead leaves the histogram, and its members
///   end on their next read.
///
/// Waiting subscribers (suspended in `next()`) are always caught up; an appended element is
/// handed to them directly and never occupies their histogram.
@usableFromInline
struct MulticastStateMachine<Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias SubscriberContinuation = UnsafeContinuation<Result<Element?, Failure>, Never>

    /// Resumed with `true` when the producer may go on, `false` when it must stop.
    @usableFromInline
    typealias ProducerContinuation = UnsafeContinuation<Bool, Never>

    @usableFromInline
    enum Terminal: Sendable {
        case finished
        case failed(Failure)

        @inlinable
        var result: Result<Element?, Failure> {
            switch self {
            case .finished: return .success(nil)
            case .failed(let error): return .failure(error)
            }
        }
    }

    @usableFromInline
    enum Upstream: Sendable {
        /// Not running; the next demand (or `connect()`) starts epoch `nextEpoch`.
        case idle
        /// An upstream iteration identified by `epoch` is running.
        case running(epoch: UInt64)
        /// No subscriber is left but the keep-alive window is open: iteration `epoch` goes
        /// on until the window closes (`timerWoke`) or a subscriber comes back
        /// (only the latter with `KeepAlive.forever`).
        case lingering(epoch: UInt64)
        /// The upstream finished or failed with this event: nothing starts again.
        case terminated(Terminal)
    }

    /// Elements a new subscriber receives first: the latest `replayCount` already produced
    /// (from `replayFloor` on, if that is later).
    @usableFromInline
    let replayCount: Int

    /// The replay window starts no earlier than this position: moved to the tail when the
    /// replay cache is reset or expires, so that earlier elements are replayed to nobody.
    @usableFromInline
    var replayFloor = 0

    /// What happens to the replay cache when the upstream stops (`.automatic` mode only).
    @usableFromInline
    let replayExpiry: ReplayExpiry

    /// The upstream stopped and the replay cache expires when the timer next fires, unless
    /// the upstream restarts first.
    @usableFromInline
    var replayExpiryPending = false

    @usableFromInline
    let mode: UpstreamMode

    /// What the last subscriber leaving does to a running upstream (`.automatic` mode only).
    @usableFromInline
    let keepAlive: KeepAlive

    @usableFromInline
    let defaultPolicy: SharedBufferingPolicy

    @usableFromInline
    var elements = IndexedRing<Element>()

    @usableFromInline
    var lanes: [Lane] = []

    @usableFromInline
    var slots: [Slot] = []

    @usableFromInline
    var freeSlots: [UInt32] = []

    @usableFromInline
    var waiters: [Waiter] = []

    /// The private queues of the subscribers that read one (`Slot.readsPrivateQueue`), by slot.
    @usableFromInline
    var privateQueues: [UInt32: PrivateQueue] = [:]

    /// Elements a `.bufferingOldest` subscriber missed after its private queue ran out and
    /// it rejoined the shared buffer at the tail, reported by its next read (`ReadReport`).
    /// By slot; rare, so kept here rather than in every `Slot` (idle subscribers stay small).
    @usableFromInline
    var missedOnRejoin: [UInt32: Int] = [:]

    /// The replayed elements an `.evicting` subscriber has not read yet, by slot: it reads
    /// them before its cursor's. A copy of its own, so they count against no limit: only
    /// what is produced after it joined can evict it (a server's greeting never evicts a
    /// client that just connected, nor is it cut to the limit). Rare, so kept here.
    @usableFromInline
    var greetings: [UInt32: Greeting] = [:]

    /// The slot of the subscriber given the last greeting: one joining at the same position
    /// shares its copy. Only a key: nothing is kept once its greeting is read or dropped.
    @usableFromInline
    var lastGreetingSlot: UInt32?

    /// Producers waiting for room, in the order they parked (see `ParkedProducer`).
    @usableFromInline
    var parkedProducers: [ParkedProducer] = []

    @usableFromInline
    var subscriberCount = 0

    @usableFromInline
    var upstream: Upstream = .idle

    @usableFromInline
    var nextEpoch: UInt64 = 0

    /// The timer's windows and its task (MulticastStateMachine+Timer.swift).
    @usableFromInline
    var timer = DeadlineTimer()

    /// How long the keep-alive and replay-expiry windows last (`length(of:)`).
    @usableFromInline
    let keepAliveWindow: Duration, replayExpiryWindow: Duration

    /// A hosted `run()` that is over, waiting until no timer task runs (`timerTaskEnded()`).
    @usableFromInline
    var timersEnded: UnsafeContinuation<Void, Never>?

    /// Where a hosted machine's `run()` is (MulticastStateMachine+Hosting.swift).
    @usableFromInline
    var host: Host

    /// Who hears a change of the subscriber count, and a push-fed machine's completion
    /// (MulticastStateMachine+Observers.swift).
    @usableFromInline
    var countObservers = SubscriberCountObservers()
    @usableFromInline
    var completionObservers: [CompletionObserver] = []
    /// Who waits until the machine has ended and no subscriber is left
    /// (MulticastStateMachine+Draining.swift).
    @usableFromInline
    var drainObservers: [DrainCell] = []

    /// Names the next completion observer, parked producer or eviction watcher (`takeToken()`).
    @usableFromInline
    var nextToken: UInt64 = 0

    /// The upstream task's priority as far as known; `UInt8.max`: no task (+Priority).
    @usableFromInline
    var upstreamPriority = UInt8.max

    /// Tasks waiting to learn whether a subscriber is evicted
    /// (`SharedSubscription.waitForEviction()`), by slot. Rare, so kept here.
    @usableFromInline
    var evictionWatchers: [UInt32: [EvictionWatcher]] = [:]

    /// Evicted subscribers that have left (their iteration learned it, was released or was
    /// cancelled), by slot, with the generation they had: a `waitForEviction()` that asks
    /// after the leave still gets the eviction (`evictionWatchRequested`). An entry goes when
    /// its slot is taken again, so there are never more than slots.
    @usableFromInline
    var departedEvictions: [UInt32: (generation: UInt32, eviction: SubscriberEviction)] = [:]

    /// Eviction watchers a transition resolved, with what each learns (evicted or not): the
    /// storage takes them at the end of the critical section (`takeEvictionNotices()`) and
    /// resumes them outside the lock.
    @usableFromInline
    var evictionNotices: [EvictionNotice] = []

    /// The evicted members of every lane (the sum of `Lane.evicted`) that `subscriberCount`
    /// no longer counts (`evictionsHappened()`).
    @usableFromInline
    var evictedMembers = 0

    /// What a transition left for after its critical section, beside its effects (see
    /// `FollowUp`). Set on cold paths only (an eviction, a member past a soft limit); the
    /// producer's hot path pays one test of it.
    @usableFromInline
    var followUp = FollowUp()

    /// Whether a lane with a soft limit was ever created: until then `append` skips the
    /// soft limits' bookkeeping.
    @usableFromInline
    var hasSoftLimits = false

    /// The largest tail at which an element of a batch that a `.dropOldest` read took could
    /// still be dropped: until then, appends publish the tail; 0 once passed
    /// (MulticastStateMachine+HeldBatches.swift says why that is enough).
    @usableFromInline
    var tailWatchedUntil = 0

    @inlinable
    init(
        policy: SharedBufferingPolicy, replay: Int, mode: UpstreamMode, keepAlive: KeepAlive = .off,
        replayExpiry: ReplayExpiry = .never, windows: (keepAlive: Duration, replayExpiry: Duration) = (.zero, .zero),
        hosted: Bool = false
    ) {
        // The public faces check their arguments, once, with messages that name them.
        assert(replay >= 0, "the public faces check replay")
        self.defaultPolicy = policy
        self.replayCount = replay
        self.replayExpiry = replayExpiry
        self.mode = mode
        self.keepAlive = keepAlive
        (self.keepAliveWindow, self.replayExpiryWindow) = windows
        self.host = hosted ? .notStarted(pending: nil) : .notHosted
        if mode == .push { self.upstream = .running(epoch: Self.pushEpoch) }
    }

    /// How the upstream ended, once it has.
    @inlinable
    var terminal: Terminal? {
        if case .terminated(let terminal) = self.upstream { return terminal }
        return nil
    }

    /// Absolute position of the next element to be produced.
    @inlinable
    var tail: Int { self.elements.endIndex }

    /// The first position of the replay window.
    @inlinable
    var replayStart: Int { Swift.max(self.tail - self.replayCount, self.replayFloor) }

    /// What a subscriber joining now would be replayed, oldest first.
    @inlinable
    var replayCache: [Element] {
        let start = Swift.max(self.replayStart, self.elements.startIndex)
        return (start..<self.tail).map { self.elements[$0] }
    }
}

extension MulticastStateMachine.Terminal: Equatable where Failure: Equatable {}
extension MulticastStateMachine.Upstream: Equatable where Failure: Equatable {}
