// The "topics" scenario (`--only topics`, never by default): one feed fanned out by key
// (TopicCells.swift). For 10,000 keys × 1 subscriber and 100 keys × 100 subscribers:
// deliveries per second (wall) and CPU per delivery (getrusage, every thread) of topics of
// one upstream (`share(by:)`), topics of subjects, and one share() filtered in every
// subscriber; then joins and leaves per second, two joining tasks at once, on one live key
// and on 100,000, and the heap bytes of an idle key with its one subscriber. The instruction counts
// per delivery are `delivery-cell topics-keyed|topics-filtered KEYS PER_KEY ELEMENTS` under
// callgrind (the Benchmarks README, "topics").

import MulticastScenarios

extension Options {
    /// Elements per topics cell: the feed's length for the keyed ways; the filtered way wakes
    /// every subscriber for every element, so it gets fewer (its rate is per delivery too).
    func topicElements(_ way: TopicCells.Way) -> Int {
        switch (mode, way) {
        case (.smoke, .filtered): 1_000
        case (.smoke, _): 20_000
        case (.quick, .filtered): 5_000
        case (.quick, _): 200_000
        case (.full, .filtered): 20_000
        case (.full, _): 1_000_000
        }
    }

    var topicJoins: Int { mode == .smoke ? 2_000 : 100_000 }
    /// The live keys of the churn table's many-keys rows (the other row has one key).
    var topicChurnKeys: Int { mode == .smoke ? 10_000 : 100_000 }
}

@MainActor
func runTopics(_ options: Options) async {
    let shapes = [(keys: 10_000, perKey: 1), (keys: 100, perKey: 100)]
    stamp(
        """

        \(Options.heading("topics"))
        One feed over random keys, each subscriber in its own task receiving exactly its key's elements in
        order. keyed: feed.share(by: \\.key), .bounded(64); subjects: AsyncSubjectTopics, .unbounded;
        filtered: one share(buffering: .bounded(64)) and a key test in every subscriber. A delivery is an
        element reaching a subscriber of its key. M deliveries/s (wall) and ns of CPU per delivery (the
        whole process), medians of \(options.repetitions).
        """)
    guard options.implementations.contains(.ours) else {
        stamp("(skipped: --impls does not select ours)")
        return
    }
    var table = Table(["keys × subscribers", "way", "elements", "M del/s", "CPU ns/del"])
    for shape in shapes {
        for way in TopicCells.Way.allCases {
            let elements = options.topicElements(way)
            var rates: [Double] = []
            var costs: [Double] = []
            for _ in 0..<options.repetitions {
                let (tally, cpu, wall) = await measureCPUSeconds {
                    await TopicCells.run(way, keys: shape.keys, perKey: shape.perKey, elements: elements)
                }
                record("topics \(way.rawValue) \(shape.keys)x\(shape.perKey)", tally.failures)
                rates.append(Double(tally.deliveries) / wall / 1e6)
                costs.append(cpu / Double(Swift.max(1, tally.deliveries)) * 1e9)
            }
            let label = "\(shape.keys) keys × \(shape.perKey)"
            figure(
                "topics", "deliveries \(label)", unit: "M deliveries/s", implementation: way.rawValue,
                subscribers: shape.keys * shape.perKey, elements: elements, samples: rates)
            table.add([
                "\(grouped(shape.keys)) × \(shape.perKey)", way.rawValue, grouped(elements),
                fmt(median(rates)), fmt(median(costs)),
            ])
        }
    }
    stamp(table.render())

    var churn = Table(["live keys", "way", "joins", "k joins+leaves/s", "bytes per idle key"])
    let joins = options.topicJoins
    for keys in [1, options.topicChurnKeys] {
        for way in [TopicCells.Way.keyed, .subjects] {
            var samples: [Double] = []
            for _ in 0..<options.repetitions {
                let (failures, seconds) = await TopicCells.churn(way, keys: keys, joins: joins)
                record("topics churn \(way.rawValue) \(keys) keys", failures)
                samples.append(Double(joins) / seconds / 1e3)
            }
            figure(
                "topics", "churn \(keys) keys", unit: "k joins/s", implementation: way.rawValue, subscribers: keys,
                elements: joins, samples: samples)
            let bytes = keys > 1 ? await TopicCells.bytesPerKey(way, keys: keys) : nil
            churn.add([grouped(keys), way.rawValue, grouped(joins), fmt(median(samples)), fmt(bytes, 0)])
        }
    }
    stamp(churn.render())
}
