// The public entry points used by `compare` and the package-benchmark suite.

public enum Scenarios {
    // MARK: 1. Fan-out throughput

    /// One upstream of `elements` Ints, `subscribers` subscribers each in its own task.
    /// `.base` ignores `policy` and runs one consumer on the upstream directly;
    /// `.openCombine` ignores it too (synchronous delivery loses nothing): `0..<elements`
    /// sent into a `PassthroughSubject` with `subscribers` sinks.
    public static func fanOut(
        _ implementation: Implementation,
        policy: BenchPolicy,
        subscribers: Int,
        elements: Int
    ) async -> FanOutTally {
        switch implementation {
        case .ours: await Ours.fanOut(policy: policy, subscribers: subscribers, elements: elements)
        case .saa: await SAA.fanOut(policy: policy, subscribers: subscribers, elements: elements)
        case .handRolled: await fanOutHandRolled(policy: policy, subscribers: subscribers, elements: elements)
        case .base: await fanOutBase(elements: elements)
        case .openCombine: OpenCombineSide.fanOut(subscribers: subscribers, elements: elements)
        }
    }

    /// The sharing overhead at N = 1 over an upstream whose `next()` is an out-of-line call
    /// (`OpaqueCountingSequence`): `.ours` shares it with one subscriber, `.base` iterates it
    /// directly. Nil for the other implementations.
    public static func opaqueOverhead(
        _ implementation: Implementation, policy: BenchPolicy, elements: Int
    ) async -> FanOutTally? {
        switch implementation {
        case .ours: await Ours.fanOutOverOpaque(policy: policy, elements: elements)
        case .base: await fanOutBase(elements: elements, opaque: true)
        case .saa, .handRolled, .openCombine: nil
        }
    }

    // MARK: 2. Subject fan-out

    /// `send` from one task to N subscribers; nil for `.base`.
    /// AsyncMulticast: `AsyncPassthroughSubject(buffering: .unbounded)`.
    /// SAA (no subject type): an AsyncStream continuation shared with `share(bufferingPolicy: .unbounded)`.
    /// Hand-rolled: the broadcaster's `send`. OpenCombine: `PassthroughSubject` with N sinks.
    public static func subject(_ implementation: Implementation, subscribers: Int, elements: Int) async -> FanOutTally?
    {
        switch implementation {
        case .ours: await Ours.subject(subscribers: subscribers, elements: elements)
        case .saa: await SAA.subject(subscribers: subscribers, elements: elements)
        case .handRolled: await subjectFanOutHandRolled(subscribers: subscribers, elements: elements)
        case .base: nil
        case .openCombine: OpenCombineSide.fanOut(subscribers: subscribers, elements: elements)
        }
    }

    // MARK: 3. Join/leave churn

    /// Upper bound on what the hand-rolled (no back-pressure) upstream may run ahead.
    public static let handRolledChurnUpstreamLimit = 50_000_000

    public static func churn(
        _ implementation: Implementation,
        joins: Int,
        take: Int = 3,
        concurrency: Int = 4
    ) async -> ChurnResult? {
        switch implementation {
        case .ours: await Ours.churn(joins: joins, take: take, concurrency: concurrency)
        case .saa: await SAA.churn(joins: joins, take: take, concurrency: concurrency)
        case .handRolled:
            await churnHandRolled(
                flag: StopFlag(),
                joins: joins,
                take: take,
                concurrency: concurrency,
                upstreamLimit: handRolledChurnUpstreamLimit
            )
        case .base, .openCombine: nil
        }
    }

    // MARK: 4. Idle subscriber memory

    /// SAA's iterator release scans every registered side (O(N) each), so
    /// releasing 100,000 idle SAA iterators takes minutes: callers cap SAA here.
    public static let saaIdleSubscribersCap = 10_000

    /// `subscribers` iterators created and kept alive (not iterated); `whileAlive`
    /// runs before they are released (the benchmark suite stops measuring there).
    public static func idle(
        _ implementation: Implementation,
        subscribers: Int,
        whileAlive: () -> Void = {}
    ) -> IdleMemoryResult? {
        switch implementation {
        case .ours: Ours.idle(count: subscribers, whileAlive: whileAlive)
        case .saa: SAA.idle(count: subscribers, whileAlive: whileAlive)
        case .handRolled: idleSubscribersHandRolled(count: subscribers, whileAlive: whileAlive)
        case .base, .openCombine: nil
        }
    }

    // MARK: Join and leave, counted (compare --instructions)

    /// The join-and-leave cells of `compare --instructions`: delivery-cell `idle COUNT` and
    /// `churn COUNT`, counted per subscriber, so that the instruction gate holds joining and
    /// leaving as it holds delivering.
    public enum JoinLeaveCell: String, Sendable, CaseIterable {
        /// COUNT subscribers of one `share(buffering: .bounded(64))` join and leave without
        /// reading: the memory scenario's idle subscribers.
        case idle
        /// COUNT short subscribers join, take 3 elements and leave, 4 at a time, while a
        /// long-lived one reads everything: the churn scenario.
        case churn
        /// COUNT subscribers, one after another, resume into a 10,000-element history (an
        /// `AsyncReplaySubject(replay: 10_000)`, full): each `subscribe(after:)` a position in
        /// its second half, reads the element after it and leaves.
        case resume

        /// Its line in the thresholds file.
        public var key: String { "join-leave \(self.rawValue)" }

        /// Runs the cell with `count` subscribers; the failures it saw (none: it went right).
        public func run(count: Int) async -> [String] {
            switch self {
            case .idle:
                guard let result = Scenarios.idle(.ours, subscribers: count) else { return ["no idle result"] }
                return result.subscribers == count ? [] : ["\(result.subscribers) of \(count) subscribers joined"]
            case .churn:
                guard let result = await Scenarios.churn(.ours, joins: count) else { return ["no churn result"] }
                return result.failures
            case .resume:
                return await Ours.resumptions(count, history: 10_000)
            }
        }
    }

    // MARK: 5. Cancellation latency

    /// `terminationTimeout`: how long to wait, per sample, for the upstream to end.
    /// `.openCombine` has no subscriber waiting in `next()`: its result is one failure.
    public static func cancellation(
        _ implementation: Implementation,
        samples: Int,
        terminationTimeout: Duration = .milliseconds(20)
    ) async -> CancellationResult {
        switch implementation {
        case .ours:
            await Ours.cancellation(samples: samples, terminationTimeout: terminationTimeout)
        case .saa:
            await SAA.cancellation(samples: samples, terminationTimeout: terminationTimeout)
        case .handRolled:
            await cancellationLatency(
                samples: samples,
                terminationTimeout: terminationTimeout,
                start: cancellationSubjectHandRolled
            )
        case .base:
            await cancellationLatency(
                samples: samples,
                terminationTimeout: terminationTimeout,
                start: cancellationSubjectBase
            )
        case .openCombine:
            {
                var result = CancellationResult()
                result.failures.append("OpenCombine has no async subscriber to cancel")
                return result
            }()
        }
    }

    // MARK: 6. Cost per delivery

    /// One cell of the cost-per-delivery comparison, run by `compare --only cost`
    /// and, one per process under valgrind, by `delivery-cell` (`compare --instructions`).
    public enum DeliveryCell: String, Sendable, CaseIterable, CustomStringConvertible {
        /// `OpaqueCountingSequence(M).share(buffering: .bounded(64))`: `0..<M` whose `next()` is
        /// an out-of-line call (as another module's sequence is), N subscribers each in its own
        /// task, all registered before the upstream starts.
        case share
        /// The `share` cell with the sole subscriber's catch-up spin off (`CatchUpSpinSwitch`,
        /// an SPI of the library for benchmarks): a subscriber that caught up suspends without
        /// waiting for the producer's next elements. Counted by `compare --instructions` only,
        /// at N = 1 only (the spin applies to a sole subscriber): the instruction gate's N = 1
        /// figure, since the spin's share of `share`'s count moves with the machine's load.
        case shareNoSpin = "share-nospin"
        /// `OpaqueCountingSequence(M).share(buffering: .unbounded)`: the `share` cell under the
        /// keep-all policy (no back-pressure: the upstream runs ahead, every subscriber's backlog
        /// grows until it reads). Counted by `compare --instructions` only, so that the instruction
        /// gate covers the keep-all path of `share()`; the cost scenario (CPU) does not run it.
        case shareUnbounded = "share-unbounded"
        /// `AsyncPassthroughSubject<Int, Never>()` (its default policy, `.unbounded`): one task
        /// sends `0..<M` and finishes, N subscribers each in its own task, registered first.
        case subject
        /// OpenCombine `PassthroughSubject<Int, Never>` with N `sink`s; `0..<M` sent
        /// synchronously by the caller, then `.finished`.
        case openCombine = "opencombine"
        /// The floor under `share` at N = 1: one task iterating `OpaqueCountingSequence(M)`
        /// directly, no sharing (N must be 1).
        case base
        /// The cells measured against tokio's broadcast (BroadcastCells.swift), counted by
        /// `compare --instructions` only. `share(buffering: .bounded(1024))`: the `share` cell
        /// at tokio's capacity.
        case share1024 = "share-1024"
        /// tokio's "contention" benchmark without its work: M lockstep sends to N subscribers
        /// of a subject of capacity 1000, each delivery one wake-up.
        case lockstep
        /// The lockstep cell without a library: N tasks resumed from one `UnsafeContinuation`
        /// each per element. The runtime's floor under every wake-up.
        case resumeFloor = "resume-floor"
        /// M sends to a `.bufferingNewest(64)` subject whose N subscribers do not read: counted
        /// per element sent, not per delivery (`countsPerElementSent`).
        case lossySend = "lossy-send"
        /// M elements sent in rounds of 512 to N subscribers of a `.bufferingNewest(1024)`
        /// subject, each round once all have received the one before: nothing is dropped, and
        /// each delivery is a lossy lane's read (`BroadcastCells.chunkedRead`).
        case lossyRead = "lossy-read"
        /// `lossy-read` under `.bounded(1024)`: the lossless reads it is measured against.
        case losslessRead = "lossless-read"
        /// The `subject` cell with positions on: each subscriber reads the subject through
        /// `subscribe(after: nil)`, whose events carry each element's position (a resumable
        /// client's delivery). Counted by `compare --instructions` only.
        case subjectPositioned = "subject-positioned"

        public var description: String {
            switch self {
            case .share: "share() .bounded(64)"
            case .shareNoSpin: "share() .bounded(64), catch-up spin off"
            case .shareUnbounded: "share() .unbounded"
            case .subject: "AsyncPassthroughSubject"
            case .openCombine: "OpenCombine subject"
            case .base: "base (opaque upstream, no sharing)"
            case .share1024: "share() .bounded(1024)"
            case .lockstep: "lockstep sends (tokio's contention)"
            case .resumeFloor: "resume floor (no library)"
            case .lossySend: "lossy send, N stalled subscribers"
            case .lossyRead: "lossy reads, .bufferingNewest(1024), rounds of 512"
            case .losslessRead: "lossless reads, .bounded(1024), rounds of 512"
            case .subjectPositioned: "AsyncPassthroughSubject, subscribe(after: nil)"
            }
        }

        /// Whether only `compare --instructions` runs it (not the cost scenario's CPU table).
        public var isCountedOnly: Bool {
            switch self {
            case .shareNoSpin, .shareUnbounded, .share1024, .lockstep, .resumeFloor, .lossySend, .lossyRead,
                .losslessRead, .subjectPositioned:
                true
            case .share, .subject, .openCombine, .base: false
            }
        }

        /// Whether its instructions are counted per element sent (M) rather than per delivery
        /// (M·N): a send that does no per-subscriber work costs the same at every N.
        public var countsPerElementSent: Bool { self == .lossySend }

        /// Whether it is counted at N = 1 only: `base` has one consumer, and `share-nospin`
        /// differs from `share` only where the catch-up spin applies, with a sole subscriber.
        public var isSoleSubscriberOnly: Bool { self == .base || self == .shareNoSpin }

        /// Whether it runs with `subscribers` subscribers (`isSoleSubscriberOnly`).
        public func runs(subscribers: Int) -> Bool { !self.isSoleSubscriberOnly || subscribers == 1 }

        /// Whether the instruction gate holds its count at `subscribers`: not the floor
        /// (`base`, no library), and not `share` at N = 1, whose count includes the catch-up
        /// spin's, which runs for a time, not a number of instructions, and so moves with how
        /// valgrind interleaves the threads and with the machine's load: the gate holds
        /// `share-nospin` there, and the spin's benefit is measured apart (Benchmarks README).
        public func isHeldByGate(subscribers: Int) -> Bool {
            self != .base && !(self == .share && subscribers == 1)
        }

        /// The implementation `--impls` selects it with.
        public var implementation: Implementation {
            switch self {
            case .share, .shareNoSpin, .shareUnbounded, .subject, .share1024, .lockstep, .lossySend, .lossyRead,
                .losslessRead,
                .subjectPositioned:
                .ours
            case .openCombine: .openCombine
            case .base, .resumeFloor: .base
            }
        }
    }

    /// Runs one cell; every subscriber must have received exactly `0..<elements` in order.
    /// Every cell but `share-nospin` runs with the catch-up spin on, as the library ships.
    public static func deliveryCell(_ cell: DeliveryCell, subscribers: Int, elements: Int) async -> FanOutTally {
        Ours.setCatchUpSpin(on: cell != .shareNoSpin)
        return switch cell {
        case .share, .shareNoSpin:
            await Ours.fanOutOverOpaque(policy: .bounded64, subscribers: subscribers, elements: elements)
        case .shareUnbounded:
            await Ours.fanOutOverOpaque(policy: .unbounded, subscribers: subscribers, elements: elements)
        case .subject: await Ours.subject(subscribers: subscribers, elements: elements, defaultPolicy: true)
        case .openCombine: OpenCombineSide.fanOut(subscribers: subscribers, elements: elements)
        case .share1024: await BroadcastCells.share1024(subscribers: subscribers, elements: elements)
        case .lockstep: await BroadcastCells.lockstep(subscribers: subscribers, rounds: elements)
        case .resumeFloor: await BroadcastCells.resumeFloor(subscribers: subscribers, rounds: elements)
        case .lossySend: await BroadcastCells.lossySend(subscribers: subscribers, elements: elements)
        case .lossyRead: await BroadcastCells.chunkedRead(lossy: true, subscribers: subscribers, elements: elements)
        case .losslessRead: await BroadcastCells.chunkedRead(lossy: false, subscribers: subscribers, elements: elements)
        case .subjectPositioned: await Ours.positionedSubject(subscribers: subscribers, elements: elements)
        case .base:
            subscribers == 1
                ? await fanOutBase(elements: elements, opaque: true)
                : {
                    var tally = FanOutTally()
                    tally.failures.append("the base cell has one consumer (N = 1), not \(subscribers)")
                    return tally
                }()
        }
    }
}
