// Scenario 6 (cost per delivery, `--only cost`): share() and AsyncPassthroughSubject
// against OpenCombine's synchronous PassthroughSubject with N sinks (issue 13).

import MulticastScenarios

typealias DeliveryCell = Scenarios.DeliveryCell

extension Options {
    /// The cells `--impls` selects: `ours` selects share() and the subject, `opencombine` OpenCombine.
    var deliveryCells: [DeliveryCell] {
        DeliveryCell.allCases.filter { implementations.contains($0.implementation) }
    }
}

// MARK: - Scenario 6: CPU per delivery

@MainActor
func runCost(_ options: Options) async {
    let cells = options.deliveryCells
    stamp(
        """

        == 6. Cost per delivery (CPU) ==
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
    guard !cells.isEmpty else {
        stamp("(skipped: --impls selects neither ours nor opencombine)")
        return
    }
    // Warm-up: first-use costs (metadata, thread pool) out of the measured runs.
    for cell in cells { _ = await Scenarios.deliveryCell(cell, subscribers: 4, elements: 256) }

    var cpuTable = Table([
        "N", "M", "share us/del", "subject us/del", "OpenCombine us/del", "share vs OC", "subject vs OC",
    ])
    var wallTable = Table(["N", "M", "share us/del", "subject us/del", "OpenCombine us/del"])
    for subscribers in options.costSubscriberCounts {
        let elements = options.costElements(forSubscribers: subscribers)
        let deliveries = Double(elements) * Double(subscribers)
        var cpu: [DeliveryCell: [Double]] = [:]
        var wall: [DeliveryCell: [Double]] = [:]
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
        stamp("  done N=\(subscribers)")
    }
    stamp(cpuTable.render())
    stamp("Wall time per delivery in the same runs (medians; 2 cores: async sides can use both):")
    stamp(wallTable.render())
}
