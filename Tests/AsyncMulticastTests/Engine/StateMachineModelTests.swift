// A seeded, randomized model test of the whole engine: every face's operations (share and
// replay with keep-alive, multicast connect / cancel / reconnect with autoconnect, subjects
// with send and send(waitingForRoom:) (senders waiting in order, and cancelled), per-subscriber
// views joining and leaving, iterators
// holding batches they have not returned yet, subscribers and producers suspended on real
// continuations) are applied to `MulticastStateMachine` and to a plain reference model: one
// queue per subscriber, as if each had its own `AsyncStream`.
//
// After every step it compares what each subscriber may still receive, what counts against
// each bound, whether a waiting producer should have been released, the upstream's state,
// and `checkInvariants()`. Every read also checks its `ReadReport`: how many elements the
// subscriber's policy dropped just before what it returns (`.missed(n)` of a lag-reporting
// iterator), and whether its end is an eviction (`.evicting(n)`). A failing seed is shortened to the fewest steps that still fail,
// and those steps are printed.
//
// MODEL_TEST_SEEDS=<n> in the environment runs n seeds instead of the default.

import Foundation  // ProcessInfo, for MODEL_TEST_SEEDS
import Testing

@testable import AsyncMulticast

// MARK: - Steps

/// One step of a run. Its numbers are resolved against the state when it runs (`pick` modulo
/// the live subscribers, for example), so every sequence of steps is valid, and a failing one
/// can be shortened by deleting steps.
enum ModelStep: CustomStringConvertible, Sendable {
    /// A subscriber joins with policy `policy` of `ModelRun.policies` (-1: the default);
    /// with `reportsGaps`, it reads as a lag-reporting iterator does (`events()`).
    case join(policy: Int, reportsGaps: Bool)
    /// A subscriber's `next()`; with `wait`, it suspends if nothing is ready, in a task of
    /// `priority` (`TaskPriority.rawValue`; a subject's storage passes 0), which may raise
    /// the upstream task (+Priority).
    case read(pick: Int, wait: Bool, priority: UInt8 = 0)
    /// A subscriber leaves (its task was cancelled or its iterator released).
    case leave(pick: Int)
    /// The upstream offers the next value (pull modes), or a subject's synchronous `send`.
    case produce
    /// A subject's `send(waitingForRoom:)` of the next value.
    case sendWaitingForRoom
    /// A producer told to wait for room polls (`park: false`) or parks; a subject's sender
    /// parks with its value, and one that finds room when it polls sends its value.
    case waitForRoom(pick: Int, park: Bool)
    /// A subject's sender parked with its value is cancelled: the value goes in at once.
    case cancelSender(pick: Int)
    case connect
    /// The current connection is cancelled (`stale`: an old connection's cancel).
    case disconnect(stale: Bool)
    /// A timer task (`pick` among those not yet returned, stale ones too) wakes: its sleep
    /// returned, or failed (`returned: false`), or, the first time, it starts; it steps
    /// (`timerWoke`) at the model's clock, and returns when the machine says so.
    case timerWakes(pick: Int, returned: Bool)
    /// The storage's clock moves by `seconds` (back, if negative: a user's clock need not be
    /// monotonic).
    case clockMoves(seconds: Int64)
    case finish(fail: Bool)
    /// An upstream iteration that was stopped offers one more value.
    case produceStale
    /// The `run()` hosting the upstream ends (`AsyncSharedService`, `.automatic` mode): the
    /// machine ends as finished, cancelling an iteration that runs.
    case hostStops
    /// The machine's timer task finds its window closed: its sleep failed (the exhaustive
    /// explorer's timer step; the random runs wake timer tasks with `timerWakes`).
    case keepAliveExpires
    /// A hosted machine's `run()` (`AsyncSharedService`) does something (+Hosting).
    case host(ModelHostStep)
    /// An observer of the subscriber count or of a subject's completion comes or goes
    /// (+Observers).
    case observe(ModelObserveStep)

    var description: String {
        switch self {
        case .join(let policy, let reportsGaps):
            return "join(\(policy < 0 ? "default" : "\(ModelRun.policies[policy])")\(reportsGaps ? ", events" : ""))"
        case .read(let pick, let wait, let priority):
            guard wait else { return "read(#\(pick))" }
            return priority == 0 ? "read-or-wait(#\(pick))" : "read-or-wait(#\(pick), at \(priority))"
        case .leave(let pick): return "leave(#\(pick))"
        case .produce: return "produce"
        case .sendWaitingForRoom: return "send(waitingForRoom:)"
        case .waitForRoom(let pick, let park): return park ? "park(#\(pick))" : "poll-for-room(#\(pick))"
        case .cancelSender(let pick): return "cancel-sender(#\(pick))"
        case .connect: return "connect"
        case .disconnect(let stale): return stale ? "cancel(stale connection)" : "cancel(connection)"
        case .timerWakes(let pick, let returned): return "timer #\(pick) wakes\(returned ? "" : " (its sleep failed)")"
        case .clockMoves(let seconds): return "the clock moves \(seconds) s"
        case .finish(let fail): return fail ? "fail" : "finish"
        case .produceStale: return "produce(stale epoch)"
        case .hostStops: return "host stops"
        case .keepAliveExpires: return "keep-alive expires"
        case .host(let step): return "run(): \(step)"
        case .observe(let step): return "observer: \(step)"
        }
    }
}

/// Which face a run drives, and how.
struct ModelConfig: CustomStringConvertible, Sendable {
    var mode: UpstreamMode
    var replay: Int
    var keepAlive: KeepAlive
    var autoconnect: Bool
    var defaultPolicy: SharedBufferingPolicy
    var mixedPolicies: Bool
    /// What a stopped `.automatic` upstream's replay cache does, and how long the windows last.
    var replayExpiry: ReplayExpiry = .never
    var keepAliveWindow: Duration = .zero
    var replayExpiryWindow: Duration = .zero
    /// The upstream runs in a hosted `run()` (`AsyncSharedService`).
    var hosted = false

    init(
        mode: UpstreamMode, replay: Int, keepAlive: KeepAlive = .off, autoconnect: Bool = false,
        defaultPolicy: SharedBufferingPolicy, mixedPolicies: Bool = false
    ) {
        self.mode = mode
        self.replay = replay
        self.keepAlive = keepAlive
        self.autoconnect = autoconnect
        self.defaultPolicy = defaultPolicy
        self.mixedPolicies = mixedPolicies
    }

    init(seed: UInt64) {
        var rng = LCG(seed: seed ^ 0x5EED)
        self.mode = [UpstreamMode.automatic, .manual, .push][Int(rng.next() % 3)]
        self.replay = [0, 0, 1, 3][Int(rng.next() % 4)]
        // Half of the automatic runs linger: most of them for a window, some forever.
        let lingering: [KeepAlive] = [.off, .off, .off, .off, .window, .window, .window, .forever]
        self.keepAlive = self.mode == .automatic ? lingering[Int(rng.next() % 8)] : .off
        self.autoconnect = self.mode == .manual && rng.next() % 2 == 0
        self.defaultPolicy = ModelRun.policies[Int(rng.next() % UInt64(ModelRun.policies.count))]
        self.mixedPolicies = rng.next() % 3 != 0
        // Windows shorter and longer than the timer's longest sleep (a day).
        let lengths: [Duration] = [.seconds(1), .seconds(10), .seconds(200_000)]
        self.keepAliveWindow = self.keepAlive == .window ? lengths[Int(rng.next() % 3)] : .zero
        if self.mode == .automatic, self.replay > 0 {
            self.replayExpiry = [ReplayExpiry.never, .immediately, .afterWindow, .afterWindow][Int(rng.next() % 4)]
            if self.replayExpiry == .afterWindow { self.replayExpiryWindow = lengths[Int(rng.next() % 3)] }
        }
        self.hosted = self.mode != .push && rng.next() % 4 == 0
    }

    /// This configuration, changed by `change`.
    func with(_ change: (inout ModelConfig) -> Void) -> ModelConfig {
        var config = self
        change(&config)
        return config
    }

    /// Whether the machine times a window: only then do the timer's steps come.
    var timesWindows: Bool {
        self.mode == .automatic && (self.keepAlive == .window || self.replayExpiry == .afterWindow)
    }

    var description: String {
        let face: String
        switch self.mode {
        case .automatic: face = self.replay > 0 ? "replay(\(self.replay))" : "share()"
        case .manual: face = "multicast(replay: \(self.replay))" + (self.autoconnect ? ".autoconnect()" : "")
        case .push: face = "subject(replay: \(self.replay))"
        }
        let lingering = self.keepAlive == .off ? "" : ", keepAlive \(self.keepAlive) \(self.keepAliveWindow)"
        let expiry =
            self.replayExpiry == .never ? "" : ", replay expiry \(self.replayExpiry) \(self.replayExpiryWindow)"
        return "\(face)\(self.hosted ? ", hosted" : ""), buffering \(self.defaultPolicy)\(lingering)\(expiry)"
            + (self.mixedPolicies ? ", with views" : "")
    }

    /// `count` random steps, weighted towards what this face can do.
    func steps(seed: UInt64, count: Int) -> [ModelStep] {
        var rng = LCG(seed: seed)
        var steps: [ModelStep] = []
        func pick() -> Int { Int(rng.next() % 64) }
        while steps.count < count {
            let roll = Int(rng.next() % 100)
            switch roll {
            case 0..<10:
                let policy = self.mixedPolicies ? Int(rng.next() % UInt64(ModelRun.policies.count + 4)) - 2 : -1
                steps.append(
                    .join(policy: Swift.min(policy, ModelRun.policies.count - 1), reportsGaps: rng.next() % 2 == 0))
            case 10..<38:
                let priority = ModelRun.waitPriorities[Int(rng.next() % UInt64(ModelRun.waitPriorities.count))]
                steps.append(.read(pick: pick(), wait: rng.next() % 3 == 0, priority: priority))
            case 38..<43: steps.append(.leave(pick: pick()))
            case 43..<70:
                steps.append(self.mode == .push && rng.next() % 2 == 0 ? .sendWaitingForRoom : .produce)
            case 70..<80: steps.append(.waitForRoom(pick: pick(), park: rng.next() % 3 != 0))
            case 80..<84: steps.append(self.mode == .push ? .cancelSender(pick: pick()) : .produceStale)
            case 84..<89 where self.mode == .manual: steps.append(.connect)
            case 89..<92 where self.mode == .manual: steps.append(.disconnect(stale: rng.next() % 4 == 0))
            case 84..<89 where self.timesWindows: steps.append(.timerWakes(pick: pick(), returned: rng.next() % 4 != 0))
            case 89..<92 where self.timesWindows:
                let moves: [Int64] = [1, 1, 5, 10, 40_000, 100_000, -3, -100_000]
                steps.append(.clockMoves(seconds: moves[Int(rng.next() % UInt64(moves.count))]))
            case 92..<93: steps.append(.finish(fail: rng.next() % 2 == 0))
            case 97..<99:
                let observe: [ModelObserveStep] =
                    self.mode == .push
                    ? [.count, .stopCount(pick: pick()), .completion, .stopCompletion(pick: pick())]
                    : [.count, .stopCount(pick: pick())]
                steps.append(.observe(observe[Int(rng.next() % UInt64(observe.count))]))
            case 93..<97 where self.hosted:
                let host: [ModelHostStep] = [.starts, .asks, .asks, .asksCancelled, .waitCancelled, .cancelled, .ends]
                steps.append(.host(host[Int(rng.next() % UInt64(host.count))]))
            default: steps.append(.read(pick: pick(), wait: false))
            }
        }
        return steps
    }
}

// MARK: - The run

struct ModelFailure: Error, CustomStringConvertible {
    let step: Int
    let message: String
    var description: String { "step \(self.step): \(self.message)" }
}

/// One run of steps against a machine and the reference model.
struct ModelRun {
    typealias Result = Swift.Result<Int?, TestError>

    static let policies: [SharedBufferingPolicy] = [
        .bounded(1), .bounded(2), .bounded(4), .bounded(8), .unbounded,
        .bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(3),
        .bufferingOldest(0), .bufferingOldest(1), .bufferingOldest(3),
        .evicting(1), .evicting(3),
        // Takes batches of 3 that its policy may still drop (`HeldBatch.take`).
        .bufferingNewest(6),
    ]

    struct Subscriber {
        let id: SubscriberID
        let policy: SharedBufferingPolicy
        /// The iterator's batch, as `SharedIterator` keeps it: last first.
        var batch: [Int] = []
        /// A `.bufferingNewest` iterator's batch (`HeldBatch.take`): its elements stay
        /// in `pending` until returned, where the policy may still drop them.
        var held = HeldBatch<Int>()
        /// Not yet handed to the iterator, in order.
        var pending: [Int]
        /// For each of `pending`: how many elements its policy dropped just before it.
        var gaps: [Int]
        /// Dropped since the last of `pending`: reported before the next one, or the end.
        var trailing = 0
        /// What a read that found nothing reported: the iterator keeps it for its next read,
        /// as `MulticastStorage.refill` keeps it across a catch-up wait (and `wait` while suspended).
        var carried = 0
        /// Evicted by its `.evicting` policy (a hard limit: the model has no soft ones); its next
        /// read ends it as evicted, with this eviction.
        var eviction: SubscriberEviction?
        var evicted: Bool { self.eviction != nil }
        /// Its multicast connection ended: it drains `pending`, then ends.
        var ending = false
        /// `.evicting`: how many of the first `pending` are its greeting (replayed when it
        /// joined), which count against no limit.
        var greeting = 0
        /// It reads as a lag-reporting iterator does (`ReadReport.reportsGaps`): a gap is an
        /// event of its own, and `carried` stays 0.
        var reportsGaps = false
        var waiting: Suspended<Result>?
        /// The priority of its task while it waits (+Priority).
        var waitingPriority: UInt8 = 0

        var bound: Int? {
            if !self.ending, case .bounded(let n) = self.policy { return n }
            return nil
        }

        var batchLimit: Int {
            if self.ending { return 0 }
            switch self.policy {
            case .bounded(let n), .evicting(let n, _), .bufferingNewest(let n): return Swift.min(n / 2, 64)
            case .unbounded: return 64
            case .bufferingOldest: return 0
            }
        }

        init(id: SubscriberID, policy: SharedBufferingPolicy, pending: [Int]) {
            self.id = id
            self.policy = policy
            self.pending = pending
            self.gaps = pending.map { _ in 0 }
        }

        /// The gap a lag-reporting read reports next, if one comes before the next element
        /// (or before the end, or before it waits); forgotten once reported.
        mutating func takeGap() -> Int? {
            if self.evicted { return nil }
            if let first = self.gaps.first {
                guard first > 0 else { return nil }
                self.gaps[0] = 0
                return first
            }
            guard self.trailing > 0 else { return nil }
            defer { self.trailing = 0 }
            return self.trailing
        }

        /// An element arrives while it is not waiting: its own queue with this policy takes
        /// it, recording what it drops.
        mutating func receive(_ value: Int) {
            switch self.policy {
            case .bufferingNewest(let limit):
                self.pending.append(value)
                self.gaps.append(self.trailing)
                self.trailing = 0
                if self.pending.count > limit {
                    self.pending.removeFirst()
                    let dropped = self.gaps.removeFirst() + 1
                    if self.gaps.isEmpty { self.trailing += dropped } else { self.gaps[0] += dropped }
                }
            case .bufferingOldest(let limit):
                if self.pending.count < limit {
                    self.pending.append(value)
                    self.gaps.append(self.trailing)
                    self.trailing = 0
                } else {
                    self.trailing += 1
                }
            case .evicting(let limit, _):
                guard !self.evicted else { return }
                self.pending.append(value)
                self.gaps.append(0)
                if self.pending.count - self.greeting > limit {
                    // It never held more than the limit: the limit is its backlog and its high-water mark.
                    self.eviction = SubscriberEviction(reason: .hardLimit, backlog: limit, highWaterMark: limit)
                    self.greeting = 0
                    self.pending.removeAll()
                    self.gaps.removeAll()
                }
            case .bounded, .unbounded:
                self.pending.append(value)
                self.gaps.append(0)
            }
        }
    }

    enum Producer {
        /// May offer its next value.
        case free
        /// Was told to wait for room (`.park`, or `produceIfRoom` said no), with the value a
        /// subject sender still has to send.
        case mustWait(value: Int?)
        /// Parked with the token it parked with (tokens grow: they give the parking order),
        /// and a subject sender's value, which the machine appends in its turn.
        case parked(Suspended<Bool>, value: Int?, token: UInt64)
    }

    /// What releasing subject senders hands over: the waiting subscribers that receive a
    /// sender's value, and how many values went in.
    struct Handover {
        var subscribers: [(waiting: Suspended<Result>, value: Int)] = []
        var sent = 0
    }

    let config: ModelConfig
    var machine: Machine
    var subscribers: [Subscriber] = []
    var produced: [Int] = []
    var upstream: Machine.Upstream
    var nextEpoch: UInt64 = 0
    var terminal: Result?
    var timerRunning = false
    /// The generation of the last timer task the machine started.
    var timerGeneration: UInt64 = 0
    /// The timer tasks that have not returned yet (replaced and cancelled ones too).
    var timerTasks: [ModelTimerTask] = []
    var timerDeadline = Duration.zero
    var timerWakeUp: Duration?
    var replayExpiryPending = false
    /// The replay window starts no earlier than this index of `produced`.
    var replayFloor = 0
    /// The storage's clock.
    var time = Duration.zero
    /// The observers of the subscriber count, and the count they last heard; the completion
    /// observers' tokens.
    var countObservers: [SubscriberCountCell] = []
    var countHeard = 0
    var completionObservers: [UInt64] = []
    /// What the events of the current step said the observers must hear (`hear(_:)`).
    var heard = Machine.Notices()
    /// The upstream task's priority as the storage would know it: `UInt8.max` while it holds
    /// no task (+Priority).
    var upstreamPriority = UInt8.max
    /// Where a hosted machine's `run()` is, and the iteration it picked up last.
    var host: ModelHost = .notHosted
    var hostIteration: UInt64?
    /// The upstream's producer (pull modes, at most one: the current epoch's), or a subject's
    /// waiting senders.
    var producers: [Producer] = []
    var value = 0
    var nextToken: UInt64 = 0
    var staleEpochs: [UInt64] = []
    var step = 0
    /// `nil`: every wait suspends a new task, and `expect` resumes what the machine says to
    /// resume and checks who received it. Set (the explorer, which copies runs and drives
    /// each copy on): waits take tokens from the pool, and `expect` checks by identity
    /// what would be resumed, resuming nothing.
    let pool: ContinuationPool?

    init(config: ModelConfig, pool: ContinuationPool? = nil) {
        self.config = config
        self.pool = pool
        self.machine = Machine(
            policy: config.defaultPolicy, replay: config.replay, mode: config.mode, keepAlive: config.keepAlive,
            replayExpiry: config.replayExpiry, windows: (config.keepAliveWindow, config.replayExpiryWindow),
            hosted: config.hosted)
        self.host = config.hosted ? .notStarted(pending: nil) : .notHosted
        self.upstream = config.mode == .push ? .running(epoch: 0) : .idle
        if config.mode == .push { self.nextEpoch = 1 }
    }

    var currentEpoch: UInt64? {
        switch self.upstream {
        case .running(let epoch), .lingering(let epoch): return epoch
        case .idle, .terminated: return nil
        }
    }

    var hasRoom: Bool {
        self.subscribers.allSatisfy { sub in sub.bound.map { sub.pending.count <= $0 - 1 } ?? true }
    }

    /// Parked producers go on: an upstream's at the resume level, a subject's senders as
    /// soon as there is room for one.
    var parkedMayGoOn: Bool { self.config.mode == .push ? self.hasRoom : self.hasRoomToResume }

    var hasRoomToResume: Bool {
        self.subscribers.allSatisfy { sub in
            sub.bound.map { sub.pending.count <= $0 - Swift.max(1, $0 / 2) } ?? true
        }
    }

    func fail(_ message: String) -> ModelFailure { ModelFailure(step: self.step, message: message) }

    func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(ModelFailure) {
        if !condition { throw self.fail(message()) }
    }

    // MARK: Applying the effects a transition returned

    /// Checks that `effects` resume exactly `subscribers` with `result` and the parked
    /// producers the model releases with `producerResult`, then resumes them all.
    mutating func expect(
        _ effects: Machine.Effects, resuming subscribers: [Suspended<Result>], with result: Result?,
        releasing producers: [Suspended<Bool>], with producerResult: Bool, handingOver handover: Handover = Handover(),
        cancelling cancelled: UInt64? = nil, starting started: UInt64? = nil,
        timer: Machine.TimerTaskAction = .none
    ) async throws(ModelFailure) {
        try self.check(
            effects.subscribers.count == subscribers.count,
            "resumed \(effects.subscribers.count) subscribers, expected \(subscribers.count)")
        if let result, !subscribers.isEmpty {
            try self.check(
                effects.subscriberResult == result,
                "subscribers resumed with \(effects.subscriberResult), expected \(result)")
        }
        try self.check(
            effects.producers.count == producers.count,
            "released \(effects.producers.count) producers, expected \(producers.count)")
        if !producers.isEmpty {
            try self.check(
                effects.producerResult == producerResult,
                "producers released with \(effects.producerResult), expected \(producerResult)")
        }
        try self.check(
            effects.cancelUpstream == cancelled,
            "cancelUpstream \(String(describing: effects.cancelUpstream)), expected \(String(describing: cancelled))")
        try self.check(
            effects.startUpstream == started,
            "startUpstream \(String(describing: effects.startUpstream)), expected \(String(describing: started))")
        try self.check(effects.timerTask == timer, "timer action \(effects.timerTask), expected \(timer)")
        self.hear(effects)
        try self.check(
            effects.handedOver.count == handover.subscribers.count,
            "handed senders' values to \(effects.handedOver.count) subscribers, expected \(handover.subscribers.count)")
        try self.check(
            effects.parkedElementsAppended == handover.sent,
            "appended \(effects.parkedElementsAppended) senders' values, expected \(handover.sent)")
        if self.pool != nil {
            try self.checkIdentities(effects, resuming: subscribers, releasing: producers, handingOver: handover)
            return
        }
        for continuation in effects.subscribers { continuation.resume(returning: effects.subscriberResult) }
        for (continuation, element) in effects.handedOver { continuation.resume(returning: .success(element)) }
        for continuation in effects.producers { continuation.resume(returning: effects.producerResult) }
        // The right continuations were resumed: the ones the model expected received it.
        for waiting in subscribers {
            let received = await waiting.value()
            try self.check(received != nil, "an expected subscriber continuation was not the one resumed")
        }
        for waiting in producers {
            let received = await waiting.value()
            try self.check(received == producerResult, "an expected producer continuation was not the one resumed")
        }
        for (waiting, value) in handover.subscribers {
            let received = await waiting.value()
            try self.check(
                received == .success(value), "a subscriber handed a sender's value received \(received as Any)")
        }
    }

    /// `expect` with tokens from the pool, which are never resumed: the continuations
    /// `effects` would resume are exactly the expected ones (the counts are checked already).
    func checkIdentities(
        _ effects: Machine.Effects, resuming subscribers: [Suspended<Result>], releasing producers: [Suspended<Bool>],
        handingOver handover: Handover
    ) throws(ModelFailure) {
        try self.check(
            effects.subscribers.map { $0.identity }.sorted() == subscribers.map { $0.identity }.sorted(),
            "resumed other subscriber continuations than the waiting ones expected")
        try self.check(
            effects.producers.map { $0.identity }.sorted() == producers.map { $0.identity }.sorted(),
            "released other producer continuations than the parked ones expected")
        let handedOver = effects.handedOver.map { "\($0.continuation.identity):\($0.element)" }
        let expected = handover.subscribers.map { "\($0.waiting.identity):\($0.value)" }
        try self.check(
            handedOver.sorted() == expected.sorted(), "handed senders' values to other subscribers, or other values")
    }

    /// A continuation for a subscriber about to wait: a new suspended task, or the pool's
    /// first token that no subscriber of this run holds.
    func waitingSubscriber() async -> Suspended<Result> {
        guard let pool = self.pool else { return await .make() }
        return ContinuationPool.first(of: pool.subscribers, notIn: self.subscribers.compactMap { $0.waiting?.identity })
    }

    /// A continuation for a producer about to park: a new suspended task, or the pool's
    /// first token that no producer of this run holds.
    func parkingProducer() async -> Suspended<Bool> {
        guard let pool = self.pool else { return await .make() }
        let inUse = self.producers.compactMap { producer -> UInt? in
            guard case .parked(let parked, _, _) = producer else { return nil }
            return parked.identity
        }
        return ContinuationPool.first(of: pool.producers, notIn: inUse)
    }

    /// Takes every parked producer out of the model: they are stopped, and end.
    mutating func takeParked() -> [Suspended<Bool>] {
        var taken: [Suspended<Bool>] = []
        self.producers = self.producers.compactMap { producer in
            guard case .parked(let waiting, _, _) = producer else { return producer }
            taken.append(waiting)
            return nil
        }
        return taken
    }

    /// The indices of the parked producers, in the order they parked.
    var parkedInOrder: [Int] {
        self.producers.indices.compactMap { index -> (index: Int, token: UInt64)? in
            guard case .parked(_, _, let token) = self.producers[index] else { return nil }
            return (index, token)
        }.sorted { $0.token < $1.token }.map(\.index)
    }

    /// The parked producers the model releases now, if any (room to resume), in the order
    /// they parked: an upstream's producer may produce again; a subject's sender has its
    /// value delivered first, while there is room, and is done. From the first sender that
    /// finds no room on, the senders stay parked.
    mutating func releasedIfRoom() -> (producers: [Suspended<Bool>], handover: Handover) {
        var handover = Handover()
        guard self.parkedMayGoOn else { return ([], handover) }
        var released: [Suspended<Bool>] = []
        var done: Set<Int> = []
        for index in self.parkedInOrder {
            guard case .parked(let waiting, let value, _) = self.producers[index] else { continue }
            if let value {
                guard self.hasRoom else { break }
                handover.subscribers += self.deliver(value).map { ($0, value) }
                handover.sent += 1
                done.insert(index)
            } else {
                self.producers[index] = .free
            }
            released.append(waiting)
        }
        self.producers = self.producers.indices.filter { !done.contains($0) }.map { self.producers[$0] }
        return (released, handover)
    }

    /// The upstream iteration stops: parked producers are released with `false`, the others end.
    mutating func stopUpstream(_ epoch: UInt64) -> [Suspended<Bool>] {
        self.staleEpochs.append(epoch)
        self.upstream = .idle
        let parked = self.takeParked()
        self.producers.removeAll()
        return parked
    }

    // MARK: Steps

    mutating func apply(_ step: ModelStep) async throws(ModelFailure) {
        switch step {
        case .join(let index, let reportsGaps):
            let policy = index < 0 ? nil : ModelRun.policies[index]
            let effective = policy ?? self.config.defaultPolicy
            let (id, joined) = self.machine.subscriberJoined(policy: policy, connectRule: .never)
            try self.check(joined.upstreamStart == nil, "a join that connects nothing started the upstream")
            self.hear(joined)
            let replayed = effective.replayed(Array(self.produced[self.replayFloor...]), replay: self.config.replay)
            self.subscribers.append(Subscriber(id: id, policy: effective, pending: replayed))
            self.subscribers[self.subscribers.count - 1].reportsGaps = reportsGaps
            if case .evicting = effective { self.subscribers[self.subscribers.count - 1].greeting = replayed.count }
            if case .lingering(let epoch) = self.upstream { self.upstream = .running(epoch: epoch) }

        case .read(let pick, let wait, let priority):
            guard !self.subscribers.isEmpty else { return }
            let k = pick % self.subscribers.count
            guard self.subscribers[k].waiting == nil else { return }  // one next() at a time
            if !self.subscribers[k].batch.isEmpty {
                // From the iterator's own batch (checked when it was taken): the machine is
                // not involved, and nothing it counts changes.
                self.subscribers[k].batch.removeFirst()
                return
            }
            var droppedFromBatch = 0
            if self.subscribers[k].held.holdsMore {
                // A `.bufferingNewest` batch: checked against the tail, as the iterator does.
                guard let dropped = try self.readHeld(k) else { return }
                droppedFromBatch = dropped
            }
            var lending: [Int]? = []
            var report = ReadReport()
            report.reportsGaps = self.subscribers[k].reportsGaps
            report.missed = self.subscribers[k].carried + droppedFromBatch
            let action = self.machine.nextRequested(
                self.subscribers[k].id, batch: &lending, report: &report, connectsOnDemand: self.config.autoconnect)
            let holdsBatch = report.batchExpiry != 0
            self.subscribers[k].batch = holdsBatch ? [] : lending ?? []
            if holdsBatch {
                var lent = lending ?? []
                self.subscribers[k].held.hold(&lent, expiry: report.batchExpiry)
            }
            if self.subscribers[k].reportsGaps, let gap = self.subscribers[k].takeGap() {
                // A lag-reporting read that finds a gap reports it alone and takes nothing.
                guard case .gap = action else { throw self.fail("read \(action), expected a gap of \(gap)") }
                try self.check(self.subscribers[k].batch.isEmpty, "a gap came with a batch")
                try self.checkReport(report, of: k, missed: gap, evicted: false)
                return
            }
            if !self.subscribers[k].pending.isEmpty {
                let expected = self.subscribers[k].pending.removeFirst()
                let missed = self.subscribers[k].carried + self.subscribers[k].gaps.removeFirst()
                self.subscribers[k].carried = 0
                let take = Swift.min(self.subscribers[k].batchLimit, self.subscribers[k].pending.count)
                let batch = Array(self.subscribers[k].pending.prefix(take))
                if !holdsBatch {
                    self.subscribers[k].pending.removeFirst(take)
                    self.subscribers[k].greeting = Swift.max(0, self.subscribers[k].greeting - 1 - take)
                    self.subscribers[k].gaps.removeFirst(take)
                }
                let element: Int
                var effects = Machine.Effects()
                switch action {
                case .element(let read, let producers):
                    element = read
                    effects.producers = producers
                case .elementReleasingSenders(let read, let released):
                    element = read
                    effects = released
                case .ended, .endedNoticed, .nothingReady, .nothingReadyStartingUpstream, .gap:
                    throw self.fail("read \(action), expected element \(expected)")
                }
                try self.check(element == expected, "read \(element), expected \(expected)")
                let taken = holdsBatch ? self.subscribers[k].held.elements : self.subscribers[k].batch
                try self.check(taken == batch, "batch \(taken), expected \(batch)")
                try self.checkReport(report, of: k, missed: missed, evicted: false)
                let release = self.releasedIfRoom()
                try await self.expect(
                    effects, resuming: [], with: nil, releasing: release.producers, with: true,
                    handingOver: release.handover)
                return
            }
            if self.subscribers[k].evicted {
                // Whatever else happened since (the end, a cancelled connection): it ends as evicted.
                guard let result = self.ended(action) else { throw self.fail("read \(action), expected the eviction") }
                try self.check(result == .success(nil), "an evicted subscriber ended with \(result)")
                try self.checkReport(report, of: k, missed: self.subscribers[k].carried, evicted: true)
                self.subscribers.remove(at: k)
                return
            }
            if self.subscribers[k].ending || self.terminal != nil {
                let expected: Result = self.subscribers[k].ending ? .success(nil) : self.terminal!
                guard let result = self.ended(action) else { throw self.fail("read \(action), expected the end") }
                try self.check(result == expected, "ended with \(result), expected \(expected)")
                let missed = self.subscribers[k].carried + self.subscribers[k].trailing
                try self.checkReport(report, of: k, missed: missed, evicted: false)
                self.subscribers.remove(at: k)
                return
            }
            // Nothing to read: the read reports what was dropped since the last element, and
            // the iterator keeps that count for its next read (or while it waits).
            self.subscribers[k].carried += self.subscribers[k].trailing
            self.subscribers[k].trailing = 0
            try self.checkReport(report, of: k, missed: self.subscribers[k].carried, evicted: false)
            var start: UInt64?
            if self.upstream == .idle
                && (self.config.mode == .automatic || (self.config.mode == .manual && self.config.autoconnect))
            {
                start = self.nextEpoch
                self.upstream = .running(epoch: self.nextEpoch)
                self.nextEpoch += 1
                self.producers = [.free]
                self.replayExpiryPending = false  // restarted within the expiry window: kept
            }
            switch (action, start) {
            case (.nothingReady, nil):
                break
            case (.nothingReadyStartingUpstream(let effects), let start?) where effects.startUpstream == start:
                try await self.expect(effects, resuming: [], with: nil, releasing: [], with: true, starting: start)
                try await self.expectUpstreamStart(effects, epoch: start)
            default:
                throw self.fail("read \(action), expected to suspend starting \(String(describing: start))")
            }
            guard wait else { return }
            let waiting = await self.waitingSubscriber()
            // A subject's storage has no upstream task to raise: its waiters pass 0.
            let priority = self.config.mode == .push ? 0 : priority
            self.machine.recordConnectsOnDemand(self.config.autoconnect, for: self.subscribers[k].id)
            let outcome = self.machine.subscriberWaiting(
                self.subscribers[k].id, continuation: waiting.continuation, priority: priority, report: &report)
            guard case .stored(let raise) = outcome else {
                throw self.fail("a subscriber with nothing to read was not stored: \(outcome)")
            }
            try self.expectRaise(raise, byWaiterAt: priority)
            try self.checkReport(report, of: k, missed: self.subscribers[k].carried, evicted: false)
            self.subscribers[k].waiting = waiting
            self.subscribers[k].waitingPriority = priority

        case .leave(let pick):
            guard !self.subscribers.isEmpty else { return }
            let k = pick % self.subscribers.count
            let leaving = self.subscribers.remove(at: k)
            let effects = self.machine.subscriberLeft(leaving.id, at: self.time)
            let resumed = leaving.waiting.map { [$0] } ?? []
            // An evicted subscriber left the count when it was evicted: its leave is no one's last.
            if !leaving.evicted, self.subscribers.allSatisfy(\.evicted) {
                try await self.lastSubscriberWent(effects, resuming: resumed)
            } else {
                let release = self.releasedIfRoom()
                try await self.expect(
                    effects, resuming: resumed, with: .success(nil),
                    releasing: release.producers, with: true, handingOver: release.handover)
            }

        case .produce:
            if self.config.mode == .push {
                let value = self.nextValue()
                let action = self.machine.produce(value, epoch: 0, respectingBounds: false)
                try await self.expectProduced(action, value, park: false)
                return
            }
            guard let epoch = self.currentEpoch,
                let index = self.producers.firstIndex(where: {
                    if case .free = $0 { return true } else { return false }
                })
            else { return }
            let value = self.nextValue()
            let action = self.machine.produce(value, epoch: epoch)
            try await self.expectProduced(action, value, park: true)
            if !self.hasRoom { self.producers[index] = .mustWait(value: nil) }
            try await self.followUpAfterProducing()

        case .sendWaitingForRoom:
            guard self.config.mode == .push else { return }
            try await self.send(self.nextValue(), index: nil)

        case .cancelSender(let pick):
            guard self.config.mode == .push else { return }
            let parked = self.parkedInOrder
            guard !parked.isEmpty else {
                try self.check(
                    self.machine.senderCancelled(token: self.nextToken).isEmpty, "cancelled nobody, with effects")
                return
            }
            let index = parked[pick % parked.count]
            guard case .parked(let waiting, let value?, let token) = self.producers[index] else {
                throw self.fail("a subject's sender parked without its value")
            }
            let effects = self.machine.senderCancelled(token: token)
            self.producers.remove(at: index)
            // At once, past the bound, ahead of the senders still waiting.
            let handover = Handover(subscribers: self.deliver(value).map { ($0, value) }, sent: 1)
            try await self.expect(
                effects, resuming: [], with: nil, releasing: [waiting], with: true, handingOver: handover)

        case .waitForRoom(let pick, let park):
            let waiting = self.producers.indices.filter {
                if case .mustWait = self.producers[$0] { return true } else { return false }
            }
            guard !waiting.isEmpty else { return }
            let index = waiting[pick % waiting.count]
            guard case .mustWait(let value) = self.producers[index] else { return }
            if let value, !park {
                // A sender offers its value again.
                try await self.send(value, index: index)
                return
            }
            let epoch = self.config.mode == .push ? 0 : (self.currentEpoch ?? self.staleEpochs.last ?? 0)
            // A sender that parks goes in at once if there is room and nobody waits before it;
            // an upstream's producer resumes at the resume level.
            let mayGoOn = value != nil ? self.hasRoom && self.parkedInOrder.isEmpty : self.hasRoomToResume
            let expected: Machine.ProduceOutcome =
                self.terminal != nil || self.currentEpoch == nil ? .stop : mayGoOn ? .proceed : .park
            if !park {
                let status = self.machine.producerStatus(epoch: epoch)
                try self.check(status == expected, "producerStatus \(status), expected \(expected)")
                switch status {
                case .proceed: self.producers[index] = .free
                case .stop: self.producers.remove(at: index)
                case .park: break
                }
                return
            }
            let parked = await self.parkingProducer()
            let token = self.nextToken
            self.nextToken += 1
            let effects =
                if let value {
                    self.machine.senderParked(value, token: token, continuation: parked.continuation)
                } else {
                    self.machine.producerParked(epoch: epoch, token: token, continuation: parked.continuation)
                }
            switch expected {
            case .stop:
                // A sender's value is not taken: the subject has completed.
                self.producers.remove(at: index)
                try await self.expect(effects, resuming: [], with: nil, releasing: [parked], with: false)
            case .proceed:
                if let value {
                    // There is room again and nobody waits before it: its value goes in now.
                    self.producers.remove(at: index)
                    let handover = Handover(subscribers: self.deliver(value).map { ($0, value) }, sent: 1)
                    try await self.expect(
                        effects, resuming: [], with: nil, releasing: [parked], with: true, handingOver: handover)
                } else {
                    self.producers[index] = .free
                    try await self.expect(effects, resuming: [], with: nil, releasing: [parked], with: true)
                }
            case .park:
                self.producers[index] = .parked(parked, value: value, token: token)
                try await self.expect(effects, resuming: [], with: nil, releasing: [], with: true)
            }

        case .connect:
            guard self.config.mode == .manual else { return }
            let (epoch, effects) = self.machine.connectRequested()
            switch self.upstream {
            case .idle:
                try self.check(epoch == self.nextEpoch, "connect() gave \(String(describing: epoch))")
                self.upstream = .running(epoch: self.nextEpoch)
                self.producers = [.free]
                self.nextEpoch += 1
                try await self.expect(effects, resuming: [], with: nil, releasing: [], with: true, starting: epoch)
                try await self.expectUpstreamStart(effects, epoch: epoch!)
            case .running(let current), .lingering(let current):
                try self.check(epoch == current, "connect() while connected gave \(String(describing: epoch))")
                try await self.expect(effects, resuming: [], with: nil, releasing: [], with: true)
            case .terminated:
                try self.check(epoch == nil, "connect() after the end gave \(String(describing: epoch))")
                try await self.expect(effects, resuming: [], with: nil, releasing: [], with: true)
            }

        case .disconnect(let stale):
            guard self.config.mode == .manual else { return }
            if stale {
                guard let old = self.staleEpochs.last else { return }
                try self.check(self.machine.connectionCancelled(epoch: old).isEmpty, "a stale cancel had effects")
                return
            }
            guard let epoch = self.currentEpoch, self.terminal == nil else { return }
            let effects = self.machine.connectionCancelled(epoch: epoch)
            let resumed = self.subscribers.compactMap(\.waiting)
            self.subscribers.removeAll { $0.waiting != nil }
            for k in self.subscribers.indices { self.subscribers[k].ending = true }
            try await self.expect(
                effects, resuming: resumed, with: .success(nil),
                releasing: self.stopUpstream(epoch), with: false, cancelling: epoch)

        case .timerWakes(let pick, let returned):
            try await self.timerWakes(pick: pick, returned: returned)

        case .clockMoves(let seconds):
            self.time = scriptedSaturating(self.time, .seconds(seconds))

        case .finish(let fail):
            guard let epoch = self.currentEpoch, self.terminal == nil else { return }
            let failure: TestError? = fail ? .other(self.step) : nil
            let effects =
                self.config.mode == .push
                ? self.machine.subjectCompleted(failure: failure)
                : self.upstreamIterationEnds(epoch, failure: failure)
            try await self.expectEnd(effects, failure.map { .failed($0) } ?? .finished, cancelling: nil)

        case .hostStops:
            guard self.config.mode == .automatic else { return }
            guard self.terminal == nil else {
                try self.check(self.machine.hostStopped().isEmpty, "a host stopping after the end had effects")
                return
            }
            let running = self.currentEpoch
            try await self.expectEnd(self.machine.hostStopped(), .finished, cancelling: running)

        case .keepAliveExpires:
            guard self.timerRunning,
                let index = self.timerTasks.firstIndex(where: { $0.generation == self.timerGeneration })
            else { return }
            self.timerTasks[index].started = true
            try await self.timerWakes(pick: index, returned: false)

        case .host(let step):
            try await self.apply(host: step)

        case .observe(let step):
            self.apply(observe: step)

        case .produceStale:
            guard let old = self.staleEpochs.last ?? (self.terminal != nil ? self.nextEpoch &- 1 : nil) else { return }
            let action = self.machine.produce(-1, epoch: old)
            guard case .stop = action else { throw self.fail("a stopped epoch's element was taken: \(action)") }
        }
    }

    /// The machine ended with `terminal`, and returned `effects`: the waiting subscribers
    /// receive it, the parked producers stop, the timer is cancelled, and so is the iteration
    /// `cancelled`, if any.
    mutating func expectEnd(
        _ effects: Machine.Effects, _ terminal: Machine.Terminal, cancelling cancelled: UInt64?
    ) async throws(ModelFailure) {
        self.terminal = terminal.result
        self.upstream = .terminated(terminal)
        let resumed = self.subscribers.compactMap(\.waiting)
        self.subscribers.removeAll { $0.waiting != nil }
        let timer = self.cancelTimer()
        // A replay cache whose expiry window was open expires at once (the host stopped).
        if self.replayExpiryPending {
            self.replayExpiryPending = false
            self.replayFloor = self.produced.count
        }
        let parked = self.takeParked()
        self.producers.removeAll()
        try await self.expect(
            effects, resuming: resumed, with: terminal.result, releasing: parked, with: false, cancelling: cancelled,
            timer: timer)
    }

    mutating func nextValue() -> Int {
        defer { self.value += 1 }
        return self.value
    }

    /// Delivers `value` in the model and checks what producing it returned.
    /// No subscriber is left at `self.time`, counting out the evicted ones: the last one left
    /// (`effects` are its leave's, resuming `resumed`), or was evicted (`effects` are those of
    /// the reading that follows the eviction). A running `.automatic` upstream lingers or stops.
    mutating func lastSubscriberWent(
        _ effects: Machine.Effects, resuming resumed: [Suspended<Result>]
    ) async throws(ModelFailure) {
        guard self.config.mode == .automatic, case .running(let epoch) = self.upstream else {
            let release = self.releasedIfRoom()
            try await self.expect(
                effects, resuming: resumed, with: .success(nil),
                releasing: release.producers, with: true, handingOver: release.handover)
            return
        }
        switch self.config.keepAlive {
        case .window:
            self.upstream = .lingering(epoch: epoch)
            let timer = self.openWindow(at: self.time)
            let release = self.releasedIfRoom()
            try await self.expect(
                effects, resuming: resumed, with: .success(nil),
                releasing: release.producers, with: true, handingOver: release.handover, timer: timer)
        case .forever:
            self.upstream = .lingering(epoch: epoch)  // and no timer
            let release = self.releasedIfRoom()
            try await self.expect(
                effects, resuming: resumed, with: .success(nil),
                releasing: release.producers, with: true, handingOver: release.handover)
        case .off:
            let parked = self.stopUpstream(epoch)
            let timer = self.replayCacheStopped(at: self.time)
            try await self.expect(
                effects, resuming: resumed, with: .success(nil),
                releasing: parked, with: false, cancelling: epoch, timer: timer)
        }
    }

    /// After an element: the machine asks for the time exactly when it evicted the last
    /// subscriber of a running `.automatic` upstream (an eviction is a leave); the storage then
    /// reads its clock and passes it in (`clockRead(at:)`), which acts as that leave.
    mutating func followUpAfterProducing() async throws(ModelFailure) {
        var lastEvicted = false
        if self.config.mode == .automatic, case .running = self.upstream, !self.subscribers.isEmpty,
            self.subscribers.allSatisfy(\.evicted)
        {
            lastEvicted = true
        }
        let asks = self.machine.followUp.contains(.reading)
        try self.check(asks == lastEvicted, "the machine asks for the time: \(asks), expected \(lastEvicted)")
        guard asks else { return }
        try await self.lastSubscriberWent(
            self.machine.clockRead(at: self.time, through: self.machine.tail), resuming: [])
    }

    mutating func expectProduced(_ action: Machine.ProduceAction, _ value: Int, park: Bool) async throws(ModelFailure) {
        guard self.terminal == nil else {
            guard case .stop = action else { throw self.fail("produced after the end: \(action)") }
            return
        }
        let resumed = self.deliver(value)
        let effects: Machine.Effects
        switch action {
        case .proceed(let e):
            try self.check(!park || self.hasRoom, "proceed, but a bounded subscriber is full")
            effects = e
        case .park(let e):
            try self.check(park && !self.hasRoom, "park, but every subscriber has room (or it cannot wait)")
            effects = e
        case .stop:
            throw self.fail("the current producer was stopped")
        }
        try await self.expect(effects, resuming: resumed, with: .success(value), releasing: [], with: true)
    }

    /// Appends `value` for every subscriber of the model; returns the waiting ones it resumes.
    mutating func deliver(_ value: Int) -> [Suspended<Result>] {
        self.produced.append(value)
        var resumed: [Suspended<Result>] = []
        for k in self.subscribers.indices where !self.subscribers[k].ending {
            if let waiting = self.subscribers[k].waiting {
                resumed.append(waiting)
                self.subscribers[k].waiting = nil
                self.subscribers[k].carried = 0  // reported with this element
            } else {
                self.subscribers[k].receive(value)
            }
        }
        return resumed
    }

    /// A subject's `send(waitingForRoom:)` of `value` (a retry when `index` is a sender).
    mutating func send(_ value: Int, index: Int?) async throws(ModelFailure) {
        let action = self.machine.produceIfRoom(value, epoch: 0)
        if self.terminal != nil {
            guard case .stop? = action else { throw self.fail("send after the end: \(String(describing: action))") }
            if let index { self.producers.remove(at: index) }
            return
        }
        guard self.hasRoom && self.parkedInOrder.isEmpty else {
            try self.check(action == nil, "sent past a full bound, or before the senders waiting")
            if let index {
                self.producers[index] = .mustWait(value: value)
            } else {
                self.producers.append(.mustWait(value: value))
            }
            return
        }
        guard let action else { throw self.fail("send waits, but every subscriber has room") }
        if let index { self.producers.remove(at: index) }
        try await self.expectProduced(action, value, park: false)
    }

    // MARK: Comparing

    /// Checks what a read of subscriber `k` reported: `missed` elements dropped just before
    /// what it returned, and whether its end is an eviction (then, with the model's eviction).
    func checkReport(_ report: ReadReport, of k: Int, missed: Int, evicted: Bool) throws(ModelFailure) {
        let sub = self.subscribers[k]
        let expected = evicted ? sub.eviction : nil
        try self.check(
            report.eviction == expected,
            "subscriber #\(k) (\(sub.policy)): report.eviction \(report.eviction.map { "\($0)" } ?? "nil"), expected \(expected.map { "\($0)" } ?? "nil")"
        )
        try self.check(
            report.missed == missed,
            "subscriber #\(k) (\(sub.policy)): reported \(report.missed) missed, expected \(missed)")
    }

    func compare() throws(ModelFailure) {
        if let violation = self.machine.invariantViolation() { throw self.fail("invariant: \(violation)") }
        // An evicted subscriber stops counting when it is evicted.
        let present = self.subscribers.filter { !$0.evicted }.count
        try self.check(
            self.machine.subscriberCount == present,
            "subscriberCount \(self.machine.subscriberCount), expected \(present)")
        for (k, sub) in self.subscribers.enumerated() {
            // What a `.bufferingNewest` iterator took ahead and its policy has not dropped is
            // still the subscriber's to receive.
            let undelivered =
                Array(sub.held.live(tail: self.machine.heldBatchTail(of: sub.id))) + self.machine.undelivered(sub.id)
            try self.check(
                undelivered == sub.pending,
                "subscriber #\(k) (\(sub.policy)) may still receive \(undelivered), expected \(sub.pending)")
        }
        try self.check(
            self.machine.hasRoom == self.hasRoom, "hasRoom \(self.machine.hasRoom), expected \(self.hasRoom)")
        try self.check(
            self.machine.hasRoomToResume == self.hasRoomToResume,
            "hasRoomToResume \(self.machine.hasRoomToResume), expected \(self.hasRoomToResume)")
        let parked = self.producers.filter { if case .parked = $0 { return true } else { return false } }.count
        try self.check(
            self.machine.parkedProducers.count == parked,
            "\(self.machine.parkedProducers.count) parked producers, expected \(parked)")
        try self.check(parked == 0 || !self.parkedMayGoOn, "a producer waits while it may go on")
        let parkedValues = self.parkedInOrder.map { index -> Int? in
            guard case .parked(_, let value, _) = self.producers[index] else { return nil }
            return value
        }
        try self.check(
            self.machine.parkedProducers.map(\.element) == parkedValues,
            "parked with \(self.machine.parkedProducers.map(\.element)), expected \(parkedValues) in that order")
        try self.check(
            self.machine.upstream == self.upstream, "upstream \(self.machine.upstream), expected \(self.upstream)")
        try self.check(
            self.machine.waiters.count == self.subscribers.filter { $0.waiting != nil }.count,
            "waiting subscribers differ")
        try self.compareTimer()
        try self.compareHost()
        try self.comparePriority()
    }

    /// Runs `steps` on a fresh machine; the first disagreement, if any. `alsoCheck` adds a
    /// check of its own after every step.
    static func run(
        _ steps: [ModelStep], config: ModelConfig, alsoCheck: (ModelRun) throws(ModelFailure) -> Void = { _ in }
    ) async -> ModelFailure? {
        var run = ModelRun(config: config)
        for (index, step) in steps.enumerated() {
            // A step rarely suspends: every few steps, let the tests beside this one run, so
            // that a run never holds a thread of the cooperative pool for long.
            if index % 10 == 0 { await Task.yield() }
            run.step = index
            do {
                try await run.apply(step)
                try run.compare()
                try run.checkNotices()
                try alsoCheck(run)
            } catch {
                run.tearDown()
                return error
            }
        }
        run.tearDown()
        return nil
    }

    /// Ends the run so that no task is left suspended: ending the machine resumes its
    /// waiting subscribers and parked producers.
    mutating func tearDown() {
        if case .waiting(let run) = self.host { run.continuation.resume(returning: nil) }
        self.host = .notHosted
        let effects: Machine.Effects
        if self.config.mode == .push {
            effects = self.machine.subjectCompleted(failure: nil)
        } else if let epoch = self.currentEpoch {
            effects = self.machine.upstreamEnded(epoch: epoch, failure: nil)
        } else {
            effects = Machine.Effects()
        }
        for continuation in effects.subscribers { continuation.resume(returning: effects.subscriberResult) }
        for continuation in effects.producers { continuation.resume(returning: false) }
        // The machine hands back nothing when it could not end (an idle multicast): then the
        // model's continuations are still suspended, and resuming them here is the only
        // resumption. (After a mismatch some may be left suspended: that run has failed.)
        if effects.subscribers.isEmpty {
            for sub in self.subscribers { sub.waiting?.continuation.resume(returning: .success(nil)) }
        }
        if effects.producers.isEmpty {
            for producer in self.takeParked() { producer.continuation.resume(returning: false) }
        }
        self.subscribers.removeAll()
        self.producers.removeAll()
    }
}

// MARK: - Shrinking

/// The shortest sequence found that still fails: deletes runs of steps, halving their length.
/// `run` replays a sequence (`ModelRun.run`, or a suite's own with more checks).
func shortestFailing(
    _ steps: [ModelStep], config: ModelConfig, failure: ModelFailure,
    run: ([ModelStep], ModelConfig) async -> ModelFailure? = { await ModelRun.run($0, config: $1) }
) async -> ([ModelStep], ModelFailure) {
    var best = Array(steps.prefix(failure.step + 1))
    var bestFailure = failure
    var chunk = Swift.max(1, best.count / 2)
    while true {
        var index = 0
        while index < best.count {
            var candidate = best
            candidate.removeSubrange(index..<Swift.min(index + chunk, best.count))
            if let failure = await run(candidate, config) {
                best = Array(candidate.prefix(failure.step + 1))
                bestFailure = failure
            } else {
                index += chunk
            }
        }
        if chunk == 1 { break }
        chunk /= 2
    }
    return (best, bestFailure)
}

// MARK: - The test

// The heaviest CPU load of the suite (seconds per shard, far more under a sanitizer): its
// shards run one at a time, beside the other tests rather than crowding them out.
extension HeavyAndTimingSensitive {
    @Suite("State machine: random steps against a reference model")
    struct StateMachineModelTests {
        /// Seeds per test case; `MODEL_TEST_SEEDS` (total) overrides the default.
        static let shards = 8
        static var seedsPerShard: Int {
            if let text = ProcessInfo.processInfo.environment["MODEL_TEST_SEEDS"], let total = Int(text) {
                return Swift.max(1, total / shards)
            }
            return 250
        }

        @Test("random steps agree with per-subscriber queues", arguments: 0..<shards)
        func agreesWithTheModel(shard: Int) async {
            let count = Self.seedsPerShard
            for n in 0..<count {
                let seed = UInt64(shard * count + n)
                let config = ModelConfig(seed: seed)
                let steps = config.steps(seed: seed, count: 300)
                guard let failure = await ModelRun.run(steps, config: config) else { continue }
                let (shortest, shortestFailure) = await shortestFailing(steps, config: config, failure: failure)
                Issue.record(
                    """
                    seed \(seed), \(config): \(shortestFailure)
                    shortest failing sequence (\(shortest.count) steps):
                    \(shortest.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
                    """)
                return
            }
        }
    }
}
