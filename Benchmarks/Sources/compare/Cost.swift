// The cost scenario (cost per delivery, `--only cost`) and the instructions-per-delivery mode
// (`--instructions`): share() and AsyncPassthroughSubject against OpenCombine's
// synchronous PassthroughSubject with N sinks.

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

typealias DeliveryCell = Scenarios.DeliveryCell

extension Options {
    /// The cells `--impls` selects for `subscribers`: `ours` selects share() and the subject
    /// (and, when `counting` instructions, share() `.unbounded`, share() without the catch-up
    /// spin at N = 1 and the broadcast cells), `opencombine` OpenCombine, `base` the floor (N = 1 only).
    func deliveryCells(subscribers: Int, counting: Bool = false) -> [DeliveryCell] {
        DeliveryCell.allCases.filter {
            implementations.contains($0.implementation) && $0.runs(subscribers: subscribers)
                && (counting || !$0.isCountedOnly)
        }
    }
}

/// The line under a table that gives the floor (`base`) at N = 1 and what share() adds to it.
func baseLine(_ value: Double?, share: Double?, unit: String, decimals: Int, sizes: String) -> String {
    var line = """
        base, the floor under share() at N = 1 (one task iterating the same opaque upstream directly, no sharing;
        \(sizes)): \(fmt(value, decimals)) \(unit) per element
        """
    if let value, let share { line += "; share() at N = 1 adds \(fmt(share - value, decimals)) \(unit)" }
    return line
}

// MARK: - cost: CPU per delivery

@MainActor
func runCost(_ options: Options) async {
    stamp(
        """

        \(Options.heading("cost"))
        CPU time of the whole process (user + sys from getrusage(RUSAGE_SELF), every thread,
        setup included) / (M·N deliveries), in microseconds; median of \(options.costRepetitions), the
        implementations interleaved. Every subscriber must receive 0..<M in order.
        share(): OpaqueCountingSequence(M).share(buffering: .bounded(64)): 0..<M whose next() is
          an out-of-line call, as another module's sequence is; N subscribers, each in its own task.
        subject: AsyncPassthroughSubject<Int, Never>() (default policy, .unbounded); one task sends
          0..<M and finishes; N subscribers, each in its own task.
        OpenCombine: PassthroughSubject<Int, Never> with N sinks; 0..<M sent synchronously.
        "vs OC" = OpenCombine's CPU / ours: above 1.00x means AsyncMulticast is cheaper.
        """)
    guard !options.deliveryCells(subscribers: 1).isEmpty else {
        stamp("(skipped: --impls selects none of ours, opencombine, base)")
        return
    }
    // Warm-up: first-use costs (metadata, thread pool) out of the measured runs.
    for cell in options.deliveryCells(subscribers: 1) {
        _ = await Scenarios.deliveryCell(cell, subscribers: 1, elements: 256)
    }

    var cpuTable = Table([
        "N", "M", "share us/del", "subject us/del", "OpenCombine us/del", "share vs OC", "subject vs OC",
    ])
    var wallTable = Table(["N", "M", "share us/del", "subject us/del", "OpenCombine us/del"])
    var base: (value: Double?, elements: Int, share: Double?)?
    for subscribers in options.costSubscriberCounts {
        let elements = options.costElements(forSubscribers: subscribers)
        let deliveries = Double(elements) * Double(subscribers)
        var cpu: [DeliveryCell: [Double]] = [:]
        var wall: [DeliveryCell: [Double]] = [:]
        let cells = options.deliveryCells(subscribers: subscribers)
        for repetition in 0..<options.costRepetitions {
            // Rotate the order so no implementation always runs first.
            let rotation = repetition % cells.count
            for cell in cells[rotation...] + cells[..<rotation] {
                let run = await measureCPUSeconds {
                    await Scenarios.deliveryCell(cell, subscribers: subscribers, elements: elements)
                }
                record("cost \(cell.rawValue) N=\(subscribers) M=\(elements)", run.result.failures)
                if run.result.subscribers != subscribers {
                    record(
                        "cost \(cell.rawValue) N=\(subscribers)", ["\(run.result.subscribers) subscribers finished"])
                }
                cpu[cell, default: []].append(run.cpu / deliveries * 1e6)
                wall[cell, default: []].append(run.wall / deliveries * 1e6)
            }
        }
        for (cell, list) in cpu.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            figure(
                "cost", "cpu", unit: "us/delivery", implementation: cell.rawValue, subscribers: subscribers,
                elements: elements, samples: list)
            figure(
                "cost", "wall", unit: "us/delivery", implementation: cell.rawValue, subscribers: subscribers,
                elements: elements, samples: wall[cell] ?? [])
        }
        func value(_ samples: [DeliveryCell: [Double]], _ cell: DeliveryCell) -> Double? {
            samples[cell].flatMap(median)
        }
        let openCombine = value(cpu, .openCombine)
        cpuTable.add([
            "\(subscribers)", "\(elements)",
            fmt(value(cpu, .share), 3), fmt(value(cpu, .subject), 3), fmt(openCombine, 3),
            ratio(openCombine, value(cpu, .share)), ratio(openCombine, value(cpu, .subject)),
        ])
        wallTable.add([
            "\(subscribers)", "\(elements)",
            fmt(value(wall, .share), 3), fmt(value(wall, .subject), 3), fmt(value(wall, .openCombine), 3),
        ])
        if cpu[.base] != nil {
            base = (value(cpu, .base), elements, value(cpu, .share))
        }
        stamp("  done N=\(subscribers)")
    }
    stamp(cpuTable.render())
    if let base {
        stamp(baseLine(base.value, share: base.share, unit: "us CPU", decimals: 3, sizes: "M = \(base.elements)"))
    }
    stamp("Wall time per delivery in the same runs (medians; 2 cores: async sides can use both):")
    stamp(wallTable.render())
}

// MARK: - Instructions per delivery (callgrind)

/// One row of the instructions table: N subscribers, run with M1 and then M2 elements.
struct InstructionSizes {
    var subscribers: Int
    var smaller: Int
    var larger: Int
}

extension Options {
    /// (M2 − M1)·N is the number of deliveries the difference counts (about 200,000 in --full).
    var instructionSizes: [InstructionSizes] {
        switch mode {
        case .smoke:
            [
                InstructionSizes(subscribers: 1, smaller: 200, larger: 1_200),
                InstructionSizes(subscribers: 64, smaller: 20, larger: 40),
            ]
        case .quick:
            [
                InstructionSizes(subscribers: 1, smaller: 10_000, larger: 110_000),
                InstructionSizes(subscribers: 64, smaller: 500, larger: 2_000),
            ]
        case .full:
            [
                InstructionSizes(subscribers: 1, smaller: 20_000, larger: 220_000),
                InstructionSizes(subscribers: 64, smaller: 1_000, larger: 4_000),
                InstructionSizes(subscribers: 1024, smaller: 100, larger: 300),
            ]
        }
    }

    /// Measurements (pairs of runs) per cell: share()'s count moves from run to run (its
    /// threads' interleaving decides how often the producer parks and subscribers suspend).
    var instructionRepetitions: Int {
        switch mode {
        case .smoke: 1
        case .quick: 2
        case .full: 3
        }
    }
}

/// The performance targets: ours / OpenCombine at most this many times OpenCombine's instructions.
func instructionTarget(_ cell: DeliveryCell, subscribers: Int) -> Double? {
    switch (cell, subscribers) {
    case (.share, 1): 0.45
    case (.share, 64): 0.10
    case (.subject, 1): 0.25
    case (.subject, 64): 0.07
    default: nil
    }
}

@MainActor
func runInstructions(_ options: Options) {
    #if os(Linux)
        guard !options.deliveryCells(subscribers: 1, counting: true).isEmpty else {
            stamp("compare: --impls selects none of ours, opencombine, base: nothing to count")
            return
        }
        guard let valgrind = options.valgrind ?? findOnPath("valgrind") else {
            fail(
                """
                compare: --instructions needs valgrind (its callgrind tool), and there is no valgrind on PATH.
                Install it (Debian/Ubuntu: apt-get install valgrind) or pass --valgrind PATH.
                """)
        }
        guard access(valgrind, X_OK) == 0 else { fail("compare: \(valgrind) is not an executable (--valgrind)") }
        let builtCell = options.deliveryCell ?? siblingExecutable("delivery-cell")
        guard access(builtCell, X_OK) == 0 else {
            fail(
                """
                compare: no delivery-cell executable at \(builtCell).
                Build it next to compare: swift build -c release --product delivery-cell (or pass --delivery-cell PATH).
                """)
        }
        let folder: String
        if let profiles = options.profiles {
            mkdir(profiles, 0o755)
            folder = profiles
        } else {
            guard let temporary = makeTemporaryFolder() else { fail("compare: cannot create a temporary folder") }
            folder = temporary
        }
        // valgrind 3.19 gives up on the DWARF 5 debug info clang writes for the C/C++ parts
        // ("unhandled dwarf2 abbrev form code 0x25"): run a copy without debug info (the
        // symbol table stays, so profiles still name the functions).
        var cellBinary = builtCell
        let stripped = "\(folder)/delivery-cell"
        if let strip = findOnPath("strip") ?? findOnPath("llvm-strip"),
            spawnAndWait([strip, "--strip-debug", "-o", stripped, builtCell], output: "/dev/null") == 0
        {
            cellBinary = stripped
        }
        let sizes = options.instructionSizes
        let repetitions = options.instructionRepetitions
        stamp(
            """

            \(Options.heading("instructions"))
            Each run is one process: valgrind --tool=callgrind delivery-cell CELL N M
            (\(cellBinary == builtCell ? builtCell : "a copy of \(builtCell) without debug info"); the cells of
            the cost scenario, and share() over the same upstream with .unbounded, run in a detached task while the
            synchronous main waits). Ir = instructions executed
            by the whole process, every thread. Instructions per delivery = (Ir(M2) - Ir(M1)) / ((M2 - M1)·N),
            so start-up and tear-down cancel out; median of \(repetitions) such pairs (range in brackets).
            Under valgrind the process's threads take turns on one core, so share()'s count varies from run
            to run: how often its producer parks and its subscribers suspend depends on that interleaving.
            valgrind: \(valgrind)
            """)
        figureNote("instructions-scheduling", Scheduling.currentThread())
        let runner = CallgrindRunner(
            valgrind: valgrind, cellBinary: cellBinary, folder: folder, keep: options.profiles != nil)
        var perDelivery: [Int: [DeliveryCell: [Double]]] = [:]
        for size in sizes {
            for repetition in 0..<repetitions {
                for cell in options.deliveryCells(subscribers: size.subscribers, counting: true) {
                    let (totals, seconds) = runner.pair(
                        [size.smaller, size.larger], { [cell.rawValue, "\(size.subscribers)", "\($0)"] },
                        name: { "callgrind.\(cell.rawValue).N\(size.subscribers).M\($0).\(repetition + 1)" },
                        label: { "instructions \(cell.rawValue) N=\(size.subscribers) M=\($0)" })
                    guard let counts = totals else { continue }
                    let units = (size.larger - size.smaller) * (cell.countsPerElementSent ? 1 : size.subscribers)
                    let value = Double(counts[1] - counts[0]) / Double(units)
                    perDelivery[size.subscribers, default: [:]][cell, default: []].append(value)
                    stamp(
                        "  \(cell.rawValue) N=\(size.subscribers): M=\(size.smaller) \(grouped(counts[0])) Ir, "
                            + "M=\(size.larger) \(grouped(counts[1])) Ir: \(fmt(value, 0)) \(unit(of: cell)) "
                            + "(\(fmt(seconds, 1)) s)"
                    )
                }
            }
        }
        for size in sizes {
            let cells = perDelivery[size.subscribers] ?? [:]
            for (cell, list) in cells.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                figure(
                    "instructions", "ir",
                    unit: cell.countsPerElementSent ? "instructions/element" : "instructions/delivery",
                    implementation: cell.rawValue,
                    subscribers: size.subscribers, labels: [("m1", "\(size.smaller)"), ("m2", "\(size.larger)")],
                    samples: list)
            }
        }
        var table = Table([
            "N", "M1", "M2", "share Ir/del", "subject Ir/del", "OpenCombine Ir/del",
            "share / OC", "target", "subject / OC", "target", "share .unbounded Ir/del",
        ])
        for size in sizes {
            let row = perDelivery[size.subscribers] ?? [:]
            func cellText(_ cell: DeliveryCell) -> String {
                guard let values = row[cell], let middle = median(values) else { return "n/a" }
                guard values.count > 1, let low = values.min(), let high = values.max() else { return fmt(middle, 0) }
                return "\(fmt(middle, 0)) [\(fmt(low, 0))-\(fmt(high, 0))]"
            }
            func versusOpenCombine(_ cell: DeliveryCell) -> (ratio: String, target: String) {
                let limit = instructionTarget(cell, subscribers: size.subscribers)
                guard let value = row[cell].flatMap(median), let openCombine = row[.openCombine].flatMap(median),
                    openCombine > 0
                else {
                    return ("n/a", limit.map { "<= \(fmt($0))x" } ?? "")
                }
                let share = value / openCombine
                guard let limit else { return (fmt(share, 3) + "x", "") }
                return (fmt(share, 3) + "x", "<= \(fmt(limit))x " + (share <= limit ? "met" : "NOT met"))
            }
            let share = versusOpenCombine(.share)
            let subject = versusOpenCombine(.subject)
            table.add([
                "\(size.subscribers)", "\(size.smaller)", "\(size.larger)",
                cellText(.share), cellText(.subject), cellText(.openCombine),
                share.ratio, share.target, subject.ratio, subject.target, cellText(.shareUnbounded),
            ])
        }
        stamp(
            """
            "X / OC" = our instructions per delivery / OpenCombine's (medians; below 1.00x: ours executes
            fewer); "target": the performance target for that ratio.
            """)
        stamp(table.render())
        stamp(broadcastTable(perDelivery, sizes: sizes))
        if let row = perDelivery[1], let values = row[.base], let size = sizes.first(where: { $0.subscribers == 1 }) {
            let share = row[.share].flatMap(median)
            stamp(
                baseLine(
                    median(values), share: share, unit: "Ir", decimals: 0,
                    sizes: "M1 = \(size.smaller), M2 = \(size.larger)"))
        }
        if options.mode == .smoke {
            stamp("(--smoke: checks that the mode runs; with so few deliveries the numbers mean little.)")
        }
        var medians: [String: Double] = [:]
        var order: [String] = []
        for size in sizes {
            for cell in options.deliveryCells(subscribers: size.subscribers, counting: true)
            where cell.isHeldByGate(subscribers: size.subscribers) {
                let key = InstructionThresholds.key(cell, subscribers: size.subscribers)
                order.append(key)
                medians[key] = perDelivery[size.subscribers]?[cell].flatMap(median)
            }
        }
        if options.deliveryCells(subscribers: 1).contains(.share) {
            for (key, value) in countJoinLeave(options, runner: runner) {
                order.append(key)
                medians[key] = value
            }
        }
        if options.profiles == nil {
            if cellBinary == stripped { unlink(stripped) }
            rmdir(folder)  // fails, keeping the logs, if a run failed
        }
        applyThresholds(options, medians: medians, order: order)
        if let profiles = options.profiles {
            stamp(
                """
                callgrind outputs kept in \(profiles); for example:
                  callgrind_annotate --inclusive=yes \(profiles)/callgrind.share.N1.M\(sizes[0].larger).1.out | swift demangle --simplified
                """)
        }
    #else
        fail("compare: --instructions runs valgrind, which this tool supports on Linux only")
    #endif
}

/// What a cell's count is per.
func unit(of cell: DeliveryCell) -> String {
    cell.countsPerElementSent ? "Ir/element sent" : "Ir/delivery"
}

/// The cells measured against tokio's broadcast (BroadcastCells.swift; tokio's figures and
/// their source are in the Benchmarks README, "Against tokio's broadcast"): one row per
/// cell, one column per N.
func broadcastTable(_ perDelivery: [Int: [DeliveryCell: [Double]]], sizes: [InstructionSizes]) -> String {
    let cells: [DeliveryCell] = [
        .share, .shareNoSpin, .share1024, .lockstep, .resumeFloor, .lossySend, .lossyRead, .losslessRead,
    ]
    var table = Table(["cell", "unit"] + sizes.map { "N=\($0.subscribers)" })
    for cell in cells {
        let values = sizes.map { size in perDelivery[size.subscribers]?[cell].flatMap(median) }
        guard values.contains(where: { $0 != nil }) else { continue }
        table.add([cell.rawValue, unit(of: cell)] + values.map { fmt($0, 0) })
    }
    return """
        Against tokio's broadcast (the Benchmarks README gives tokio's figures): share() at capacity 64
        (share-nospin: the sole subscriber's catch-up spin off) and 1024, tokio's lockstep "contention"
        without work, the runtime's resume floor under it (no library: --impls base), a lossy send to N
        subscribers that do not read (per element sent), and the same reads in rounds of 512 from a lossy
        lane and a lossless one.
        """ + "\n" + table.render()
}
