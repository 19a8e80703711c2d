// compare's scenarios fanout (fan-out throughput, `--only fanout`) and subject (subject fan-out,
// `--only subject`).

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - fanout: fan-out throughput

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

        \(Options.heading("fanout"))
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
        figure(
            "fanout", "base-rate", unit: "deliveries/s", implementation: Implementation.base.rawValue,
            subscribers: 1, elements: options.baseElements, samples: rates)
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
            for (implementation, list) in runs.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let labels = [("policy", policy.rawValue)]
                let m = implementation == .saa ? saaElements : elements
                figure(
                    "fanout", "rate", unit: "deliveries/s", implementation: implementation.rawValue,
                    subscribers: subscribers, elements: m, labels: labels, samples: list.map(\.rate))
                if !policy.isLossless {
                    figure(
                        "fanout", "delivered", unit: "fraction", implementation: implementation.rawValue,
                        subscribers: subscribers, elements: m, labels: labels, samples: list.map(\.delivered))
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
        figure(
            "fanout", "opaque-rate", unit: "deliveries/s", implementation: implementation.rawValue,
            subscribers: 1, elements: elements, labels: [("policy", policy.rawValue)], samples: rates)
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

// MARK: - subject: subject fan-out

@MainActor
func runSubject(_ options: Options) async {
    stamp(
        """

        \(Options.heading("subject"))
        One task sends 0..<M, then finishes; N subscribers (registered first), each in its own task,
        must see all M in order. AsyncMulticast: AsyncPassthroughSubject(buffering: .unbounded).
        SAA has no subject: an AsyncStream continuation shared with share(bufferingPolicy: .unbounded)
        (M·N capped as in fanout, marked *). hand-rolled: the same broadcaster's send().
        OC: OpenCombine's PassthroughSubject<Int, Never> with N sinks, sent to synchronously.
        """)
    var table = Table([
        "N", "M", "ours Mdel/s", "SAA Mdel/s", "SAA M", "hand Mdel/s", "OC Mdel/s", "vs SAA", "vs hand", "vs OC",
    ])
    for subscribers in options.subscriberCounts {
        let elements = options.elements(forSubscribers: subscribers)
        let saaElements = options.saaElements(forSubscribers: subscribers, regular: elements)
        var rates: [Implementation: [Double]] = [:]
        for _ in 0..<options.repetitions {
            for implementation in options.selected([.ours, .saa, .handRolled, .openCombine]) {
                let m = implementation == .saa ? saaElements : elements
                let (tally, seconds) = await measureSeconds {
                    await Scenarios.subject(implementation, subscribers: subscribers, elements: m)
                }
                guard let tally else { continue }
                record("subject \(implementation) N=\(subscribers) M=\(m)", tally.failures)
                rates[implementation, default: []].append(Double(tally.deliveries) / seconds)
            }
        }
        for (implementation, list) in rates.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            figure(
                "subject", "rate", unit: "deliveries/s", implementation: implementation.rawValue,
                subscribers: subscribers, elements: implementation == .saa ? saaElements : elements, samples: list)
        }
        let ours = rates[.ours].flatMap(median)
        let saa = rates[.saa].flatMap(median)
        let hand = rates[.handRolled].flatMap(median)
        let openCombine = rates[.openCombine].flatMap(median)
        table.add([
            "\(subscribers)", "\(elements)",
            fmt(ours.map { $0 / 1e6 }), fmt(saa.map { $0 / 1e6 }),
            saaElements == elements ? "\(saaElements)" : "\(saaElements)*",
            fmt(hand.map { $0 / 1e6 }), fmt(openCombine.map { $0 / 1e6 }),
            ratio(ours, saa), ratio(ours, hand), ratio(ours, openCombine),
        ])
    }
    stamp(table.render())
}
