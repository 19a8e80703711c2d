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
    /// `multicast().autoconnect()`: the first demand starts it; leaving never stops it.
    case autoconnect
    /// `multicast()`: only `connect()` starts it and only the connection stops it.
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
/// ## Why taking an element is O(1)
/// Subscribers are grouped in *lanes*, one per buffering policy in use (normally just one).
/// A lane keeps a histogram `counts[p]` = number of its subscribers whose cursor is `p`, for
/// `p` in `minCursor..<tail`, plus `atTail` for the caught-up ones. Reading moves one unit of
/// the histogram one step; the window's start moves past positions whose count reached zero.
/// Nobody is scanned when the slowest subscriber advances (unlike a min-over-all-cursors
/// rescan), and every trimmed position was appended once, so trimming is amortized O(1).
///
/// The dropping policies act on whole histogram cells too:
/// - `.bufferingNewest(n)`: when an append gives the cell at `tail - n - 1` an `n + 1`-th
///   pending element, the whole cell moves one step forward (those subscribers drop their
///   oldest). Their stored cursors are fixed lazily: a cursor below the lane's window start
///   reads from the window start.
/// - `.bufferingOldest(n)`: that cell instead *freezes*: its `n` pending elements are copied
///   once into a `FrozenGroup` and its subscribers stop holding the shared buffer (so a
///   sleeping subscriber cannot pin memory). Each member, on its next read, continues from
///   a private queue that receives new elements only while it has room, and rejoins the
///   shared buffer when that queue is empty.
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
    enum Upstream: Sendable, Equatable {
        /// Not running; the next demand (or `connect()`) starts epoch `nextEpoch`.
        case idle
        /// An upstream iteration identified by `epoch` is running.
        case running(epoch: UInt64)
        /// No subscriber is left but the keep-alive window is open: iteration `epoch` goes
        /// on until the window closes (`keepAliveExpired()`) or a subscriber comes back.
        case lingering(epoch: UInt64)
        /// The upstream finished or failed; `terminal` is set and nothing starts again.
        case terminated
    }

    /// What the caller of a transition must do, outside the lock.
    @usableFromInline
    struct Effects: Sendable {
        /// Resume each of these with `subscriberResult`.
        @usableFromInline
        var subscribers: [SubscriberContinuation] = []
        @usableFromInline
        var subscriberResult: Result<Element?, Failure> = .success(nil)
        /// Resume each of these with `producerResult`.
        @usableFromInline
        var producers: [ProducerContinuation] = []
        @usableFromInline
        var producerResult = true
        /// Start a new upstream iteration for this epoch.
        @usableFromInline
        var startUpstream: UInt64?
        /// Cancel the upstream iteration of this epoch.
        @usableFromInline
        var cancelUpstream: UInt64?
        /// What the keep-alive timer must do.
        @usableFromInline
        var keepAliveTimer: KeepAliveTimerAction = .none

        @inlinable
        init() {}

        @inlinable
        var isEmpty: Bool {
            self.subscribers.isEmpty && self.producers.isEmpty && self.startUpstream == nil
                && self.cancelUpstream == nil && self.keepAliveTimer == .none
        }
    }

    /// What the storage must do with the keep-alive timer. There is at most one timer task
    /// per machine (`keepAliveTimerIsRunning`), re-armed rather than replaced: leaving and
    /// coming back many times within the window never piles up sleeping tasks.
    @usableFromInline
    enum KeepAliveTimerAction: Sendable, Equatable {
        case none
        /// A keep-alive window opened now: its deadline is now + keepAlive. The running
        /// timer task will see the new deadline when it wakes.
        case restart
        /// A keep-alive window opened now and no timer task is running: start one.
        case start
        /// The timer task is no longer needed (the upstream ended): cancel it.
        case cancel
    }

    /// The outcome of `next(_:)`, the non-suspending fast path of a subscriber's `next()`.
    @usableFromInline
    enum NextAction: Sendable {
        /// Return this element; resume `producers` with `true` (room was made).
        case element(Element, producers: [ProducerContinuation])
        /// Return this terminal value (`nil` or an error). The subscriber has left.
        case terminal(Result<Element?, Failure>)
        /// Nothing is available: suspend and call `suspend(_:continuation:)`. Start the
        /// upstream of this epoch first if it is not `nil`.
        case suspend(startUpstream: UInt64?)
    }

    /// The outcome of a producer offering an element, on the hot path: no payload, so
    /// returning it through the lock costs nothing (the waiters to resume travel separately,
    /// see `produce(_:epoch:respectingBounds:resuming:)`).
    @usableFromInline
    enum ProduceOutcome: Sendable, Equatable {
        /// The element is in; go on producing.
        case proceed
        /// The element is in; park (see `parkProducer`) before producing the next one.
        case park
        /// The element was not taken (stale epoch or terminated). Stop producing.
        case stop
    }

    /// The outcome of a producer offering an element, with its effects (cold paths and tests).
    @usableFromInline
    enum ProduceAction: Sendable {
        /// The element is in; go on producing.
        case proceed(Effects)
        /// The element is in; park (see `parkProducer`) before producing the next one.
        case park(Effects)
        /// The element was not taken: this producer is stale (cancelled epoch) or the
        /// sequence has terminated. Stop producing.
        case stop
    }

    // MARK: Types used by the bookkeeping

    @usableFromInline
    struct Slot: Sendable {
        @usableFromInline
        var cursor = 0
        @usableFromInline
        var generation: UInt32 = 0
        /// Index into `lanes`, or `Slot.noLane` once the subscriber only drains what an
        /// ended multicast connection left it (see `disconnect(epoch:)`).
        @usableFromInline
        var lane: UInt32 = 0
        @usableFromInline
        var isLive = false
        /// The subscriber reads from `detached[slot]`: a `.bufferingOldest` overflow, or what
        /// an ended connection left it.
        @usableFromInline
        var isDetached = false
        /// Index into `waiters` while suspended in `next()`, otherwise -1.
        @usableFromInline
        var waiterIndex: Int32 = -1

        /// The `lane` of a subscriber that belongs to no lane any more.
        @inlinable
        static var noLane: UInt32 { .max }

        @inlinable
        init() {}

        @inlinable
        init(cursor: Int, generation: UInt32, lane: UInt32, isLive: Bool) {
            self.cursor = cursor
            self.generation = generation
            self.lane = lane
            self.isLive = isLive
        }
    }

    @usableFromInline
    struct Waiter: Sendable {
        @usableFromInline
        var slot: UInt32
        @usableFromInline
        var continuation: SubscriberContinuation

        @inlinable
        init(slot: UInt32, continuation: SubscriberContinuation) {
            self.slot = slot
            self.continuation = continuation
        }
    }

    /// The pending elements of subscribers of a `.bufferingOldest(n)` cell that overflowed.
    @usableFromInline
    struct FrozenGroup: Sendable {
        @usableFromInline
        var elements: [Element]
        @usableFromInline
        var members: Int

        @inlinable
        init(elements: [Element], members: Int) {
            self.elements = elements
            self.members = members
        }
    }

    /// A `.bufferingOldest` subscriber reading from its own queue after an overflow.
    @usableFromInline
    struct Detached: Sendable {
        @usableFromInline
        var queue: [Element]
        @usableFromInline
        var head = 0
        /// Index in its lane's `roomList`, or -1 while the queue is full.
        @usableFromInline
        var roomIndex = -1
        /// The queue is all the subscriber will ever receive: once it is empty the
        /// subscriber ends (its multicast connection was cancelled).
        @usableFromInline
        var endsWhenEmpty = false

        @inlinable
        init(queue: [Element], endsWhenEmpty: Bool = false) {
            self.queue = queue
            self.endsWhenEmpty = endsWhenEmpty
        }

        @inlinable
        var pending: Int { self.queue.count - self.head }

        @inlinable
        mutating func pop() -> Element {
            let element = self.queue[self.head]
            self.head += 1
            if self.head >= 32, self.head * 2 >= self.queue.count {
                self.queue.removeFirst(self.head)
                self.head = 0
            }
            return element
        }
    }

    @usableFromInline
    struct Lane: Sendable {
        @usableFromInline
        let policy: SharedBufferingPolicy
        @usableFromInline
        var members = 0
        /// `counts[p]`: members whose cursor is `p`, for `p` in `minCursor..<tail`.
        /// Invariants: `counts.endIndex == tail`; `counts.first` is nil or positive.
        @usableFromInline
        var counts: IndexedRing<Int>
        /// Attached members whose cursor is `tail`, waiting ones included.
        @usableFromInline
        var atTail = 0
        /// Members suspended in `next()` (all of them have cursor `tail`).
        @usableFromInline
        var waiting = 0
        /// `.bufferingOldest`: frozen cells by the cursor their members still hold.
        @usableFromInline
        var frozen: [Int: FrozenGroup] = [:]
        /// `.bufferingOldest`: detached members whose queue has room.
        @usableFromInline
        var roomList: [UInt32] = []

        @inlinable
        init(policy: SharedBufferingPolicy, tail: Int) {
            self.policy = policy
            self.counts = IndexedRing(startIndex: tail)
            // The policy's numbers, unpacked once: `append` reads them for every element.
            switch policy {
            case .bounded(let limit):
                (self.batchLimit, self.bound, self.dropLimit, self.freezeLimit) =
                    (Swift.min(limit / 2, Self.maxBatch), limit, -1, 0)
            case .unbounded:
                (self.batchLimit, self.bound, self.dropLimit, self.freezeLimit) = (Self.maxBatch, .max, -1, 0)
            case .bufferingNewest(let limit):
                (self.batchLimit, self.bound, self.dropLimit, self.freezeLimit) = (0, .max, limit, 0)
            case .bufferingOldest(0):
                // Drops like `.bufferingNewest(0)`: the new element is the only one a
                // member holds, so whole cells move.
                (self.batchLimit, self.bound, self.dropLimit, self.freezeLimit) = (0, .max, 0, 0)
            case .bufferingOldest(let limit):
                (self.batchLimit, self.bound, self.dropLimit, self.freezeLimit) = (0, .max, -1, limit)
            }
        }

        /// `.bounded(n)`: `n`; otherwise `Int.max`. A producer parks once a member holds this many.
        @usableFromInline
        let bound: Int
        /// A producer may append while every member holds at most this many: `bound - 1`.
        @inlinable
        var roomLevel: Int { self.bound - 1 }
        /// A parked producer resumes once every member holds at most this many (see
        /// `hasRoomToResume`): `bound - max(1, bound / 2)`.
        @inlinable
        var resumeLevel: Int { self.bound - Swift.max(1, self.bound / 2) }
        /// Members holding more than this drop their oldest (`.bufferingNewest(n)`, and
        /// `.bufferingOldest(0)`); -1 for the other policies.
        @usableFromInline
        let dropLimit: Int
        /// `.bufferingOldest(n)` with n > 0: `n` (full cells freeze); otherwise 0.
        @usableFromInline
        let freezeLimit: Int

        /// How many ready elements beyond the one returned a member may take per lock
        /// acquisition (see `read`). Lossless lanes only: a dropping policy must be able to
        /// drop what a subscriber has not consumed. Half the bound, so the upstream can
        /// refill the other half while a subscriber works through its batch.
        @usableFromInline
        let batchLimit: Int
        /// The largest batch.
        @inlinable
        static var maxBatch: Int { 64 }

        /// The oldest position a member of this lane still reads (`tail` if none).
        @inlinable
        var minCursor: Int { self.counts.startIndex }

        @inlinable
        mutating func dropLeadingZeros() {
            while let first = self.counts.first, first == 0 {
                self.counts.removeFirst()
            }
        }

        /// Records that `count` members now have the element at `position` (== old tail) pending.
        @inlinable
        mutating func appendCount(_ count: Int, at position: Int) {
            assert(self.counts.endIndex == position, "lane histogram must end at the tail")
            if self.counts.isEmpty && count == 0 {
                self.counts.rebase(to: position + 1)
            } else {
                self.counts.append(count)
            }
        }

        /// Moves the oldest histogram cell one position forward (its members drop one element).
        @inlinable
        mutating func advanceOldestCell(tail: Int) {
            let moved = self.counts.removeFirst()
            if self.counts.startIndex == tail {
                self.atTail += moved
            } else {
                self.counts[self.counts.startIndex] += moved
            }
            self.dropLeadingZeros()
        }
    }

    // MARK: State

    /// Elements a new subscriber receives first: the latest `replayCount` already produced.
    @usableFromInline
    let replayCount: Int
    @usableFromInline
    let mode: UpstreamMode
    /// Whether the last subscriber leaving opens a keep-alive window instead of cancelling.
    @usableFromInline
    let hasKeepAlive: Bool
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
    @usableFromInline
    var detached: [UInt32: Detached] = [:]
    @usableFromInline
    var parkedProducers: [(token: UInt64, continuation: ProducerContinuation)] = []

    @usableFromInline
    var subscriberCount = 0

    @usableFromInline
    var upstream: Upstream = .idle
    @usableFromInline
    var terminal: Terminal?
    @usableFromInline
    var nextEpoch: UInt64 = 0
    /// A keep-alive timer task exists (see `KeepAliveTimerAction`).
    @usableFromInline
    var keepAliveTimerIsRunning = false

    @inlinable
    init(policy: SharedBufferingPolicy, replay: Int, mode: UpstreamMode, keepAlive: Bool = false) {
        policy.validate()
        precondition(replay >= 0, "replay must be at least 0, got \(replay)")
        self.defaultPolicy = policy
        self.replayCount = replay
        self.mode = mode
        self.hasKeepAlive = keepAlive
        if mode == .push { self.upstream = .running(epoch: 0) }
    }

    /// Absolute position of the next element to be produced.
    @inlinable
    var tail: Int { self.elements.endIndex }

    /// Number of elements currently stored in the shared buffer (for tests and diagnostics).
    @inlinable
    var bufferedCount: Int { self.elements.count }

    /// Whether every bounded subscriber has room for one more element, i.e. whether a
    /// producer may append without waiting.
    @inlinable
    var hasRoom: Bool {
        self.everyMemberHolds(atMost: \.roomLevel)
    }

    /// Whether a *parked* producer may go on: every bounded subscriber is down to its
    /// lane's `resumeLevel` (half the bound). A producer parks at the bound and resumes at
    /// half of it, like a high/low watermark pair: one wake-up then buys `bound / 2`
    /// elements instead of one, and a wake-up costs far more than an element. Liveness is
    /// unaffected: a subscriber above the level has elements to read.
    @inlinable
    var hasRoomToResume: Bool {
        self.everyMemberHolds(atMost: \.resumeLevel)
    }

    /// Whether every member of every lane holds at most `level` of its lane pending.
    @inlinable
    func everyMemberHolds(atMost level: KeyPath<Lane, Int>) -> Bool {
        for lane in self.lanes where lane.members > 0 && self.tail - lane.minCursor > lane[keyPath: level] {
            return false
        }
        return true
    }

    // MARK: Subscribing

    /// Registers a subscriber; it receives the replay window, then every element appended
    /// from now on, subject to `policy` (the machine's policy if `nil`).
    @inlinable
    mutating func subscribe(policy: SharedBufferingPolicy? = nil) -> SubscriberID {
        let policy = policy ?? self.defaultPolicy
        policy.validate()
        let laneIndex = self.laneIndex(for: policy)

        var replay = Swift.min(self.replayCount, self.elements.count)
        switch policy {
        case .bufferingNewest(let limit), .bufferingOldest(let limit):
            // A dropping subscriber never holds more than `limit` (the lane invariant
            // `append` relies on), so it gets at most `limit` replayed elements: the newest,
            // whatever the policy, since a replay is about the latest values.
            replay = Swift.min(replay, limit)
        case .bounded, .unbounded:
            break
        }
        let cursor = self.tail - replay

        let slotIndex: UInt32
        if let free = self.freeSlots.popLast() {
            slotIndex = free
        } else {
            precondition(self.slots.count < Int(UInt32.max), "too many subscribers")
            slotIndex = UInt32(self.slots.count)
            self.slots.append(Slot())
        }
        let generation = self.slots[Int(slotIndex)].generation
        self.slots[Int(slotIndex)] = Slot(
            cursor: cursor, generation: generation, lane: UInt32(laneIndex), isLive: true)

        self.lanes[laneIndex].members += 1
        if cursor == self.tail {
            self.lanes[laneIndex].atTail += 1
        } else {
            while self.lanes[laneIndex].counts.startIndex > cursor {
                self.lanes[laneIndex].counts.prepend(0)
            }
            self.lanes[laneIndex].counts[cursor] += 1
        }
        self.subscriberCount += 1

        if case .lingering(let epoch) = self.upstream {
            // Back inside the keep-alive window: continue the same iteration. The timer
            // task stays: when it wakes it finds the upstream running and ends.
            self.upstream = .running(epoch: epoch)
        }
        return SubscriberID(slot: slotIndex, generation: generation)
    }

    /// The lane of `policy`, created if no live subscriber uses it. A lane exists exactly
    /// while it has members (`removeLaneIfEmpty`), so the producer's per-element pass costs
    /// as many steps as there are distinct policies among the live subscribers.
    @inlinable
    mutating func laneIndex(for policy: SharedBufferingPolicy) -> Int {
        if let index = self.lanes.firstIndex(where: { $0.policy == policy }) {
            return index
        }
        self.lanes.append(Lane(policy: policy, tail: self.tail))
        return self.lanes.count - 1
    }

    /// Removes lane `l` if its last member left: the last lane takes its index, and the
    /// slots of that lane's members are renumbered (a scan of the slots, on this cold path
    /// only, so that reading never pays an indirection).
    @inlinable
    mutating func removeLaneIfEmpty(_ l: Int) {
        guard self.lanes[l].members == 0 else { return }
        let last = self.lanes.count - 1
        if l != last {
            self.lanes.swapAt(l, last)
            for index in self.slots.indices
            where self.slots[index].isLive && self.slots[index].lane == UInt32(last) {
                self.slots[index].lane = UInt32(l)
            }
        }
        self.lanes.removeLast()
    }

    @inlinable
    func liveSlot(_ id: SubscriberID) -> Int? {
        let index = Int(id.slot)
        guard index < self.slots.count else { return nil }
        let slot = self.slots[index]
        guard slot.isLive, slot.generation == id.generation else { return nil }
        return index
    }

    /// Whether `id` still names a registered subscriber.
    @inlinable
    func isSubscribed(_ id: SubscriberID) -> Bool {
        self.liveSlot(id) != nil
    }

    // MARK: Reading

    @usableFromInline
    enum ReadResult {
        case element(Element)
        case terminal(Result<Element?, Failure>)
        case empty(slot: Int)
    }

    /// Takes the subscriber's next element if one is ready. Never suspends.
    ///
    /// Batching (lossless lanes only): besides the returned element, up to `batchLimit`
    /// further ready elements are copied into `batch` (last first), and the cursor moves
    /// past all of them: from here on they are the subscriber's, like the returned one, and
    /// no longer count against its bound. So a subscriber never waits for room that only
    /// its own unread batch takes up (it may be the producer that would have to make it),
    /// and a `.bounded(n)` subscriber holds at most `n` elements in the shared buffer plus
    /// at most `batchLimit` (half the bound, at most 64) in its iterator.
    @inlinable
    mutating func read(_ id: SubscriberID, batch: inout [Element]?) -> ReadResult {
        guard let s = self.liveSlot(id) else { return .terminal(.success(nil)) }
        assert(self.slots[s].waiterIndex < 0, "a subscriber reads while it is suspended")
        if self.slots[s].isDetached {
            return self.readDetached(s)
        }
        let l = Int(self.slots[s].lane)
        let cursor = self.slots[s].cursor
        if cursor < self.lanes[l].minCursor {
            // The subscriber's cell was moved while it was not looking (see the type's docs).
            switch self.lanes[l].policy {
            case .bufferingNewest, .bufferingOldest(0):
                // `.bufferingOldest(0)` drops like `.bufferingNewest(0)`: whole cells move (see `append`).
                self.slots[s].cursor = self.lanes[l].minCursor
            case .bufferingOldest:
                guard var group = self.lanes[l].frozen.removeValue(forKey: cursor) else {
                    preconditionFailure("bufferingOldest subscriber behind the window without a frozen group")
                }
                self.detached[UInt32(s)] = Detached(queue: group.elements)
                self.slots[s].isDetached = true
                group.members -= 1
                if group.members > 0 { self.lanes[l].frozen[cursor] = group }
                return self.readDetached(s)
            case .bounded, .unbounded:
                preconditionFailure("lossless subscriber behind the shared window")
            }
        }

        let position = self.slots[s].cursor
        if position < self.tail {
            let element = self.elements[position]
            var taken = 1
            let limit = self.lanes[l].batchLimit
            if limit > 0, batch != nil {
                let extra = Swift.min(limit, self.tail - position - 1)
                if extra > 0 {
                    batch!.reserveCapacity(limit)
                    var p = position + extra
                    while p > position {
                        batch!.append(self.elements[p])
                        p -= 1
                    }
                    taken += extra
                }
            }
            self.commit(taken, slot: s, lane: l)
            return .element(element)
        }
        if let terminal = self.terminal {
            self.removeSubscriber(s)
            return .terminal(terminal.result)
        }
        return .empty(slot: s)
    }

    /// Moves an attached subscriber's cursor `count` positions forward (it has received the
    /// elements there), keeping the lane histogram and the shared window in step.
    @inlinable
    mutating func commit(_ count: Int, slot s: Int, lane l: Int) {
        let position = self.slots[s].cursor
        let next = position + count
        precondition(next <= self.tail, "committed past the tail")
        self.slots[s].cursor = next
        self.lanes[l].counts[position] -= 1
        if next == self.tail {
            self.lanes[l].atTail += 1
        } else {
            self.lanes[l].counts[next] += 1
        }
        if position == self.lanes[l].minCursor {
            self.lanes[l].dropLeadingZeros()
            self.trimElements()
        }
    }

    /// Reads from the subscriber's private queue (`Slot.isDetached`).
    @inlinable
    mutating func readDetached(_ s: Int) -> ReadResult {
        let key = UInt32(s)
        if self.detached[key]!.endsWhenEmpty {
            // What an ended connection left it: no lane, nothing more will come.
            guard self.detached[key]!.pending > 0 else {
                self.removeSubscriber(s)
                return .terminal(.success(nil))
            }
            return .element(self.detached[key]!.pop())
        }
        let l = Int(self.slots[s].lane)
        let element = self.detached[key]!.pop()
        if self.detached[key]!.pending == 0 {
            // Nothing private is left: rejoin the shared buffer at the tail.
            self.removeFromRoomList(key, lane: l)
            self.detached[key] = nil
            self.slots[s].isDetached = false
            self.slots[s].cursor = self.tail
            self.lanes[l].atTail += 1
        } else if self.detached[key]!.roomIndex < 0 {
            self.detached[key]!.roomIndex = self.lanes[l].roomList.count
            self.lanes[l].roomList.append(key)
        }
        return .element(element)
    }

    @inlinable
    mutating func removeFromRoomList(_ key: UInt32, lane l: Int) {
        guard let index = self.detached[key]?.roomIndex, index >= 0 else { return }
        let last = self.lanes[l].roomList.removeLast()
        if last != key {
            self.lanes[l].roomList[index] = last
            self.detached[last]!.roomIndex = index
        }
        self.detached[key]!.roomIndex = -1
    }

    /// Drops stored elements nobody will read again (outside the replay window).
    @inlinable
    mutating func trimElements() {
        var keepFrom = self.tail - self.replayCount
        for lane in self.lanes where lane.minCursor < keepFrom {
            keepFrom = lane.minCursor
        }
        self.trimElements(before: keepFrom)
    }

    /// Drops the stored elements before `position` (`append` computes it on its own pass).
    @inlinable
    mutating func trimElements(before position: Int) {
        while self.elements.startIndex < position {
            self.elements.removeFirst()
        }
    }

    /// The fast path of a subscriber's `next()`: takes a ready element or terminal event
    /// without suspending; otherwise says to suspend (and whether to start the upstream).
    ///
    /// `connectOnDemand`: the subscriber belongs to an autoconnecting multicast, so its
    /// demand starts an idle upstream even in `.manual` mode.
    @inlinable
    mutating func next(_ id: SubscriberID, connectOnDemand: Bool = false) -> NextAction {
        var noBatch: [Element]? = nil
        return self.next(id, batch: &noBatch, connectOnDemand: connectOnDemand)
    }

    /// `next(_:connectOnDemand:)` with batching; see `read(_:committing:batch:)`.
    @inlinable
    mutating func next(
        _ id: SubscriberID, batch: inout [Element]?, connectOnDemand: Bool
    ) -> NextAction {
        switch self.read(id, batch: &batch) {
        case .element(let element):
            return .element(element, producers: self.takeProducersIfRoom())
        case .terminal(let result):
            return .terminal(result)
        case .empty:
            return .suspend(startUpstream: self.startUpstreamOnDemand(connectOnDemand))
        }
    }

    /// The slow path: the subscriber suspended with `continuation`. Either it is resumed at
    /// once (an element arrived, it was cancelled, or the sequence ended in the meantime) or
    /// the continuation is stored until an element or terminal event arrives.
    @inlinable
    mutating func suspend(
        _ id: SubscriberID, continuation: SubscriberContinuation, connectOnDemand: Bool = false
    ) -> Effects {
        var effects = Effects()
        var noBatch: [Element]? = nil
        switch self.read(id, batch: &noBatch) {
        case .element(let element):
            effects.subscribers = [continuation]
            effects.subscriberResult = .success(element)
            effects.producers = self.takeProducersIfRoom()
        case .terminal(let result):
            effects.subscribers = [continuation]
            effects.subscriberResult = result
        case .empty(let s):
            self.slots[s].waiterIndex = Int32(self.waiters.count)
            self.waiters.append(Waiter(slot: UInt32(s), continuation: continuation))
            self.lanes[Int(self.slots[s].lane)].waiting += 1
            effects.startUpstream = self.startUpstreamOnDemand(connectOnDemand)
        }
        return effects
    }

    @inlinable
    mutating func startUpstreamOnDemand(_ connectOnDemand: Bool) -> UInt64? {
        guard self.upstream == .idle, self.terminal == nil else { return nil }
        switch self.mode {
        case .manual where connectOnDemand:
            fallthrough
        case .automatic, .autoconnect:
            let epoch = self.nextEpoch
            self.nextEpoch += 1
            self.upstream = .running(epoch: epoch)
            return epoch
        case .manual, .push:
            return nil
        }
    }

    /// How many elements subscriber `id`, having caught up, may wait for instead of
    /// suspending (see `CatchUpSpin`); `nil`: it must not wait.
    ///
    /// - Only a sole subscriber waits. With more, the producer wakes the others anyway, so
    ///   waiting would save little and would take a core from the subscribers it woke.
    /// - Only on a lossless lane. A dropping policy hands elements directly only to a
    ///   subscriber suspended in `next()`; one that waits without being registered would
    ///   have them dropped instead.
    /// - No more than the producer can offer before it parks: a subscriber that caught up
    ///   holds nothing, so under `.bounded(n)` that is `n`, which for a small `n` is far
    ///   below `CatchUpSpin.batch`; waiting for more would always end by the quiet limit.
    @inlinable
    func catchUpBatch(for id: SubscriberID) -> Int? {
        guard self.subscriberCount == 1, let s = self.liveSlot(id), self.slots[s].lane != Slot.noLane else {
            return nil
        }
        let lane = self.lanes[Int(self.slots[s].lane)]
        guard lane.dropLimit < 0, lane.freezeLimit == 0 else { return nil }
        return Swift.min(CatchUpSpin.batch, lane.bound)
    }

    // MARK: Leaving

    /// The subscriber leaves: its task was cancelled or its iterator was released.
    /// A suspended `next()` is resumed with `nil`. Leaving twice is harmless.
    @inlinable
    mutating func unsubscribe(_ id: SubscriberID) -> Effects {
        var effects = Effects()
        guard let s = self.liveSlot(id) else { return effects }
        if let continuation = self.removeSubscriber(s) {
            effects.subscribers = [continuation]
            effects.subscriberResult = .success(nil)
        }
        if self.subscriberCount == 0, self.mode == .automatic {
            switch self.upstream {
            case .running(let epoch):
                if self.hasKeepAlive {
                    self.upstream = .lingering(epoch: epoch)
                    effects.keepAliveTimer = self.keepAliveTimerIsRunning ? .restart : .start
                    self.keepAliveTimerIsRunning = true
                } else {
                    self.stopUpstream(epoch: epoch, into: &effects)
                }
            case .idle, .lingering, .terminated:
                break
            }
        }
        if effects.producers.isEmpty {
            effects.producers = self.takeProducersIfRoom()
        }
        return effects
    }

    /// Frees the subscriber's slot and its share of the bookkeeping. Returns its stored
    /// continuation if it was suspended (the caller decides what to resume it with).
    @discardableResult
    @inlinable
    mutating func removeSubscriber(_ s: Int) -> SubscriberContinuation? {
        var continuation: SubscriberContinuation?
        let waiterIndex = Int(self.slots[s].waiterIndex)
        if waiterIndex >= 0 {
            continuation = self.waiters[waiterIndex].continuation
            let last = self.waiters.removeLast()
            if waiterIndex < self.waiters.count {
                self.waiters[waiterIndex] = last
                self.slots[Int(last.slot)].waiterIndex = Int32(waiterIndex)
            }
            self.lanes[Int(self.slots[s].lane)].waiting -= 1
            self.slots[s].waiterIndex = -1
        }
        if self.slots[s].lane == Slot.noLane {
            self.detached[UInt32(s)] = nil
        } else {
            self.leaveLane(s)
        }
        self.slots[s].isLive = false
        self.slots[s].isDetached = false
        self.slots[s].generation &+= 1
        self.freeSlots.append(UInt32(s))
        self.subscriberCount -= 1
        return continuation
    }

    /// Takes subscriber `s` (not waiting) out of its lane: its histogram unit, frozen group
    /// or private queue, and its membership; the lane goes if it was the last member.
    /// Afterwards the slot's `lane` is `Slot.noLane` and it holds no private queue.
    @inlinable
    mutating func leaveLane(_ s: Int) {
        let slot = self.slots[s]
        let l = Int(slot.lane)
        assert(slot.waiterIndex < 0, "a waiting subscriber leaves its lane")
        if slot.isDetached {
            self.removeFromRoomList(UInt32(s), lane: l)
            self.detached[UInt32(s)] = nil
            self.slots[s].isDetached = false
        } else if slot.cursor < self.lanes[l].minCursor {
            switch self.lanes[l].policy {
            case .bufferingNewest, .bufferingOldest(0):
                self.decrementCount(at: self.lanes[l].minCursor, lane: l)
            case .bufferingOldest:
                let group = self.lanes[l].frozen[slot.cursor]!
                if group.members == 1 {
                    self.lanes[l].frozen[slot.cursor] = nil
                } else {
                    self.lanes[l].frozen[slot.cursor]!.members -= 1
                }
            case .bounded, .unbounded:
                preconditionFailure("lossless subscriber behind the shared window")
            }
        } else {
            self.decrementCount(at: slot.cursor, lane: l)
        }
        self.lanes[l].members -= 1
        self.slots[s].lane = Slot.noLane
        self.removeLaneIfEmpty(l)
    }

    /// The elements subscriber `s` (attached to a lane, not waiting) would still read, in
    /// order, if nothing more were produced.
    @inlinable
    func pendingElements(of s: Int) -> [Element] {
        let slot = self.slots[s]
        let lane = self.lanes[Int(slot.lane)]
        if slot.isDetached {
            let queue = self.detached[UInt32(s)]!
            return Array(queue.queue[queue.head...])
        }
        var from = slot.cursor
        if from < lane.minCursor {
            switch lane.policy {
            case .bufferingOldest(let limit) where limit > 0:
                return lane.frozen[from]!.elements
            default:
                from = lane.minCursor
            }
        }
        return (from..<self.tail).map { self.elements[$0] }
    }

    @inlinable
    mutating func decrementCount(at position: Int, lane l: Int) {
        if position == self.tail {
            self.lanes[l].atTail -= 1
        } else {
            self.lanes[l].counts[position] -= 1
            if position == self.lanes[l].minCursor {
                self.lanes[l].dropLeadingZeros()
                self.trimElements()
            }
        }
    }

    @inlinable
    mutating func stopUpstream(epoch: UInt64, into effects: inout Effects) {
        self.upstream = .idle
        effects.cancelUpstream = epoch
        self.releaseProducers(into: &effects, result: false)
    }

    /// Hands every parked producer to `effects`, to be resumed with `result`.
    @inlinable
    mutating func releaseProducers(into effects: inout Effects, result: Bool) {
        effects.producers = self.parkedProducers.map(\.continuation)
        effects.producerResult = result
        self.parkedProducers.removeAll()
    }

    /// Ends every waiting subscriber (they are caught up, so nothing is buffered for them)
    /// with `result`: they leave and `effects` resumes them.
    @inlinable
    mutating func endWaiters(into effects: inout Effects, with result: Result<Element?, Failure>) {
        let waiting = self.waiters.map(\.slot)
        for slot in waiting {
            effects.subscribers.append(self.removeSubscriber(Int(slot))!)
        }
        effects.subscriberResult = result
    }

    // MARK: Producing

    /// Whether `epoch` is the upstream iteration currently allowed to produce.
    @inlinable
    func isCurrent(epoch: UInt64) -> Bool {
        switch self.upstream {
        case .running(let current), .lingering(let current):
            return current == epoch
        case .idle, .terminated:
            return false
        }
    }

    /// The upstream iteration `epoch` produced `element`.
    ///
    /// With `respectingBounds` false (a subject's synchronous `send`) the element is taken
    /// even when a bounded subscriber is full.
    @inlinable
    mutating func produce(_ element: Element, epoch: UInt64, respectingBounds: Bool = true) -> ProduceAction {
        var effects = Effects()
        let outcome = self.produce(
            element, epoch: epoch, respectingBounds: respectingBounds, resuming: &effects.subscribers)
        if !effects.subscribers.isEmpty { effects.subscriberResult = .success(element) }
        switch outcome {
        case .proceed: return .proceed(effects)
        case .park: return .park(effects)
        case .stop: return .stop
        }
    }

    /// `produce(_:epoch:respectingBounds:)` for the hot path: the subscribers that were
    /// waiting for `element` are appended to `resuming` (the caller resumes them with it).
    @inlinable
    mutating func produce(
        _ element: Element, epoch: UInt64, respectingBounds: Bool,
        resuming: inout [SubscriberContinuation]
    ) -> ProduceOutcome {
        guard self.terminal == nil, self.isCurrent(epoch: epoch) else { return .stop }
        let hasRoom = self.append(element, resuming: &resuming)
        return respectingBounds && !hasRoom ? .park : .proceed
    }

    /// Stores `element` for every subscriber and hands it straight to the waiting ones,
    /// whose continuations are appended to `resuming`. Returns `hasRoom` as it is afterwards.
    ///
    /// One pass over the lanes does everything per element (histogram, drops, the oldest
    /// position still needed, room): this is the producer's hot path.
    @inlinable
    @discardableResult
    mutating func append(_ element: Element, resuming: inout [SubscriberContinuation]) -> Bool {
        let position = self.tail
        let newTail = position + 1
        var needed = self.replayCount > 0
        var keepFrom = newTail - self.replayCount
        var hasRoom = true

        for l in self.lanes.indices {
            guard self.lanes[l].members > 0 else {
                // Nobody to count: the (empty) histogram just follows the tail.
                if self.lanes[l].counts.isEmpty { self.lanes[l].counts.rebase(to: newTail) }
                keepFrom = Swift.min(keepFrom, self.lanes[l].minCursor)
                continue
            }
            let freezeLimit = self.lanes[l].freezeLimit
            if freezeLimit > 0 {
                self.freezeFullCell(lane: l, limit: freezeLimit, appending: position)
                self.deliverToRoomList(element, lane: l, limit: freezeLimit)
            }
            let nonWaiting = self.lanes[l].atTail - self.lanes[l].waiting
            self.lanes[l].appendCount(nonWaiting, at: position)
            // Waiting members take the element right away (below): they stay caught up.
            self.lanes[l].atTail = self.lanes[l].waiting
            self.lanes[l].waiting = 0
            // Members now holding `dropLimit + 1` drop their oldest: the whole cell moves on.
            let dropLimit = self.lanes[l].dropLimit
            if dropLimit >= 0 {
                let floor = newTail - dropLimit
                while !self.lanes[l].counts.isEmpty && self.lanes[l].minCursor < floor {
                    self.lanes[l].advanceOldestCell(tail: newTail)
                }
            }
            let minCursor = self.lanes[l].minCursor
            if !self.lanes[l].counts.isEmpty { needed = true }
            keepFrom = Swift.min(keepFrom, minCursor)
            if newTail - minCursor > self.lanes[l].roomLevel { hasRoom = false }
        }

        if needed || !self.elements.isEmpty {
            self.elements.append(element)
        } else {
            self.elements.rebase(to: newTail)
        }

        if !self.waiters.isEmpty {
            resuming.reserveCapacity(self.waiters.count)
            for waiter in self.waiters {
                self.slots[Int(waiter.slot)].cursor = newTail
                self.slots[Int(waiter.slot)].waiterIndex = -1
                resuming.append(waiter.continuation)
            }
            self.waiters.removeAll(keepingCapacity: true)
        }
        // What `trimElements()` would do, with the minimum computed above.
        self.trimElements(before: keepFrom)
        assert(hasRoom == self.hasRoom, "append's room check disagrees with hasRoom")
        return hasRoom
    }

    /// `.bufferingOldest(limit)`: the members holding `limit` elements cannot take the one
    /// being appended at `position`. Copy their `limit` pending elements once and let the
    /// cell stop pinning the shared buffer.
    @inlinable
    mutating func freezeFullCell(lane l: Int, limit: Int, appending position: Int) {
        let full = position - limit
        guard !self.lanes[l].counts.isEmpty, self.lanes[l].minCursor == full else { return }
        let members = self.lanes[l].counts[full]
        assert(members > 0, "histogram cells at the window start are positive")
        assert(self.lanes[l].frozen[full] == nil, "a cell freezes once")
        var copy: [Element] = []
        copy.reserveCapacity(limit)
        for p in full..<position { copy.append(self.elements[p]) }
        self.lanes[l].frozen[full] = FrozenGroup(elements: copy, members: members)
        self.lanes[l].counts[full] = 0
        self.lanes[l].dropLeadingZeros()
    }

    @inlinable
    mutating func deliverToRoomList(_ element: Element, lane l: Int, limit: Int) {
        var index = 0
        while index < self.lanes[l].roomList.count {
            let key = self.lanes[l].roomList[index]
            self.detached[key]!.queue.append(element)
            if self.detached[key]!.pending >= limit {
                self.removeFromRoomList(key, lane: l)  // swaps the last one into `index`
            } else {
                index += 1
            }
        }
    }

    /// Appends `element` only if every bounded subscriber has room (a subject's suspending
    /// `send`); otherwise returns `nil` and the producer should wait with `parkProducer`.
    @inlinable
    mutating func produceIfRoom(_ element: Element, epoch: UInt64) -> ProduceAction? {
        guard self.terminal == nil, self.isCurrent(epoch: epoch) else { return .stop }
        guard self.hasRoom else { return nil }
        return self.produce(element, epoch: epoch, respectingBounds: false)
    }

    /// The most recently produced element, if the shared buffer still holds it (it always
    /// does with a replay window).
    @inlinable
    var latestElement: Element? {
        self.elements.isEmpty ? nil : self.elements[self.tail - 1]
    }

    /// What a producer of `epoch` that was told to `.park` should do now, without parking:
    /// `.stop` (stale or terminated), `.proceed` (room to resume, see `hasRoomToResume`)
    /// or `.park` (still full).
    @inlinable
    func producerStatus(epoch: UInt64) -> ProduceOutcome {
        if self.terminal != nil || !self.isCurrent(epoch: epoch) { return .stop }
        return self.hasRoomToResume ? .proceed : .park
    }

    /// Parks a producer that was told to `.park` until there is room (resumed with `true`)
    /// or it must stop (`false`). Resumed at once if that is already decided.
    @inlinable
    mutating func parkProducer(
        epoch: UInt64, token: UInt64, continuation: ProducerContinuation
    ) -> Effects {
        var effects = Effects()
        switch self.producerStatus(epoch: epoch) {
        case .stop:
            effects.producers = [continuation]
            effects.producerResult = false
        case .proceed:
            effects.producers = [continuation]
            effects.producerResult = true
        case .park:
            self.parkedProducers.append((token, continuation))
        }
        return effects
    }

    /// Removes a parked producer (its task was cancelled) and returns its continuation.
    @inlinable
    mutating func unparkProducer(token: UInt64) -> ProducerContinuation? {
        guard let index = self.parkedProducers.firstIndex(where: { $0.token == token }) else { return nil }
        return self.parkedProducers.remove(at: index).continuation
    }

    @inlinable
    mutating func takeProducersIfRoom() -> [ProducerContinuation] {
        guard !self.parkedProducers.isEmpty, self.hasRoomToResume else { return [] }
        defer { self.parkedProducers.removeAll() }
        return self.parkedProducers.map(\.continuation)
    }

    /// The upstream iteration `epoch` ended: `nil` when it finished, else its error.
    /// Subscribers receive what is buffered, then the terminal event.
    @inlinable
    mutating func finish(epoch: UInt64, failure: Failure?) -> Effects {
        var effects = Effects()
        guard self.terminal == nil, self.isCurrent(epoch: epoch) else { return effects }
        let terminal: Terminal = failure.map { .failed($0) } ?? .finished
        self.terminal = terminal
        if self.keepAliveTimerIsRunning {
            self.keepAliveTimerIsRunning = false
            effects.keepAliveTimer = .cancel
        }
        self.upstream = .terminated
        self.endWaiters(into: &effects, with: terminal.result)
        self.releaseProducers(into: &effects, result: false)
        return effects
    }

    // MARK: Explicit connection (multicast) and keep-alive

    /// Starts the upstream if it is idle. Returns the running epoch (`nil` once terminated).
    @inlinable
    mutating func connect() -> (epoch: UInt64?, effects: Effects) {
        var effects = Effects()
        switch self.upstream {
        case .running(let epoch), .lingering(let epoch):
            return (epoch, effects)
        case .terminated:
            return (nil, effects)
        case .idle:
            let epoch = self.nextEpoch
            self.nextEpoch += 1
            self.upstream = .running(epoch: epoch)
            effects.startUpstream = epoch
            return (epoch, effects)
        }
    }

    /// Cancels the upstream iteration `epoch`. The subscribers present now receive what is
    /// buffered for them, then `nil`; later subscribers wait for the next connection.
    ///
    /// Each present subscriber leaves its lane at once, taking a private copy of exactly
    /// what it still had to read: from now on it counts against no bound, no policy drops
    /// or adds anything for it, and no element of a later connection reaches it. Members
    /// at the same position share one copy.
    @inlinable
    mutating func disconnect(epoch: UInt64) -> Effects {
        var effects = Effects()
        guard self.terminal == nil, self.isCurrent(epoch: epoch) else { return effects }
        self.stopUpstream(epoch: epoch, into: &effects)
        self.endWaiters(into: &effects, with: .success(nil))
        var copies: [Int: [Element]] = [:]
        for s in self.slots.indices where self.slots[s].isLive && self.slots[s].lane != Slot.noLane {
            let slot = self.slots[s]
            let pending: [Element]
            if slot.isDetached || slot.cursor < self.lanes[Int(slot.lane)].minCursor {
                pending = self.pendingElements(of: s)
            } else if let shared = copies[slot.cursor] {
                pending = shared
            } else {
                pending = self.pendingElements(of: s)
                copies[slot.cursor] = pending
            }
            self.leaveLane(s)
            self.detached[UInt32(s)] = Detached(queue: pending, endsWhenEmpty: true)
            self.slots[s].isDetached = true
        }
        self.trimElements()
        return effects
    }

    /// The keep-alive timer task found the deadline of the last window passed: cancel the
    /// upstream if nobody came back. The timer task ends either way.
    @inlinable
    mutating func keepAliveExpired() -> Effects {
        var effects = Effects()
        self.keepAliveTimerIsRunning = false
        if case .lingering(let epoch) = self.upstream {
            self.stopUpstream(epoch: epoch, into: &effects)
        }
        return effects
    }

    // MARK: Push (subjects)

    /// Completes a push-fed machine (a subject). Ignored once completed.
    @inlinable
    mutating func complete(failure: Failure?) -> Effects {
        guard case .running(let epoch) = self.upstream else { return Effects() }
        return self.finish(epoch: epoch, failure: failure)
    }
}
