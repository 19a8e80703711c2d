// compare's scenarios latency (wake-up latency, `--only latency`) and slowproducer (slow-producer CPU,
// `--only slowproducer`). The measuring code is in MulticastScenarios (Latency.swift,
// SlowProducer.swift); this file runs it interleaved and prints the tables.

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension Options {
    static let latencyScenarios = ["latency", "slowproducer"]

    /// Elements measured per latency cell (each implementation, each N).
    var latencySamples: Int { mode == .smoke ? 40 : mode == .quick ? 2_000 : 10_000 }
    /// The samples are taken in this many blocks per cell, the cells' blocks interleaved.
    var latencyRounds: Int { mode == .smoke ? 1 : mode == .quick ? 4 : 10 }
    var latencySubscriberCounts: [Int] { [1, 64] }
    /// Elements per slow-producer run (one every 100 µs).
    var slowProducerElements: Int { mode == .smoke ? 200 : mode == .quick ? 3_000 : 10_000 }
    var slowProducerRepetitions: Int { mode == .smoke ? 1 : mode == .quick ? 3 : 5 }
}

// MARK: - Scheduling class

/// Puts the process under SCHED_FIFO 10 when possible: it already runs real-time
/// (`chrt -f 10 …`), or compare switches every thread itself (root or CAP_SYS_NICE).
/// COMPARE_REALTIME=0 keeps the normal class. Prints which class is in effect; returns
/// whether compare switched, so that `leaveRealtime` switches back to SCHED_OTHER.
func enterRealtime() -> Bool {
    let optOut = getenv("COMPARE_REALTIME").map { String(cString: $0) } == "0"
    if Scheduling.currentThreadIsRealtime {
        stamp("scheduling: the process already runs \(Scheduling.currentThread()) (e.g. under chrt): real-time")
    } else if optOut {
        stamp(
            "scheduling: \(Scheduling.currentThread()) (COMPARE_REALTIME=0): NOT real-time, other load shows in the tails"
        )
    } else if let failure = Scheduling.setForAllThreads(realtimePriority: 10) {
        _ = Scheduling.setForAllThreads(realtimePriority: nil)
        stamp(
            "scheduling: could not switch to SCHED_FIFO (\(failure)): \(Scheduling.currentThread()), NOT real-time;"
                + " run as root or under `chrt -f 10`")
    } else {
        stamp("scheduling: compare switched all its threads to SCHED_FIFO 10 for this scenario: real-time")
        return true
    }
    return false
}

func leaveRealtime(_ switched: Bool) {
    guard switched else { return }
    if let failure = Scheduling.setForAllThreads(realtimePriority: nil) {
        stamp("scheduling: could not switch back to SCHED_OTHER (\(failure))")
    }
}

// MARK: - latency: wake-up latency

@MainActor
func runLatency(_ options: Options) async {
    let rounds = options.latencyRounds
    let perRound = max(1, options.latencySamples / rounds)
    stamp(
        """

        \(Options.heading("latency"))
        Time from send() (subject) or yield (AsyncStream) / from the upstream's next() returning
        the element (share) to a subscriber that is suspended in next() receiving it. A driver
        thread sends one element at a time: it waits until every subscriber is back in next(),
        sleeps 100-150 µs (longer than the 20 µs catch-up spin) so that all are suspended, then
        sends. \(perRound * rounds) elements per cell (plus 10 warm-up per block), in \(rounds) block(s) interleaved
        across implementations. At N = 64 every subscriber's receipt is a sample ("all"), and
        "last" is the last receipt of each element. p50/p99 in microseconds.
        """)
    var results: [Int: [LatencyVariant: LatencyResult]] = [:]
    var observed: Set<String> = []
    let switched = enterRealtime()
    for subscribers in options.latencySubscriberCounts {
        let variants = LatencyVariant.allCases.filter {
            options.implementations.contains($0.implementation) && (subscribers == 1 || $0 != .stream)
        }
        // Warm-up: first-use costs (metadata, thread pool) out of the samples.
        for variant in variants {
            _ = await Scenarios.latency(variant, subscribers: subscribers, samples: 20)
        }
        for round in 0..<rounds {
            let shift = round % max(1, variants.count)
            for variant in Array(variants[shift...] + variants[..<shift]) {
                let result = await Scenarios.latency(variant, subscribers: subscribers, samples: perRound)
                record("latency \(variant) N=\(subscribers)", result.failures)
                observed.formUnion(result.schedulingClasses)
                results[subscribers, default: [:]][variant, default: LatencyResult()].append(result)
            }
        }
        stamp("  done N=\(subscribers)")
    }
    leaveRealtime(switched)
    stamp("scheduling classes seen by the driver and the subscribers: \(observed.sorted().joined(separator: ", "))")
    figureNote("latency-scheduling", observed.sorted().joined(separator: ", "))
    // Sorted once: every percentile below sorts its input again, which is linear on sorted input.
    for (n, cells) in results {
        for (variant, var result) in cells {
            result.fromSend.sort()
            result.lastFromSend.sort()
            result.fromProduced.sort()
            result.lastFromProduced.sort()
            results[n]?[variant] = result
        }
    }

    func us(_ values: [Double], _ q: Double) -> Double? { percentile(values, q).map { $0 / 1e3 } }
    var table = Table([
        "N", "implementation", "measured from", "p50 us", "p90 us", "p99 us", "last p50 us", "last p99 us",
    ])
    for subscribers in options.latencySubscriberCounts {
        for variant in LatencyVariant.allCases {
            guard let result = results[subscribers]?[variant], !result.fromSend.isEmpty else { continue }
            let origins: [(String, [Double], [Double])] =
                variant.hasUpstream
                ? [
                    ("yield", result.fromSend, result.lastFromSend),
                    ("upstream next()", result.fromProduced, result.lastFromProduced),
                ]
                : [(variant == .stream ? "yield" : "send", result.fromSend, result.lastFromSend)]
            for (origin, all, last) in origins {
                var metrics = [("p50", us(all, 0.5)), ("p90", us(all, 0.9)), ("p99", us(all, 0.99))]
                if subscribers > 1 { metrics += [("last-p50", us(last, 0.5)), ("last-p99", us(last, 0.99))] }
                for (metric, value) in metrics {
                    guard let value else { continue }
                    figure(
                        "latency", metric, unit: "us", implementation: variant.rawValue, subscribers: subscribers,
                        labels: [("from", origin), ("samples", "\(all.count)")], samples: [value])
                }
                table.add([
                    "\(subscribers)", variant.description, origin,
                    fmt(us(all, 0.5), 1), fmt(us(all, 0.9), 1), fmt(us(all, 0.99), 1),
                    subscribers == 1 ? "" : fmt(us(last, 0.5), 1),
                    subscribers == 1 ? "" : fmt(us(last, 0.99), 1),
                ])
            }
        }
    }
    stamp(table.render())

    // Ratios: "ours vs X" = X's latency / ours (above 1.00x: ours is faster).
    func values(_ n: Int, _ variant: LatencyVariant, produced: Bool = false, last: Bool = false) -> [Double]? {
        guard let result = results[n]?[variant], !result.fromSend.isEmpty else { return nil }
        switch (produced, last) {
        case (false, false): return result.fromSend
        case (false, true): return result.lastFromSend
        case (true, false): return result.fromProduced
        case (true, true): return result.lastFromProduced
        }
    }
    func p(_ samples: [Double]?, _ q: Double) -> Double? { samples.flatMap { percentile($0, q) } }
    var ratios = Table(["N", "ours", "vs", "p50", "p99", "last p50", "last p99"])
    func add(
        _ n: Int, _ ours: String, _ oursValues: [Double]?, _ other: String, _ otherValues: [Double]?,
        oursLast: [Double]? = nil, otherLast: [Double]? = nil
    ) {
        guard oursValues != nil, otherValues != nil else { return }
        ratios.add([
            "\(n)", ours, other,
            ratio(p(otherValues, 0.5), p(oursValues, 0.5)), ratio(p(otherValues, 0.99), p(oursValues, 0.99)),
            n == 1 ? "" : ratio(p(otherLast, 0.5), p(oursLast, 0.5)),
            n == 1 ? "" : ratio(p(otherLast, 0.99), p(oursLast, 0.99)),
        ])
    }
    add(1, "subject send", values(1, .oursSubject), "AsyncStream yield", values(1, .stream))
    add(
        1, "share() from upstream next()", values(1, .oursShare, produced: true), "AsyncStream yield",
        values(1, .stream))
    add(1, "share() from yield", values(1, .oursShare), "AsyncStream yield", values(1, .stream))
    add(1, "subject send", values(1, .oursSubject), "hand-rolled send", values(1, .handSubject))
    add(1, "share() from yield", values(1, .oursShare), "hand-rolled forward", values(1, .handShare))
    for n in options.latencySubscriberCounts where n > 1 {
        add(
            n, "subject send", values(n, .oursSubject), "hand-rolled send", values(n, .handSubject),
            oursLast: values(n, .oursSubject, last: true), otherLast: values(n, .handSubject, last: true))
        add(
            n, "share() from yield", values(n, .oursShare), "hand-rolled forward", values(n, .handShare),
            oursLast: values(n, .oursShare, last: true), otherLast: values(n, .handShare, last: true))
        add(
            n, "share() from upstream next()", values(n, .oursShare, produced: true), "hand-rolled forward",
            values(n, .handShare, produced: true),
            oursLast: values(n, .oursShare, produced: true, last: true),
            otherLast: values(n, .handShare, produced: true, last: true))
    }
    if !ratios.rows.isEmpty {
        stamp("\nours vs X = X's latency / ours: above 1.00x means AsyncMulticast's subscriber was woken sooner.")
        stamp(ratios.render())
    }

    // The second latency target: p99 at N = 64 within 2x of N = 1 (a quotient of latencies:
    // here below 2.00x is within the target).
    var scaling = Table([
        "implementation", "measured from", "N=1 p99 us", "N", "all p99 us", "all / N=1", "last p99 us", "last / N=1",
    ])
    for n in options.latencySubscriberCounts where n > 1 {
        let rows: [(LatencyVariant, Bool, String)] = [
            (.oursSubject, false, "send"), (.handSubject, false, "send"),
            (.oursShare, false, "yield"), (.oursShare, true, "upstream next()"),
            (.handShare, false, "yield"), (.handShare, true, "upstream next()"),
        ]
        for (variant, produced, origin) in rows {
            guard let one = p(values(1, variant, produced: produced), 0.99),
                let all = p(values(n, variant, produced: produced), 0.99),
                let last = p(values(n, variant, produced: produced, last: true), 0.99)
            else { continue }
            scaling.add([
                variant.description, origin, fmt(one / 1e3, 1), "\(n)", fmt(all / 1e3, 1),
                fmt(all / one, 2) + "x", fmt(last / 1e3, 1), fmt(last / one, 2) + "x",
            ])
        }
    }
    if !scaling.rows.isEmpty {
        stamp("\np99 at N = 64 over p99 at N = 1, same implementation (the target: within 2x):")
        stamp(scaling.render())
    }
}

// MARK: - slowproducer: slow-producer CPU

@MainActor
func runSlowProducer(_ options: Options) async {
    let elements = options.slowProducerElements
    let repetitions = options.slowProducerRepetitions
    stamp(
        """

        \(Options.heading("slowproducer"))
        A producer thread offers \(elements) Ints, one every 100 µs (absolute deadlines), to one
        subscriber (a task iterating with for-await), which is suspended between elements.
        CPU = getrusage(RUSAGE_SELF) user+sys of the whole process over the run; "producer" is
        the producer thread alone (same loop in every variant; only yield vs send differs);
        "rest" = CPU - producer, the consuming side. Median of \(repetitions) runs, interleaved.
        cs = voluntary context switches (thread sleeps) of the process per element.
        (d), for context: the hand-rolled broadcaster forwarding the same stream through a task, as
        share() does with its upstream task.
        """)
    let variants = SlowProducerVariant.allCases.filter { options.implementations.contains($0.implementation) }
    var runs: [SlowProducerVariant: [SlowProducerResult]] = [:]
    let switched = enterRealtime()
    for variant in variants {  // warm-up
        _ = await Scenarios.slowProducer(variant, elements: min(200, elements))
    }
    for repetition in 0..<repetitions {
        let shift = repetition % max(1, variants.count)
        for variant in Array(variants[shift...] + variants[..<shift]) {
            let result = await Scenarios.slowProducer(variant, elements: elements)
            record("slow producer \(variant)", result.failures)
            runs[variant, default: []].append(result)
        }
    }
    leaveRealtime(switched)
    figureNote(
        "slowproducer-scheduling", switched || Scheduling.currentThreadIsRealtime ? "SCHED_FIFO 10" : "SCHED_OTHER")
    for (variant, results) in runs.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
        let per = Double(elements)
        let series: [(String, String, (SlowProducerResult) -> Double)] = [
            ("cpu", "us/element", { $0.cpuNanosPerElement / 1e3 }),
            ("producer", "us/element", { Double($0.producerCPUNanos) / Double($0.elements) / 1e3 }),
            ("switches", "per element", { Double($0.usage.voluntarySwitches) / per }),
            ("wall", "s", { $0.wallSeconds }),
        ]
        for (metric, unit, value) in series {
            figure(
                "slowproducer", metric, unit: unit, implementation: variant.rawValue, elements: elements,
                samples: results.map(value))
        }
    }
    func med(_ variant: SlowProducerVariant, _ value: (SlowProducerResult) -> Double) -> Double? {
        guard let results = runs[variant] else { return nil }
        var values: [Double] = []
        for result in results { values.append(value(result)) }
        return median(values)
    }
    let streamCPU = med(.stream) { $0.cpuNanosPerElement }
    var table = Table([
        "variant", "wall s", "CPU us/elem", "producer us/elem", "rest us/elem", "cs/elem", "CPU / (a)",
        "ours vs (a)",
    ])
    for variant in variants {
        let cpu = med(variant) { $0.cpuNanosPerElement }
        table.add([
            variant.description,
            fmt(med(variant) { $0.wallSeconds }, 3),
            fmt(cpu.map { $0 / 1e3 }, 2),
            fmt(med(variant) { Double($0.producerCPUNanos) / Double($0.elements) / 1e3 }, 2),
            fmt(med(variant) { $0.consumerNanosPerElement / 1e3 }, 2),
            fmt(med(variant) { Double($0.usage.voluntarySwitches) / Double($0.elements) }, 2),
            variant == .stream ? "" : ratio(cpu, streamCPU),
            variant == .stream || variant.implementation != .ours ? "" : ratio(streamCPU, cpu),
        ])
    }
    stamp(table.render())
    stamp(
        """
        (CPU / (a): process CPU relative to the plain AsyncStream; the target for share() is at most
         1.10x. "ours vs (a)" is the same the other way round, the tool's convention: above 1.00x = less CPU.)
        """)
    if let share = med(.oursShare, { $0.cpuNanosPerElement }),
        let hand = med(.handShare, { $0.cpuNanosPerElement })
    {
        stamp("(b) share() vs (d) hand-rolled forward(): \(ratio(hand, share)) (above 1.00x: share() used less CPU)")
    }
}
