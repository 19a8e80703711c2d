// The "broadcast" scenario (`--only broadcast`, never by default): the wall-time side of the
// comparison with tokio's broadcast (the Benchmarks README, "Against tokio's broadcast"; the
// instruction counts are `--instructions`' table of the same name). Two measurements, as
// that comparison quotes them:
//
// - lossless fan-out throughput: deliveries per second of share() at capacity 64 and 1024
//   (`share`, `share-1024`) at N = 16, 256 and 1024;
// - lockstep contention (tokio's `benches/sync_broadcast.rs` "contention", without work):
//   milliseconds per iteration of 100 lockstep sends at N = 10, 100 and 1000.

import MulticastScenarios

extension Options {
    var broadcastFanOutCounts: [Int] {
        switch mode {
        case .smoke: [16]
        case .quick: [16, 256]
        case .full: [16, 256, 1024]
        }
    }

    var broadcastLockstepCounts: [Int] {
        switch mode {
        case .smoke: [10]
        case .quick: [10, 100]
        case .full: [10, 100, 1000]
        }
    }

    /// Iterations of 100 lockstep sends per measurement, all in one run of the cell (its
    /// subscribers are set up once, as tokio's benchmark sets up its receivers once).
    var lockstepIterations: Int { mode == .smoke ? 2 : 20 }
}

@MainActor
func runBroadcast(_ options: Options) async {
    stamp(
        """

        \(Options.heading("broadcast"))
        Lossless fan-out: share(buffering: .bounded(64)) and .bounded(1024) over the opaque upstream, N
        subscribers each in its own task, M·N about \(options.deliveriesPerCell) deliveries; M deliveries/s (wall).
        Lockstep: a subject of capacity 1000, N subscribers; each send waits until all N received the one
        before (tokio's "contention" without work); ms per iteration of 100 sends.
        Medians of \(options.repetitions); tokio's figures are in the Benchmarks README.
        """)
    guard options.implementations.contains(.ours) else {
        stamp("(skipped: --impls does not select ours)")
        return
    }
    var fanOut = Table(["N", "M", "capacity 64 M del/s", "capacity 1024 M del/s"])
    for subscribers in options.broadcastFanOutCounts {
        let elements = options.elements(forSubscribers: subscribers)
        var rates: [DeliveryCell: [Double]] = [:]
        for _ in 0..<options.repetitions {
            for cell in [DeliveryCell.share, .share1024] {
                let (tally, seconds) = await measureSeconds {
                    await Scenarios.deliveryCell(cell, subscribers: subscribers, elements: elements)
                }
                record("broadcast \(cell.rawValue) N=\(subscribers)", tally.failures)
                rates[cell, default: []].append(Double(tally.deliveries) / seconds / 1e6)
            }
        }
        for (cell, samples) in rates {
            figure(
                "broadcast", "deliveries", unit: "M deliveries/s", implementation: cell.rawValue,
                subscribers: subscribers, elements: elements, samples: samples)
        }
        fanOut.add([
            "\(subscribers)", "\(elements)", fmt(rates[.share].flatMap(median)),
            fmt(rates[.share1024].flatMap(median)),
        ])
    }
    stamp(fanOut.render())

    var lockstep = Table(["N", "iterations", "ms per 100 sends"])
    let iterations = options.lockstepIterations
    for subscribers in options.broadcastLockstepCounts {
        var samples: [Double] = []
        for _ in 0..<options.repetitions {
            let (tally, seconds) = await measureSeconds {
                await Scenarios.deliveryCell(.lockstep, subscribers: subscribers, elements: 100 * iterations)
            }
            record("broadcast lockstep N=\(subscribers)", tally.failures)
            samples.append(seconds / Double(iterations) * 1e3)
        }
        figure(
            "broadcast", "lockstep", unit: "ms/100 sends", implementation: "lockstep", subscribers: subscribers,
            elements: 100 * iterations, samples: samples)
        lockstep.add(["\(subscribers)", "\(iterations)", fmt(median(samples))])
    }
    stamp(lockstep.render())
}
