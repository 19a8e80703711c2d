// `.bufferingNewest` lanes drop lazily (`Lane.minCursor`, `Lane.settle()`): a send moves no
// histogram cell, and a stale cell is gathered at the window start only when a member reads
// or leaves, or once it is `settleDistance` behind the tail. The seeded model test rarely
// sends that many elements in a row; these runs send long bursts (past the settle distance,
// several times) between the joins, reads, leaves and cancelled connections, with several
// `.bufferingNewest` lanes beside lossless ones, and check after every step, besides what
// the model test checks (`ModelRun.compare`):
// - what a dropping subscriber holds (`backlog(of:)`, count and high-water mark) never
//   exceeds its limit;
// - a dropping lane's stored counts never reach further back than its settle distance;
// - with only dropping lanes, the shared buffer holds no more than the replay window and
//   the largest limit.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("Lazy dropping lanes: long bursts against a reference model")
    struct LazyDroppingLaneModelTests {
        /// Indices into `ModelRun.policies`: the dropping ones (bufferingNewest(0), (1), (3),
        /// (6), bufferingOldest(0)), then the others.
        static let dropping = [5, 6, 7, 13, 8]
        static let others = [0, 1, 3, 4, 9, 11, 12]

        static func config(seed: UInt64) -> ModelConfig {
            var rng = LCG(seed: seed ^ 0xB0B5)
            let mode = [UpstreamMode.automatic, .manual, .push][Int(rng.next() % 3)]
            let replay = [0, 1, 2, 3, 5, 70][Int(rng.next() % 6)]
            let policy = ModelRun.policies[Self.dropping[Int(rng.next() % UInt64(Self.dropping.count))]]
            return ModelConfig(
                mode: mode, replay: replay, keepAlive: mode == .automatic ? .forever : .off,
                defaultPolicy: policy, mixedPolicies: true)
        }

        /// Joins (mostly dropping policies, half of them lag-reporting), reads, leaves,
        /// connections cancelled and made again, and bursts of up to 200 elements.
        static func steps(seed: UInt64, config: ModelConfig, count: Int, onlyDropping: Bool) -> [ModelStep] {
            var rng = LCG(seed: seed)
            var steps: [ModelStep] = [.connect]
            func pick() -> Int { Int(rng.next() % 64) }
            while steps.count < count {
                switch Int(rng.next() % 100) {
                case 0..<14:
                    let pool = onlyDropping || rng.next() % 3 != 0 ? Self.dropping : Self.others
                    let policy = rng.next() % 5 == 0 ? -1 : pool[Int(rng.next() % UInt64(pool.count))]
                    steps.append(.join(policy: policy, reportsGaps: rng.next() % 2 == 0))
                case 14..<44: steps.append(.read(pick: pick(), wait: rng.next() % 3 == 0))
                case 44..<52: steps.append(.leave(pick: pick()))
                case 52..<62:
                    let burst = [1, 3, 10, 64, 66, 70, 140, 200][Int(rng.next() % 8)]
                    steps += Array(repeating: ModelStep.produce, count: burst)
                case 62..<80: steps.append(.produce)
                case 80..<86: steps.append(.waitForRoom(pick: pick(), park: rng.next() % 2 == 0))
                case 86..<90 where config.mode == .manual: steps.append(.connect)
                case 90..<93 where config.mode == .manual: steps.append(.disconnect(stale: false))
                case 93: steps.append(.finish(fail: false))
                default: steps.append(.read(pick: pick(), wait: false))
                }
            }
            return steps
        }

        /// What `ModelRun.compare` does not check: see the top of the file.
        static func checkDropping(_ run: ModelRun) throws(ModelFailure) {
            let machine = run.machine
            for (k, sub) in run.subscribers.enumerated() {
                guard let keep = sub.policy.dropLimit, case .bufferingNewest = sub.policy else { continue }
                guard let backlog = machine.backlog(of: sub.id) else { continue }
                try run.check(
                    backlog.count <= keep && backlog.highWaterMark <= keep,
                    "subscriber #\(k) (\(sub.policy)) holds \(backlog.count), at most \(backlog.highWaterMark)")
                // Its iterator's batch is handed over, not held (what the policy has not
                // dropped of it is still in `pending`).
                let inBatch = sub.held.live(tail: machine.heldBatchTail(of: sub.id)).count
                try run.check(
                    backlog.count + inBatch == sub.pending.count,
                    "subscriber #\(k) (\(sub.policy)) holds \(backlog.count) and \(inBatch) in its batch, expected \(sub.pending.count)"
                )
            }
            var allDropping = true
            var largestKeep = 0
            for lane in machine.lanes {
                guard case .dropOldest(let keep) = lane.overflow else {
                    allDropping = false
                    continue
                }
                largestKeep = Swift.max(largestKeep, keep)
                try run.check(
                    machine.tail - lane.counts.startIndex <= lane.settleDistance,
                    "lane \(lane.policy): counts from \(lane.counts.startIndex), tail \(machine.tail)")
            }
            if allDropping {
                let replayed = Swift.min(machine.replayCount, machine.tail - machine.replayFloor)
                try run.check(
                    machine.elements.count <= Swift.max(replayed, largestKeep),
                    "\(machine.elements.count) elements stored, replay \(replayed), largest keep \(largestKeep)")
            }
        }

        static func run(_ steps: [ModelStep], config: ModelConfig) async -> ModelFailure? {
            await ModelRun.run(steps, config: config, alsoCheck: Self.checkDropping)
        }

        @Test("long bursts agree with per-subscriber queues", arguments: [false, true])
        func agreesWithTheModel(onlyDropping: Bool) async {
            for seed in UInt64(0)..<150 {
                let config = Self.config(seed: seed)
                let steps = Self.steps(seed: seed, config: config, count: 600, onlyDropping: onlyDropping)
                guard let failure = await Self.run(steps, config: config) else { continue }
                let (best, bestFailure) = await shortestFailing(steps, config: config, failure: failure) {
                    await Self.run($0, config: $1)
                }
                Issue.record(
                    """
                    seed \(seed), \(config): \(bestFailure)
                    shortest failing sequence (\(best.count) steps):
                    \(best.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
                    """)
                return
            }
        }
    }
}

@Suite("Lazy dropping lanes: the settle distance")
struct LazyDroppingLaneSettleDistanceTests {
    @Test(
        "a huge .bufferingNewest limit has a settle distance no shorter than the limit: it saturates, never wraps",
        arguments: [Int.max, Int.max - 1, Int.max / 2 + 1, Int.max / 2, 1 << 40, 64, 3, 0])
    func settleDistanceSaturates(keep: Int) {
        var machine = Machine(policy: .bufferingNewest(keep), replay: 0, mode: .push)
        let stalled = machine.subscriberJoined()
        let lane = machine.lanes[0]
        // `append` gathers the stale cells once the oldest is this far behind: a distance
        // below the limit (a wrapped, negative one) makes every element call `settle()`.
        #expect(lane.settleDistance >= keep)
        #expect(lane.settleDistance == (keep > Int.max / 2 ? Int.max : keep + Swift.max(keep, 64)))
        for value in 0..<100 { _ = machine.produce(value, epoch: 0) }
        #expect(machine.drain(stalled) == Array((0..<100).suffix(keep)))
        #expect(machine.invariantViolation() == nil)
    }
}
