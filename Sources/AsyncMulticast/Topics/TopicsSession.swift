import Synchronization

// The upstream of topics of one upstream (`share(by:)`): one shared sequence of the base (a
// `share()` storage, "the hub", which owns the upstream's lifecycle: started by its first
// subscriber's `next()`, stopped after its last one leaves and `keepAlive` on the clock, never
// two iterations at once) and one pump task, the hub's only subscriber, which routes each
// element to its key's subject. The pump runs while the topics have a live key:
//
//   - the topics count their live keys (`liveKeys`), in the same critical section of a shard
//     that creates or removes a key, so that the count is exact for every key that exists;
//   - every join of a live key makes sure a pump is installed before `subscribe(to:)`
//     returns (`pumpNeeded`): a join after the pump is installed sees every element the
//     upstream produces after it joined (the pump's hub subscriber was there before), and
//     at most the two on their way: in the hub (`hubPolicy`, one) and in the pump's hand;
//   - the removal that brings the count to 0 stops the pump (`lastKeyFreed`), if the count
//     is still 0 under the session's lock: a join whose key was counted before that lock
//     found the pump installed, and keeps it. A stopped pump routes nothing more (the
//     elements it had taken belong to no live key), and the next pump routes nothing
//     before the stopped one has returned: a key's subscriber gets its elements in order.
//
// The session's lock is a leaf: it is never held while another lock is taken, a task is
// cancelled or a subscription is released. Its decisions are `PumpState`'s transitions.

/// Whether a pump runs, and what it is: the state of a `TopicsSession`, under its lock.
@usableFromInline
struct PumpState: Sendable {
    /// The pump task while one is installed.
    @usableFromInline
    var pump: Task<Void, Never>?
    /// The number of the installed pump, or of the last one: a pump that returns names
    /// itself by it.
    @usableFromInline
    var generation: UInt64 = 0
    /// The last pump stopped, until it returns: the next pump routes nothing before it has,
    /// so that a key's subscriber never gets an older element after a newer one.
    @usableFromInline
    var retiring: (generation: UInt64, task: Task<Void, Never>)?

    @inlinable
    init() {}

    /// A join of a live key asks whether a pump runs: `true` if one must be installed.
    @inlinable
    func pumpRequested() -> Bool { self.pump == nil }

    /// What follows a pump offered by a join (its hub subscriber already joined).
    @usableFromInline
    enum Offered: Sendable {
        /// Install it: create its task in this critical section and keep its handle.
        case install
        /// Another join installed one first, or no key is live any more: release the offer
        /// outside the lock.
        case discard
    }

    /// A join offers a pump whose hub subscriber has joined; `liveKeys` was read under the
    /// lock. A pump installed while no key is live would never be stopped.
    @inlinable
    func pumpOffered(liveKeys: Int) -> Offered {
        self.pump == nil && liveKeys > 0 ? .install : .discard
    }

    /// The pump of an offer is installed: the number its task names itself by, and the
    /// stopped pump it must wait for; `pumpCreated` is then told its task, in the same
    /// critical section.
    @inlinable
    mutating func pumpInstalling() -> (generation: UInt64, previous: Task<Void, Never>?) {
        self.generation &+= 1
        return (self.generation, self.retiring?.task)
    }

    /// The task of the pump being installed.
    @inlinable
    mutating func pumpCreated(_ task: Task<Void, Never>) {
        self.pump = task
    }

    /// Pump `generation` returned (the upstream ended, or it was cancelled): its handle is
    /// forgotten if it is still the installed one. `true` if it was.
    @inlinable
    mutating func pumpReturned(generation: UInt64) -> Bool {
        if self.retiring?.generation == generation { self.retiring = nil }
        guard self.generation == generation, self.pump != nil else { return false }
        self.pump = nil
        return true
    }

    /// A removal brought the live keys to 0; `liveKeys` was read again under the lock. The
    /// pump to cancel outside the lock, if no key became live since.
    @inlinable
    mutating func lastKeyFreed(liveKeys: Int) -> Task<Void, Never>? {
        guard liveKeys == 0, let pump = self.pump else { return nil }
        self.pump = nil
        self.retiring = (self.generation, pump)
        return pump
    }
}

/// The upstream of `AsyncSharedTopics`: the hub, the key of each element, the pump.
@usableFromInline
final class TopicsSession<Key: Hashable & Sendable, Element: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias Hub = MulticastStorage<Element, Failure>

    /// The `share()` storage of the base: the pump is its only subscriber.
    @usableFromInline
    let hub: Hub
    /// The key of an element: user code, called by the pump only, outside every lock.
    @usableFromInline
    let key: @Sendable (Element) -> Key
    /// The topics' live keys, changed in the shards' critical sections that create or
    /// remove a key.
    @usableFromInline
    let liveKeys = Atomic<Int>(0)
    /// Whether a pump is installed: read without the lock by a join, as the fast path of
    /// `pumpNeeded`. Set and cleared under the lock.
    @usableFromInline
    let pumping = Atomic<Bool>(false)
    @usableFromInline
    let state = Lock(PumpState())
    /// The generation of the pump that may route, 0 once it was stopped: set in the critical
    /// section that installs or stops a pump, read by the pump after it took an element.
    /// Stopped is decided there, not when the task is cancelled (after the lock): a pump
    /// still routing between the two would route an element the next pump, joined to the
    /// hub meanwhile, routes again.
    @usableFromInline
    let routing = Atomic<UInt64>(0)

    /// The policy of the pump's subscription to the hub: lossless, so that a pump waiting
    /// for room in a key's `.bounded` subscriber parks the upstream behind it; one element,
    /// so that at most two elements are on their way to the keys (this one and the pump's),
    /// which is what a subscriber may get that the upstream produced before it joined.
    /// Routing per element costs instructions: at 10,000 keys of one subscriber, about
    /// 13,000 a delivery against 8,200 with 64 (Benchmarks' README, `topics`).
    @usableFromInline
    static var hubPolicy: SharedBufferingPolicy { .bounded(1) }

    @inlinable
    init(hub: Hub, key: @escaping @Sendable (Element) -> Key) {
        self.hub = hub
        self.key = key
    }

    /// Under a shard's lock: a key was created.
    @inlinable
    func keyCreated() {
        self.liveKeys.wrappingAdd(1, ordering: .sequentiallyConsistent)
    }

    /// Under a shard's lock: `count` keys were removed. `true` if none is live now: call
    /// `lastKeyFreed(topics:)` once the shard's lock is released.
    @inlinable
    func keysRemoved(_ count: Int) -> Bool {
        count > 0 && self.liveKeys.wrappingSubtract(count, ordering: .sequentiallyConsistent).newValue == 0
    }

    /// After a removal brought the live keys to 0, outside every lock: stops the pump, unless
    /// a key became live since. Its hub subscriber leaves when the cancelled task returns,
    /// and the hub stops the upstream (after `keepAlive`) if nobody else joined.
    @inlinable
    func lastKeyFreed() {
        let stopping = self.state.withLock { state -> Task<Void, Never>? in
            // `pumping` is cleared before the count is read, as a join counts its key before
            // it reads `pumping` (both sequentially consistent): either this read sees the
            // join's key, or the join sees `pumping` cleared and takes this lock, after this
            // critical section. Read the other way round, a join could count its key after
            // the read and see `pumping` still set: its key would be left without a pump.
            self.pumping.store(false, ordering: .sequentiallyConsistent)
            let live = self.liveKeys.load(ordering: .sequentiallyConsistent)
            let stopping = state.lastKeyFreed(liveKeys: live)
            if stopping != nil { self.routing.store(0, ordering: .sequentiallyConsistent) }
            if !state.pumpRequested() { self.pumping.store(true, ordering: .sequentiallyConsistent) }
            return stopping
        }
        stopping?.cancel()
    }

    /// After a join of a live key, outside every lock: installs a pump if none runs. Its hub
    /// subscriber joins before this returns, so the joined subscriber gets every element the
    /// upstream produces from now on.
    @inlinable
    func pumpNeeded(topics: AsyncSubjectTopics<Key, Element, Failure>) {
        // A pump, once installed, stays while a key is live: the join's key is, counted before
        // this read (see `lastKeyFreed`).
        if self.pumping.load(ordering: .sequentiallyConsistent) { return }
        guard self.state.withLock({ $0.pumpRequested() }) else { return }
        // Joined outside the lock: joining the hub may close its keep-alive window, which
        // cancels its timer task (its clock's code runs then).
        let offer = SharedSubscription(_SharedCore(self.hub), policy: Self.hubPolicy)
        self.state.withLock { state in
            let live = self.liveKeys.load(ordering: .sequentiallyConsistent)
            guard case .install = state.pumpOffered(liveKeys: live) else { return }
            let (generation, previous) = state.pumpInstalling()
            self.routing.store(generation, ordering: .sequentiallyConsistent)
            // Creating a task only enqueues it: registered in the critical section that
            // decided it, before a `lastKeyFreed` can look for it. It holds the topics while
            // it runs, as a shared sequence's upstream task holds its storage (so a
            // subscriber keeps them even if nothing else does), and forgets its own handle
            // when it returns, so that the handle never keeps them.
            state.pumpCreated(
                Task.detached {
                    // Cancelled, it returns soon: it routes nothing more.
                    await previous?.value
                    await Self.pump(offer, key: self.key, into: topics) {
                        self.routing.load(ordering: .sequentiallyConsistent) == generation
                    }
                    self.pumpReturned(generation: generation)
                })
            self.pumping.store(true, ordering: .sequentiallyConsistent)
        }
        // A discarded offer is released here, outside the lock: its hub subscriber leaves.
    }

    /// Pump `generation` returned: its handle is forgotten, if it is still installed.
    @inlinable
    func pumpReturned(generation: UInt64) {
        self.state.withLock { state in
            if state.pumpReturned(generation: generation) {
                self.pumping.store(false, ordering: .sequentiallyConsistent)
            }
        }
    }

    /// The pump: reads the hub and sends each element to its key's subject, waiting for room
    /// in its `.bounded` subscribers (the hub, then the upstream, waits meanwhile). An
    /// element of a key without a subject reaches nobody. When the upstream ends, every key
    /// ends with it; once it is stopped (`mayRoute` false: no key was live), it routes
    /// nothing more and only leaves the hub, cancelled or not yet.
    @inlinable
    static func pump(
        _ subscription: SharedSubscription<Element, Failure>, key: @Sendable (Element) -> Key,
        into topics: AsyncSubjectTopics<Key, Element, Failure>, mayRoute: () -> Bool
    ) async {
        var iterator = subscription.makeAsyncIterator()
        do throws(Failure) {
            while let element = try await iterator.next(isolation: nil) {
                // Stopped: the element it had taken is dropped (no key was live when it was
                // stopped), not routed beside the next pump's. Checked after the key function
                // and the lookup, which may take long: a key freed and joined again meanwhile
                // must not get an element taken long before. A stop between the lookup and
                // this check routes that one element, which a key joined since may get: one
                // of the two on their way (`hubPolicy`), before the next pump routes any.
                guard let subject = topics.subject(of: key(element)) else { continue }
                if !mayRoute() { return }
                await subject.sendWhenReady(element)
            }
            // `nil`: the upstream finished, or this task was cancelled (a later pump, if a
            // key becomes live, finds the hub finished and ends the keys then).
            if Task.isCancelled || !mayRoute() { return }
            topics.finish()
        } catch {
            topics.fail(error)
        }
    }
}
