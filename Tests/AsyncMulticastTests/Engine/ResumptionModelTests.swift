// The machine's decision when a subscriber resumes after a position
// (`subscriberResumed(after:policy:connectRule:)`), against a reference model, on seeded
// random runs: sends, replay resets (an expiry), plain joins, resumptions after positions
// before, within and past the history, reads and leaves, in any order. The model keeps the
// numbering and the history's start (the latest `replay` elements, from the last reset on);
// after every step the machine's invariants hold and every lossless subscriber will still
// receive exactly what the model says: its resumed history, then what was sent after it
// joined, each position once.

import Testing

@testable import AsyncMulticast

@Suite("Resumption model: where a resumed subscriber starts and what its gap is", .timeLimit(.minutes(3)))
struct ResumptionModelTests {
    /// The reference: positions are counted here, the history is the replay window from the
    /// last reset, and a subscriber is the queue of positions it will still receive.
    struct Model {
        let replay: Int
        var tail = 0
        var floor = 0
        var queues: [SubscriberID: [Int]] = [:]
        /// The lossless subscribers, in the order they joined (a dictionary's order changes
        /// with each process).
        var lossless: [SubscriberID] = []

        var historyStart: Int { Swift.max(self.tail - self.replay, self.floor, 0) }

        /// Where a subscriber resuming after `position` under a policy holding at most `keep`
        /// starts, and its gap.
        func resumption(after position: Int?, keep: Int?) -> (first: Int, gap: Range<Int>) {
            var first = self.historyStart
            if let position { first = Swift.max(first, Swift.min(position + 1, self.tail)) }
            if let keep { first = Swift.max(first, self.tail - keep) }
            guard let position, position + 1 < first else { return (first, first..<first) }
            return (first, (position + 1)..<first)
        }
    }

    static let policies: [SharedBufferingPolicy] = [
        .unbounded, .bounded(1_000), .evicting(1_000), .bufferingNewest(2), .bufferingOldest(3),
    ]

    static func keep(of policy: SharedBufferingPolicy) -> Int? {
        switch policy {
        case .bufferingNewest(let keep), .bufferingOldest(let keep): return keep
        default: return nil
        }
    }

    @Test("a resumed subscriber starts where the model says, with its gap, and then loses and repeats nothing")
    func resumptionsMatchTheModel() async throws {
        for seed in UInt64(1)...300 {
            var random = LCG(seed: seed)
            let replay = [0, 1, 3, 8][Int(seed % 4)]
            var machine = Machine(policy: .unbounded, replay: replay, mode: .push)
            var model = Model(replay: replay)
            var dropping: [SubscriberID] = []
            for step in 0..<120 {
                let context = "seed \(seed), step \(step)"
                switch Int.random(in: 0..<10, using: &random) {
                case 0, 1, 2, 3:
                    let value = model.tail
                    guard case .proceed = machine.produce(value, epoch: Machine.pushEpoch) else {
                        Issue.record("\(context): the send of \(value) was refused")
                        return
                    }
                    model.tail += 1
                    for id in model.queues.keys { model.queues[id]!.append(value) }
                case 4:
                    machine.replayCacheReset()
                    model.floor = model.tail
                case 5, 6:
                    let policy = Self.policies[Int.random(in: 0..<Self.policies.count, using: &random)]
                    let choice = Int.random(in: 0..<4, using: &random)
                    let position: Int? =
                        choice == 0 ? nil : Int.random(in: -1...(model.tail + 1), using: &random)
                    let expected = model.resumption(after: position, keep: Self.keep(of: policy))
                    let resumption = machine.subscriberResumed(after: position, policy: policy, connectRule: .never)
                    #expect(
                        resumption.first == expected.first && resumption.gap == expected.gap,
                        "\(context): after \(position as Any) with \(policy), tail \(model.tail), history from \(model.historyStart)"
                    )
                    #expect(
                        machine.undelivered(resumption.id) == Array(expected.first..<model.tail),
                        "\(context): the resumed history (positions are the elements)")
                    if Self.keep(of: policy) == nil {
                        model.queues[resumption.id] = Array(expected.first..<model.tail)
                        model.lossless.append(resumption.id)
                    } else {
                        dropping.append(resumption.id)
                    }
                case 7, 8:
                    guard let id = model.lossless.randomElement(using: &random) else { continue }
                    let count = Int.random(in: 0..<4, using: &random)
                    for _ in 0..<count {
                        guard case .element(let value) = machine.take(id) else { break }
                        #expect(value == model.queues[id]!.first, "\(context): read \(value)")
                        model.queues[id]!.removeFirst()
                    }
                default:
                    if !model.lossless.isEmpty {
                        let id = model.lossless.remove(at: Int.random(in: 0..<model.lossless.count, using: &random))
                        _ = machine.subscriberLeft(id)
                        model.queues[id] = nil
                    }
                    if let id = dropping.popLast() { _ = machine.subscriberLeft(id) }
                }
                if let violation = machine.invariantViolation() {
                    Issue.record("\(context): invariant: \(violation)")
                    return
                }
                for (id, queue) in model.queues where machine.undelivered(id) != queue {
                    Issue.record("\(context): \(id) will receive \(machine.undelivered(id)), the model says \(queue)")
                    return
                }
            }
            if seed % 20 == 0 { await Task.yield() }
        }
    }
}
