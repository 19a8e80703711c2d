// compare: runs each scenario for AsyncMulticast, swift-async-algorithms and a
// hand-rolled broadcaster side by side in one process and prints ratios.
// Absolute numbers on a shared machine drift; ratios measured in one run are
// what to read.
//
//     swift run -c release compare            # full run (a few minutes)
//     swift run -c release compare --smoke    # seconds; what CI runs
//     swift run -c release compare --help

import ArgumentParser
import MulticastScenarios

// MARK: - Options

/// The command line, parsed by swift-argument-parser (`compare --help` prints it).
struct CompareArguments: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Runs each scenario for AsyncMulticast and the alternatives side by side and prints ratios.",
        discussion: """
            Ratios read "AsyncMulticast vs X": above 1.00 means AsyncMulticast is better (more \
            deliveries or joins per second, fewer bytes, lower latency). Exits 1 if any \
            implementation delivered a wrong sequence.
            """
    )

    @Flag(
        help: """
            --smoke: tiny sizes, one repetition: checks every scenario runs (seconds). \
            --quick: N = 1, 16, 256, fewer elements, one repetition (well under a minute). \
            --full: N = 1, 4, 16, 64, 256, 1024, three repetitions (about 3 minutes on 2 cores, the cost scenario included).
            """)
    var mode: Options.Mode = .full

    @Option(
        name: .customLong("only"),
        help: "Comma-separated subset of scenarios: \(Options.allScenarios.joined(separator: ",")).",
        transform: CompareArguments.scenarios)
    var scenarios: Set<String> = Set(Options.allScenarios)

    @Option(
        name: .customLong("impls"),
        help: """
            Comma-separated subset of implementations: ours, saa, hand, base, opencombine (alias: combine) \
            (default: all). OpenCombine runs in the cost scenarios only.
            """,
        transform: CompareArguments.implementations)
    var implementations: Set<Implementation> = Set(Implementation.allCases)

    @Flag(
        help: """
            Instead of the scenarios: instructions per delivery, counted by valgrind's callgrind \
            in the delivery-cell executable (build it first: swift build -c release --product \
            delivery-cell). --smoke and --quick use fewer cells and elements.
            """)
    var instructions = false

    @Option(help: "With --instructions: the valgrind executable (default: valgrind on PATH).")
    var valgrind: String?

    @Option(
        name: .customLong("delivery-cell"),
        help: "With --instructions: the delivery-cell executable (default: next to compare).")
    var deliveryCell: String?

    @Option(
        help: """
            With --instructions: keep callgrind's output files in this folder (one per run, \
            for callgrind_annotate) instead of deleting them.
            """)
    var profiles: String?

    @Option(
        name: .customLong("check-thresholds"),
        help: """
            With --instructions: fail (exit 1) if a median is above its threshold in this file by \
            more than the file's tolerance (Thresholds/instructions.txt; CI's instruction gate).
            """)
    var checkThresholds: String?

    @Option(
        name: .customLong("write-thresholds"),
        help: """
            With --instructions: write the measured medians into this file as the new thresholds \
            (for a change meant to move them; say why in the commit).
            """)
    var writeThresholds: String?

    static func scenarios(_ list: String) throws -> Set<String> {
        let names = Set(list.split(separator: ",").map { $0.trimmingCharacters() })
        let unknown = names.subtracting(Options.allScenarios)
        guard unknown.isEmpty else {
            throw ValidationError("unknown scenario(s): \(unknown.sorted().joined(separator: ", "))")
        }
        return names
    }

    static func implementations(_ list: String) throws -> Set<Implementation> {
        var selected: Set<Implementation> = []
        for name in list.split(separator: ",").map({ $0.trimmingCharacters() }) {
            switch name {
            case "ours": selected.insert(.ours)
            case "saa": selected.insert(.saa)
            case "hand", "handRolled", "hand-rolled": selected.insert(.handRolled)
            case "base": selected.insert(.base)
            case "opencombine", "openCombine", "combine": selected.insert(.openCombine)
            default: throw ValidationError("unknown implementation '\(name)'")
            }
        }
        return selected
    }
}

struct Options {
    enum Mode: String, EnumerableFlag { case smoke, quick, full }

    static let allScenarios = ["fanout", "subject", "churn", "memory", "cancel", "cost"] + latencyScenarios

    var mode = Mode.full
    var scenarios: Set<String> = Set(Options.allScenarios)
    var implementations: Set<Implementation> = Set(Implementation.allCases)
    var instructions = false
    var valgrind: String?
    var deliveryCell: String?
    var profiles: String?
    var checkThresholds: String?
    var writeThresholds: String?

    init(_ arguments: CompareArguments) {
        self.mode = arguments.mode
        self.scenarios = arguments.scenarios
        self.implementations = arguments.implementations
        self.instructions = arguments.instructions
        self.valgrind = arguments.valgrind
        self.deliveryCell = arguments.deliveryCell
        self.profiles = arguments.profiles
        self.checkThresholds = arguments.checkThresholds
        self.writeThresholds = arguments.writeThresholds
    }

    // Sizes per mode.
    var subscriberCounts: [Int] {
        switch mode {
        case .smoke: [1, 16]
        case .quick: [1, 16, 256]
        case .full: [1, 4, 16, 64, 256, 1024]
        }
    }

    /// Deliveries (M·N) per fan-out cell for AsyncMulticast, hand-rolled and base.
    var deliveriesPerCell: Int {
        switch mode {
        case .smoke: 20_000
        case .quick: 250_000
        case .full: 500_000
        }
    }

    var minElements: Int { mode == .smoke ? 500 : 1_000 }
    var maxElements: Int { mode == .smoke ? 5_000 : 1_000_000 }

    /// swift-async-algorithms' share() costs O(N) per delivery, so its M·N is capped.
    var saaDeliveriesCap: Int {
        switch mode {
        case .smoke: 5_000
        case .quick: 50_000
        case .full: 100_000
        }
    }

    var saaMinElements: Int { 64 }

    /// Elements for the base floor (one consumer, no sharing).
    var baseElements: Int { mode == .smoke ? 100_000 : 2_000_000 }

    /// `candidates` in order, keeping those selected with --impls.
    func selected(_ candidates: [Implementation]) -> [Implementation] {
        candidates.filter { implementations.contains($0) }
    }

    var repetitions: Int { mode == .full ? 3 : 1 }
    var churnJoins: Int { mode == .smoke ? 200 : mode == .quick ? 2_000 : 10_000 }
    var idleSubscribers: Int { mode == .smoke ? 2_000 : 100_000 }
    var cancellationSamples: Int { mode == .smoke ? 10 : mode == .quick ? 100 : 300 }

    // Cost per delivery (scenario 6).
    var costSubscriberCounts: [Int] {
        switch mode {
        case .smoke: [1, 16]
        case .quick: [1, 64, 1024]
        case .full: [1, 4, 16, 64, 256, 1024]
        }
    }

    /// Deliveries (M·N) per cost cell; M is at least `minElements`.
    var costDeliveriesPerCell: Int {
        switch mode {
        case .smoke: 20_000
        case .quick: 1_000_000
        case .full: 2_000_000
        }
    }

    var costRepetitions: Int {
        switch mode {
        case .smoke: 1
        case .quick: 3
        case .full: 7
        }
    }

    func costElements(forSubscribers n: Int) -> Int { max(minElements, costDeliveriesPerCell / n) }

    func elements(forSubscribers n: Int) -> Int {
        min(maxElements, max(minElements, deliveriesPerCell / n))
    }

    func saaElements(forSubscribers n: Int, regular: Int) -> Int {
        min(regular, max(saaMinElements, saaDeliveriesCap / n))
    }
}

extension Substring {
    func trimmingCharacters() -> String {
        String(self.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Formatting

func fmt(_ value: Double?, _ decimals: Int = 2) -> String {
    guard let value, value.isFinite else { return "n/a" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if let dot = text.firstIndex(of: ".") {
        let have = text.distance(from: dot, to: text.endIndex) - 1
        if have < decimals { text += String(repeating: "0", count: decimals - have) }
        if decimals == 0 { text = String(text[..<dot]) }
    } else if decimals > 0 {
        text += "." + String(repeating: "0", count: decimals)
    }
    return text
}

func ratio(_ numerator: Double?, _ denominator: Double?) -> String {
    guard let numerator, let denominator, denominator > 0, numerator.isFinite else { return "n/a" }
    let value = numerator / denominator
    let decimals = value >= 100 ? 0 : value >= 10 ? 1 : value >= 0.1 ? 2 : 4
    return fmt(value, decimals) + "x"
}

/// A plain text table with right-aligned columns (first column left-aligned).
struct Table {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: [String]) { self.header = header }

    mutating func add(_ row: [String]) { rows.append(row) }

    func render() -> String {
        let all = [header] + rows
        let widths = (0..<header.count).map { column in
            all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                let pad = String(repeating: " ", count: widths[index] - cell.count)
                return index == 0 ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}

var failures: [String] = []

@MainActor
func record(_ what: String, _ problems: [String]) {
    for problem in problems { failures.append("\(what): \(problem)") }
}

func stamp(_ text: String) {
    print(text)
    fflush(nil)  // flush stdout when piped (CI logs)
}

// MARK: - Scenario 1: fan-out

/// One fan-out run: offered rate M·N / wall time, and the share of M·N actually delivered.
struct FanOutRun {
    var rate: Double
    var delivered: Double
    var seconds: Double
}

@MainActor
func fanOutOnce(
    _ implementation: Implementation,
    policy: BenchPolicy,
    subscribers: Int,
    elements: Int
) async -> FanOutRun {
    let (tally, seconds) = await measureSeconds {
        await Scenarios.fanOut(implementation, policy: policy, subscribers: subscribers, elements: elements)
    }
    record("fan-out \(implementation) \(policy) N=\(subscribers) M=\(elements)", tally.failures)
    if tally.subscribers != subscribers {
        record("fan-out \(implementation) \(policy) N=\(subscribers)", ["\(tally.subscribers) subscribers finished"])
    }
    let offered = Double(elements) * Double(subscribers)
    return FanOutRun(rate: offered / seconds, delivered: Double(tally.deliveries) / offered, seconds: seconds)
}

@MainActor
func runFanOut(_ options: Options) async {
    stamp(
        """

        == 1. Fan-out throughput ==
        One upstream of M Ints (an AsyncSequence over 0..<M), N subscribers each in its own task,
        all registered before the upstream starts. Rate = M·N / wall time in millions of deliveries
        per second (Mdel/s), setup included, median of \(options.repetitions) (1 if the first run took over
        1 s). Lossless policies check that every subscriber saw 0..<M in order.
        SAA (swift-async-algorithms) costs O(N) per delivery, so its M·N is capped at
        \(options.saaDeliveriesCap) per cell: rows marked * ran SAA with the smaller M in "SAA M".
        The hand-rolled broadcaster (AsyncStream per subscriber) has no back-pressure: its
        .bounded(64) row uses .unbounded streams.
        """)

    // Warm-up: first-use costs (metadata, thread pool) out of the measured runs.
    for implementation in options.selected([.ours, .saa, .handRolled, .base]) {
        _ = await Scenarios.fanOut(implementation, policy: .bounded64, subscribers: 4, elements: 256)
    }

    // The floor: one consumer iterating the upstream directly (per-delivery rate).
    var base: Double?
    if options.implementations.contains(.base) {
        var rates: [Double] = []
        for _ in 0..<5 {
            rates.append(
                await fanOutOnce(.base, policy: .unbounded, subscribers: 1, elements: options.baseElements).rate)
        }
        base = median(rates)
        stamp(
            "base (floor): iterating the upstream directly, N = 1, M = \(options.baseElements): \(fmt(base.map { $0 / 1e6 })) Mdel/s"
        )
    }

    var table = Table([
        "policy", "N", "M", "ours Mdel/s", "SAA Mdel/s", "SAA M", "hand Mdel/s",
        "vs SAA", "vs hand", "vs base",
    ])
    var lossy = Table(["N", "ours got %", "SAA got %", "hand got %"])
    for policy in BenchPolicy.allCases {
        for subscribers in options.subscriberCounts {
            let elements = options.elements(forSubscribers: subscribers)
            let saaElements = options.saaElements(forSubscribers: subscribers, regular: elements)
            var runs: [Implementation: [FanOutRun]] = [:]
            for repetition in 0..<options.repetitions {
                // Rotate the order so no implementation always runs first.
                let order = options.selected(
                    [[.ours, .saa, .handRolled], [.saa, .handRolled, .ours], [.handRolled, .ours, .saa]][repetition % 3]
                )
                for implementation in order {
                    // Don't repeat a run that already took long (SAA; hand-rolled at large M·N).
                    if let first = runs[implementation]?.first, first.seconds > 1 {
                        continue
                    }
                    let m = implementation == .saa ? saaElements : elements
                    let run = await fanOutOnce(implementation, policy: policy, subscribers: subscribers, elements: m)
                    runs[implementation, default: []].append(run)
                }
            }
            func rate(_ implementation: Implementation) -> Double? {
                runs[implementation].flatMap { median($0.map(\.rate)) }
            }
            func delivered(_ implementation: Implementation) -> String {
                fmt(runs[implementation].flatMap { median($0.map(\.delivered)) }.map { $0 * 100 }, 1)
            }
            let ours = rate(.ours)
            let saa = rate(.saa)
            let hand = rate(.handRolled)
            table.add([
                policy.shortName, "\(subscribers)", "\(elements)",
                fmt(ours.map { $0 / 1e6 }), fmt(saa.map { $0 / 1e6 }),
                saaElements == elements ? "\(saaElements)" : "\(saaElements)*",
                fmt(hand.map { $0 / 1e6 }),
                ratio(ours, saa), ratio(ours, hand), ratio(ours, base),
            ])
            if !policy.isLossless {
                lossy.add(["\(subscribers)", delivered(.ours), delivered(.saa), delivered(.handRolled)])
            }
            stamp("  done \(policy) N=\(subscribers)")
        }
    }
    stamp(table.render())
    stamp(
        """
        (.newest(64) = AsyncMulticast .bufferingNewest(64), SAA .bufferingLatest(64), AsyncStream
         .bufferingNewest(64). These are lossy: the rate is still M·N / time; the share of M·N each
         implementation actually delivered was:)
        """)
    stamp(lossy.render())

    if options.implementations.contains(.ours) && options.implementations.contains(.base) {
        await runOpaqueOverhead(options)
    }
}

/// N = 1 over an upstream the compiler cannot fuse into the consumer's loop: how much
/// sharing costs over iterating a real base directly.
@MainActor
func runOpaqueOverhead(_ options: Options) async {
    let elements = options.baseElements
    func rate(_ implementation: Implementation, _ policy: BenchPolicy) async -> Double? {
        var rates: [Double] = []
        for _ in 0..<5 {
            let (tally, seconds) = await measureSeconds {
                await Scenarios.opaqueOverhead(implementation, policy: policy, elements: elements)
            }
            guard let tally else { return nil }
            record("opaque overhead \(implementation) \(policy)", tally.failures)
            rates.append(Double(elements) / seconds)
        }
        return median(rates)
    }
    // Interleaved, so drift on a shared machine hits both sides alike.
    var table = Table(["upstream", "policy", "base Mdel/s", "ours Mdel/s", "base / ours"])
    for policy in [BenchPolicy.bounded64, .unbounded] {
        let base = await rate(.base, policy)
        let ours = await rate(.ours, policy)
        table.add([
            "opaque next()", policy.shortName, fmt(base.map { $0 / 1e6 }), fmt(ours.map { $0 / 1e6 }),
            ratio(base, ours),
        ])
    }
    stamp(
        """

        N = 1 over an upstream whose next() is an out-of-line call (@inline(never)), as a
        sequence from another module or an AsyncStream is: base iterates it directly, ours shares
        it with one subscriber. M = \(elements), median of 5. "base / ours" is how many times
        faster not sharing is (the target: within 4x).
        """)
    stamp(table.render())
}

extension BenchPolicy {
    var shortName: String {
        switch self {
        case .bounded64: ".bounded(64)"
        case .unbounded: ".unbounded"
        case .newest64: ".newest(64)"
        }
    }
}

// MARK: - Scenario 2: subject fan-out

@MainActor
func runSubject(_ options: Options) async {
    stamp(
        """

        == 2. Subject fan-out ==
        One task sends 0..<M, then finishes; N subscribers (registered first), each in its own task,
        must see all M in order. AsyncMulticast: AsyncPassthroughSubject(buffering: .unbounded).
        SAA has no subject: an AsyncStream continuation shared with share(bufferingPolicy: .unbounded)
        (M·N capped as in scenario 1, marked *). hand-rolled: the same broadcaster's send().
        """)
    var table = Table(["N", "M", "ours Mdel/s", "SAA Mdel/s", "SAA M", "hand Mdel/s", "vs SAA", "vs hand"])
    for subscribers in options.subscriberCounts {
        let elements = options.elements(forSubscribers: subscribers)
        let saaElements = options.saaElements(forSubscribers: subscribers, regular: elements)
        var rates: [Implementation: [Double]] = [:]
        for _ in 0..<options.repetitions {
            for implementation in options.selected([.ours, .saa, .handRolled]) {
                let m = implementation == .saa ? saaElements : elements
                let (tally, seconds) = await measureSeconds {
                    await Scenarios.subject(implementation, subscribers: subscribers, elements: m)
                }
                guard let tally else { continue }
                record("subject \(implementation) N=\(subscribers) M=\(m)", tally.failures)
                rates[implementation, default: []].append(Double(tally.deliveries) / seconds)
            }
        }
        let ours = rates[.ours].flatMap(median)
        let saa = rates[.saa].flatMap(median)
        let hand = rates[.handRolled].flatMap(median)
        table.add([
            "\(subscribers)", "\(elements)",
            fmt(ours.map { $0 / 1e6 }), fmt(saa.map { $0 / 1e6 }),
            saaElements == elements ? "\(saaElements)" : "\(saaElements)*",
            fmt(hand.map { $0 / 1e6 }), ratio(ours, saa), ratio(ours, hand),
        ])
    }
    stamp(table.render())
}

// MARK: - Scenario 3: churn

@MainActor
func runChurn(_ options: Options) async {
    stamp(
        """

        == 3. Join/leave churn ==
        One long-lived subscriber reads an endless counter from the start; 4 tasks run \(options.churnJoins)
        short subscribers in total, each joining, taking 3 elements and leaving (iterator dropped).
        joins/s = short subscribers / churn wall time (median of \(options.repetitions)). Then the upstream stops and
        the long-lived subscriber must have received every produced element in order.
        AsyncMulticast and SAA: share(.bounded(64)); hand-rolled: .unbounded AsyncStreams (no back-pressure,
        so its upstream runs ahead of the long-lived subscriber).
        """)
    var table = Table(["implementation", "joins/s", "produced", "long-lived got", "leftover subs", "ok", "ours vs"])
    var rates: [Implementation: [Double]] = [:]
    var last: [Implementation: ChurnResult] = [:]
    for _ in 0..<options.repetitions {
        for implementation in options.selected([.ours, .saa, .handRolled]) {
            guard let result = await Scenarios.churn(implementation, joins: options.churnJoins) else { continue }
            record("churn \(implementation)", result.failures)
            last[implementation] = result
            rates[implementation, default: []].append(result.joinsPerSecond)
        }
    }
    let oursRate = median(rates[.ours] ?? [])
    for implementation in options.selected([.ours, .saa, .handRolled]) {
        guard let result = last[implementation] else { continue }
        let rate = median(rates[implementation] ?? [])
        table.add([
            implementation.description, fmt(rate, 0), "\(result.produced)", "\(result.longLived.received)",
            result.leftoverSubscribers.map { "\($0)" } ?? "n/a", result.ok ? "yes" : "NO",
            implementation == .ours ? "" : ratio(oursRate, rate),
        ])
    }
    stamp(table.render())
    stamp("(produced / long-lived got: from the last repetition. leftover subs: subscribers still registered right")
    stamp(" after the churn, before the upstream stops; 1 = the long-lived one; n/a = not observable.)")
}

// MARK: - Scenario 4: idle memory

@MainActor
func runMemory(_ options: Options) async {
    let counts =
        options.idleSubscribers > Scenarios.saaIdleSubscribersCap
        ? [Scenarios.saaIdleSubscribersCap, options.idleSubscribers] : [options.idleSubscribers]
    stamp(
        """

        == 4. Idle subscriber memory ==
        \(counts.map(String.init).joined(separator: " and ")) subscribers whose iterators exist (kept in a pre-reserved
        array) but are never iterated, no tasks. Heap growth from glibc mallinfo2() (arena + mmap bytes) before/after,
        per subscriber; "iterator B" is the inline size of one iterator (in the array, not in the heap growth).
        SAA runs only up to \(Scenarios.saaIdleSubscribersCap): releasing an SAA iterator scans all registered
        sides, so tearing down 100,000 of them takes minutes (O(N^2)).
        """)
    var table = Table(["implementation", "subscribers", "registered", "heap B/sub", "iterator B", "ours vs"])
    for count in counts {
        var results: [Implementation: IdleMemoryResult] = [:]
        for implementation in options.selected([.ours, .saa, .handRolled]) {
            if implementation == .saa, count > Scenarios.saaIdleSubscribersCap { continue }
            // Twice; keep the second (the first can include one-time allocations).
            _ = Scenarios.idle(implementation, subscribers: min(1_000, count))
            results[implementation] = Scenarios.idle(implementation, subscribers: count)
        }
        for implementation in options.selected([.ours, .saa, .handRolled]) {
            guard let result = results[implementation] else {
                if implementation == .saa {
                    table.add([implementation.description, "\(count)", "skipped", "n/a", "n/a", "n/a"])
                }
                continue
            }
            table.add([
                implementation.description, "\(count)", "\(result.subscribers)", fmt(result.heapBytesPerSubscriber, 1),
                "\(result.iteratorStride)",
                implementation == .ours
                    ? "" : ratio(result.heapBytesPerSubscriber, results[.ours]?.heapBytesPerSubscriber),
            ])
        }
    }
    stamp(table.render())
    if heapBytesInUse() == nil {
        stamp("(mallinfo2 is glibc-only: heap numbers are n/a on this platform.)")
    }
}

// MARK: - Scenario 5: cancellation

@MainActor
func runCancellation(_ options: Options) async {
    stamp(
        """

        == 5. Cancellation latency ==
        \(options.cancellationSamples) samples each. One subscriber waits in next() on a shared, never-yielding
        AsyncStream upstream; 1 ms after the upstream was first pulled its task is cancelled.
        cancel->return: task.cancel() to that next() returning. cancel->upstream end: the same
        task.cancel() (the last subscriber leaving) to the upstream AsyncStream's onTermination.
        "not ended" counts samples where the upstream was still running 20 ms later (after 3 in a
        row the rest are not waited for: "skipped").
        hand-rolled cancels its forwarding task when its last subscriber leaves; base iterates
        the AsyncStream directly (the floor).
        """)
    var table = Table([
        "implementation", "cancel->return p50 us", "p99 us", "cancel->upstream end p50 us", "p99 us",
        "not ended", "skipped", "ours vs (p50)",
    ])
    var results: [Implementation: CancellationResult] = [:]
    for implementation in options.selected([.ours, .saa, .handRolled, .base]) {
        let result = await Scenarios.cancellation(implementation, samples: options.cancellationSamples)
        record("cancellation \(implementation)", result.failures)
        results[implementation] = result
    }
    let oursP50 = results[.ours].flatMap { percentile($0.cancelToReturn, 0.5) }
    for implementation in options.selected([.ours, .saa, .handRolled, .base]) {
        guard let result = results[implementation] else { continue }
        let p50 = percentile(result.cancelToReturn, 0.5)
        table.add([
            implementation.description,
            fmt(p50.map { $0 / 1e3 }, 1), fmt(percentile(result.cancelToReturn, 0.99).map { $0 / 1e3 }, 1),
            fmt(percentile(result.cancelToUpstreamTermination, 0.5).map { $0 / 1e3 }, 1),
            fmt(percentile(result.cancelToUpstreamTermination, 0.99).map { $0 / 1e3 }, 1),
            "\(result.upstreamNotTerminated)", "\(result.upstreamNotChecked)",
            implementation == .ours ? "" : ratio(p50, oursP50),
        ])
    }
    stamp(table.render())
}

// MARK: - Main

let options = Options(CompareArguments.parseOrExit())
#if DEBUG
    stamp("warning: compare was built in debug mode; use `swift run -c release compare` for numbers.")
#endif
if options.instructions {
    stamp("compare: mode \(options.mode.rawValue), instructions per delivery (callgrind)")
} else {
    stamp("compare: mode \(options.mode.rawValue), scenarios \(options.scenarios.sorted().joined(separator: ", "))")
    stamp("Ratios read \"AsyncMulticast vs X\": above 1.00x means AsyncMulticast is better.")
}
let (_, totalSeconds) = await measureSeconds {
    if options.instructions {
        runInstructions(options)
        return
    }
    if options.scenarios.contains("fanout") { await runFanOut(options) }
    if options.scenarios.contains("subject") { await runSubject(options) }
    if options.scenarios.contains("churn") { await runChurn(options) }
    if options.scenarios.contains("memory") { await runMemory(options) }
    if options.scenarios.contains("cancel") { await runCancellation(options) }
    if options.scenarios.contains("cost") { await runCost(options) }
    if options.scenarios.contains("latency") { await runLatency(options) }
    if options.scenarios.contains("slowproducer") { await runSlowProducer(options) }
}
stamp("\ncompare: finished in \(fmt(totalSeconds, 1)) s")
if failures.isEmpty {
    stamp("compare: all checks passed")
} else {
    stamp("compare: \(failures.count) check(s) FAILED:")
    for failure in failures.prefix(50) { stamp("  \(failure)") }
    exit(1)
}
