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
        help: """
            Comma-separated subset of scenarios: \(Options.allScenarios.joined(separator: ",")) (the default), \
            and \(Options.onRequestScenarios.joined(separator: ",")), which runs only when named.
            """,
        transform: CompareArguments.scenarios)
    var scenarios: Set<String> = Set(Options.allScenarios)

    @Option(
        name: .customLong("impls"),
        help: """
            Comma-separated subset of implementations: ours, saa, hand, base, opencombine (alias: combine) \
            (default: all). OpenCombine runs in the subject and cost scenarios only.
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

    @Option(
        name: .customLong("heap-jitter"),
        help: """
            Start each of AsyncMulticast's cells by allocating a few small blocks chosen by \
            this number, so that its storage is laid out differently from one number to \
            another (Benchmarks/Tools/against.py passes a new number each round).
            """)
    var heapJitter: UInt64?

    @Option(
        name: .customLong("cancel-samples"),
        help: """
            Cancellation samples per implementation in the cancel scenario (default: 10 with \
            --smoke, 100 with --quick, 300 with --full). Its p99 is the second-largest of 100 \
            samples in --quick: Benchmarks/Tools/against.py asks for more.
            """)
    var cancelSamples: Int?

    @Option(
        help: """
            Also write every measured value the tables are computed from (all repetitions) into \
            this file as JSON (what Benchmarks/Tools/figures.sh merges into Results/figures.json).
            """)
    var json: String?

    func validate() throws {
        if let cancelSamples, cancelSamples < 1 {
            throw ValidationError("--cancel-samples takes 1 or more, not \(cancelSamples)")
        }
    }

    static func scenarios(_ list: String) throws -> Set<String> {
        let names = Set(list.split(separator: ",").map { $0.trimmingCharacters() })
        let unknown = names.subtracting(Options.allScenarios + Options.onRequestScenarios)
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
    /// What each scenario measures, under the name `--only` takes, which the Benchmarks README's
    /// headings and the figures' rows use too (`instructions` is `--instructions`): scenarios are
    /// named, never numbered, so that this output and the README cannot drift apart.
    static let scenarioTitles: [String: String] = [
        "fanout": "fan-out throughput",
        "subject": "subject fan-out",
        "churn": "join/leave churn",
        "memory": "idle subscriber memory",
        "cancel": "cancellation latency",
        "cost": "cost per delivery (CPU)",
        "instructions": "instructions per delivery (callgrind)",
        "latency": "wake-up latency",
        "slowproducer": "slow-producer CPU",
        "broadcast": "against tokio's broadcast (wall time)",
        "topics": "fan-out by key",
    ]

    /// The line compare prints above a scenario's tables: `== fanout: fan-out throughput ==`.
    static func heading(_ scenario: String) -> String {
        "== \(scenario): \(scenarioTitles[scenario, default: scenario]) =="
    }
    /// Scenarios that run only when `--only` names them: the comparison with tokio's broadcast
    /// (Broadcast.swift) and fan-out by key (Topics.swift) are not part of the figures the
    /// READMEs' charts are made from.
    static let onRequestScenarios = ["broadcast", "topics"]

    var mode = Mode.full
    var scenarios: Set<String> = Set(Options.allScenarios)
    var implementations: Set<Implementation> = Set(Implementation.allCases)
    var instructions = false
    var valgrind: String?
    var deliveryCell: String?
    var profiles: String?
    var checkThresholds: String?
    var writeThresholds: String?
    var json: String?
    var heapJitter: UInt64?
    var cancelSamples: Int?

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
        self.json = arguments.json
        self.heapJitter = arguments.heapJitter
        self.cancelSamples = arguments.cancelSamples
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
    var cancellationSamples: Int { cancelSamples ?? (mode == .smoke ? 10 : mode == .quick ? 100 : 300) }

    // Cost per delivery (the cost scenario).
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

// MARK: - Main

let options = Options(CompareArguments.parseOrExit())
if let seed = options.heapJitter { HeapJitter.use(seed: seed) }
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
    if options.scenarios.contains("broadcast") { await runBroadcast(options) }
    if options.scenarios.contains("topics") { await runTopics(options) }
}
stamp("\ncompare: finished in \(fmt(totalSeconds, 1)) s")
if let path = options.json {
    let ran = options.instructions ? ["instructions"] : options.scenarios.sorted()
    writeFigures(to: path, mode: options.mode.rawValue, scenarios: ran, seconds: totalSeconds, failures: failures)
}
if failures.isEmpty {
    stamp("compare: all checks passed")
} else {
    stamp("compare: \(failures.count) check(s) FAILED:")
    for failure in failures.prefix(50) { stamp("  \(failure)") }
    exit(1)
}
