// compare's scenarios churn (join/leave churn, `--only churn`), memory (idle subscriber memory,
// `--only memory`) and cancel (cancellation latency, `--only cancel`).

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - churn: join/leave churn

@MainActor
func runChurn(_ options: Options) async {
    stamp(
        """

        \(Options.heading("churn"))
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
    for (implementation, list) in rates.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
        let leftover = last[implementation]?.leftoverSubscribers.map { "\($0)" } ?? "n/a"
        figure(
            "churn", "joins", unit: "joins/s", implementation: implementation.rawValue,
            labels: [("leftover", leftover), ("ok", last[implementation]?.ok == true ? "yes" : "no")], samples: list)
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

// MARK: - memory: idle subscriber memory

@MainActor
func runMemory(_ options: Options) async {
    let counts =
        options.idleSubscribers > Scenarios.saaIdleSubscribersCap
        ? [Scenarios.saaIdleSubscribersCap, options.idleSubscribers] : [options.idleSubscribers]
    stamp(
        """

        \(Options.heading("memory"))
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
            let result = Scenarios.idle(implementation, subscribers: count)
            results[implementation] = result
            if let result, let bytes = result.heapBytesPerSubscriber {
                figure(
                    "memory", "heap", unit: "bytes/subscriber", implementation: implementation.rawValue,
                    subscribers: count, labels: [("iterator", "\(result.iteratorStride)")], samples: [bytes])
            }
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

// MARK: - cancel: cancellation latency

@MainActor
func runCancellation(_ options: Options) async {
    stamp(
        """

        \(Options.heading("cancel"))
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
        for (metric, values) in [
            ("return", result.cancelToReturn), ("upstream-end", result.cancelToUpstreamTermination),
        ] {
            for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
                guard let value = percentile(values, q) else { continue }
                figure(
                    "cancel", "\(metric)-\(name)", unit: "us", implementation: implementation.rawValue,
                    labels: [("samples", "\(values.count)")], samples: [value / 1e3])
            }
        }
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
