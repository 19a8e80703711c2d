// package-benchmark suite for AsyncMulticast, swift-async-algorithms (SAA) and
// a hand-rolled broadcaster. Run from the Benchmarks/ folder:
//
//     swift package benchmark                                # everything
//     swift package benchmark --filter 'FanOut/ours.*'       # a subset (regex)
//     MULTICAST_BENCH_SMOKE=1 swift package benchmark        # 3 iterations each, small sizes (CI smoke)
//
// Absolute numbers on a shared machine drift; for side-by-side ratios use
// `swift run -c release compare`.

import Benchmark
import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// MULTICAST_BENCH_SMOKE=1: every benchmark runs at most 3 iterations on small sizes.
let smoke: Bool = {
    guard let value = getenv("MULTICAST_BENCH_SMOKE") else { return false }
    let text = String(cString: value)
    return !text.isEmpty && text != "0"
}()

enum Metric {
    static let deliveries = BenchmarkMetric.custom("deliveries/s", polarity: .prefersLarger, useScalingFactor: false)
    static let joins = BenchmarkMetric.custom("joins/s", polarity: .prefersLarger, useScalingFactor: false)
    static let cancelToReturn = BenchmarkMetric.custom(
        "cancel->return (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    static let cancelToUpstreamEnd = BenchmarkMetric.custom(
        "cancel->upstream end (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
}

/// Short names used in benchmark names (the filter regexes match these).
func name(_ implementation: Implementation) -> String {
    switch implementation {
    case .ours: "ours"
    case .saa: "saa"
    case .handRolled: "hand"
    case .base: "base"
    case .openCombine: "opencombine"  // only in `compare` (cost scenarios)
    }
}

/// The policy as the implementation spells it; unique per (implementation, policy).
func name(_ implementation: Implementation, _ policy: BenchPolicy) -> String {
    switch (implementation, policy) {
    case (.ours, _): policy.description
    case (.saa, _): policy.saaName
    // AsyncStream has no back-pressure: the .bounded(64) cell runs .unbounded streams.
    case (.handRolled, .bounded64): ".bounded(64)->.unbounded"
    case (.handRolled, _): policy.handRolledName
    case (.base, _), (.openCombine, _): ""
    }
}

/// Reports a wrong sequence. package-benchmark only lists failed benchmarks at the
/// end of a run (exit code 0), so in smoke mode a failure also ends the process,
/// which makes `swift package benchmark` exit non-zero.
func check(_ benchmark: Benchmark, _ failures: [String]) {
    guard let first = failures.first else { return }
    let description = first + (failures.count > 1 ? " (+\(failures.count - 1) more)" : "")
    if smoke {
        fatalError("\(benchmark.name): \(description)")
    }
    if benchmark.failureReason == nil {
        benchmark.error(description)
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock],
        warmupIterations: smoke ? 0 : 1,
        maxDuration: .seconds(smoke ? 1 : 2),
        maxIterations: smoke ? 3 : 1_000
    )
    let fewIterations = smoke ? 3 : 10

    // MARK: 1. Fan-out throughput
    // Deliveries per iteration: M·N. SAA's share() costs O(N) per delivery, so its
    // M·N is capped lower (the M is part of the benchmark name).
    let subscriberCounts = smoke ? [1, 16] : [1, 4, 16, 64, 256, 1024]
    let deliveriesPerIteration = smoke ? 4_000 : 262_144
    let saaDeliveriesPerIteration = smoke ? 2_000 : 32_768
    func elements(_ implementation: Implementation, _ subscribers: Int) -> Int {
        let regular = max(256, deliveriesPerIteration / subscribers)
        return implementation == .saa ? min(regular, max(64, saaDeliveriesPerIteration / subscribers)) : regular
    }
    let fanOutConfiguration = Benchmark.Configuration(metrics: [.wallClock, .mallocCountTotal, Metric.deliveries])

    /// One N = 1 iteration: delivered elements per second, and a failed check on a wrong sequence.
    func measureDeliveries(_ benchmark: Benchmark, _ run: () async -> FanOutTally) async {
        let start = monotonicNanos()
        let tally = await run()
        benchmark.measurement(
            Metric.deliveries, tally.deliveries * 1_000_000_000 / Int(max(1, monotonicNanos() - start)))
        check(benchmark, tally.failures)
    }
    Benchmark("FanOut/base (floor) N=1 M=\(deliveriesPerIteration)", configuration: fanOutConfiguration) { benchmark in
        await measureDeliveries(benchmark) {
            await Scenarios.fanOut(.base, policy: .unbounded, subscribers: 1, elements: deliveriesPerIteration)
        }
    }
    // N = 1 over an upstream whose next() is out of line: the sharing overhead over a real base.
    Benchmark("FanOut/base opaque next() (floor) N=1 M=\(deliveriesPerIteration)", configuration: fanOutConfiguration) {
        benchmark in
        await measureDeliveries(benchmark) {
            await Scenarios.opaqueOverhead(.base, policy: .unbounded, elements: deliveriesPerIteration)!
        }
    }
    for policy in [BenchPolicy.bounded64, .unbounded] {
        Benchmark(
            "FanOut/ours over opaque next() \(name(.ours, policy)) N=1 M=\(deliveriesPerIteration)",
            configuration: fanOutConfiguration
        ) { benchmark in
            await measureDeliveries(benchmark) {
                await Scenarios.opaqueOverhead(.ours, policy: policy, elements: deliveriesPerIteration)!
            }
        }
    }
    for implementation in [Implementation.ours, .saa, .handRolled] {
        for policy in BenchPolicy.allCases {
            for subscribers in subscriberCounts {
                let m = elements(implementation, subscribers)
                var configuration = fanOutConfiguration
                if m * subscribers * (implementation == .saa ? subscribers : 1) > 1_000_000 {
                    configuration.maxIterations = fewIterations
                }
                Benchmark(
                    "FanOut/\(name(implementation)) \(name(implementation, policy)) N=\(subscribers) M=\(m)",
                    configuration: configuration
                ) { benchmark in
                    let start = monotonicNanos()
                    let tally = await Scenarios.fanOut(
                        implementation, policy: policy, subscribers: subscribers, elements: m)
                    let nanos = Int(max(1, monotonicNanos() - start))
                    // M·N / time, also for the lossy policy (where fewer are delivered).
                    benchmark.measurement(Metric.deliveries, m * subscribers * 1_000_000_000 / nanos)
                    check(benchmark, tally.failures)
                }
            }
        }
    }

    // MARK: 2. Subject fan-out
    // AsyncMulticast: AsyncPassthroughSubject; SAA: AsyncStream + share(); hand-rolled: send().
    for implementation in [Implementation.ours, .saa, .handRolled] {
        for subscribers in smoke ? [16] : [1, 16, 256] {
            let m = elements(implementation, subscribers)
            Benchmark(
                "Subject/\(name(implementation)) N=\(subscribers) M=\(m)",
                configuration: fanOutConfiguration
            ) { benchmark in
                let start = monotonicNanos()
                guard let tally = await Scenarios.subject(implementation, subscribers: subscribers, elements: m) else {
                    benchmark.error("subject not available for \(implementation)")
                    return
                }
                let nanos = Int(max(1, monotonicNanos() - start))
                benchmark.measurement(Metric.deliveries, tally.deliveries * 1_000_000_000 / nanos)
                check(benchmark, tally.failures)
            }
        }
    }

    // MARK: 3. Join/leave churn
    let joins = smoke ? 100 : 2_000
    for implementation in [Implementation.ours, .saa, .handRolled] {
        Benchmark(
            "Churn/\(name(implementation)) \(joins) joins x 3 elements",
            configuration: .init(metrics: [.wallClock, .mallocCountTotal, Metric.joins], maxIterations: smoke ? 3 : 50)
        ) { benchmark in
            guard let result = await Scenarios.churn(implementation, joins: joins) else { return }
            benchmark.measurement(Metric.joins, Int(result.joinsPerSecond))
            check(benchmark, result.failures)
        }
    }

    // MARK: 4. Idle subscriber memory
    // Measured region: creating the iterators (registration) only; they are
    // released after stopMeasurement(). Divide the malloc metrics by the count.
    // SAA is capped (Scenarios.saaIdleSubscribersCap): releasing its iterators is O(N) each.
    for implementation in [Implementation.ours, .saa, .handRolled] {
        let idleCount = min(
            smoke ? 2_000 : 100_000,
            implementation == .saa ? Scenarios.saaIdleSubscribersCap : .max
        )
        Benchmark(
            "IdleSubscribers/\(name(implementation)) x\(idleCount) (divide malloc metrics by \(idleCount))",
            configuration: .init(
                metrics: [.wallClock, .mallocCountTotal, .mallocBytesCount],
                maxIterations: fewIterations
            )
        ) { benchmark in
            _ = Scenarios.idle(implementation, subscribers: idleCount) {
                benchmark.stopMeasurement()
            }
        }
    }

    // MARK: 5. Cancellation latency
    // One sample per iteration; the percentiles are over iterations.
    for implementation in [Implementation.ours, .saa, .handRolled, .base] {
        Benchmark(
            "Cancellation/\(name(implementation))",
            configuration: .init(
                metrics: [Metric.cancelToReturn, Metric.cancelToUpstreamEnd],
                maxDuration: .seconds(smoke ? 1 : 5),
                maxIterations: smoke ? 3 : 200
            )
        ) { benchmark in
            let result = await Scenarios.cancellation(
                implementation,
                samples: 1,
                terminationTimeout: implementation == .saa ? .zero : .milliseconds(20)
            )
            if let value = result.cancelToReturn.first { benchmark.measurement(Metric.cancelToReturn, Int(value)) }
            // SAA keeps its upstream running until the share sequence itself is released: no value.
            if let value = result.cancelToUpstreamTermination.first {
                benchmark.measurement(Metric.cancelToUpstreamEnd, Int(value))
            }
            check(benchmark, result.failures)
        }
    }
}
