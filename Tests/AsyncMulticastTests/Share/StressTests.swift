// Many subscribers at once, and subscribers joining and leaving (seeded, reproducible choices)
// while the upstream produces. Serialized with the timing-sensitive tests.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("Stress")
    struct StressTests {
        @Test func tenThousandConcurrentSubscribersEachSeeEverything() async throws {
            try await withTimeout(seconds: 120) {
                let count = 10_000
                // More elements than the bound: the producer parks until all 10,000 have read.
                // Kept small so that the test does not monopolize the executor for long.
                let elements = 12
                let shared = (0..<elements).async.share(buffering: .bounded(4))
                let complete = await shared.iterateTogether(count) { iterator in
                    var expected = 0
                    while let element = await iterator.next() {
                        guard element == expected else { return false }
                        expected += 1
                    }
                    return expected == elements
                }.filter { $0 }.count
                #expect(complete == count)
                #expect(shared.subscriberCount == 0)
            }
        }

        /// Subscribers join (from the test's task, while earlier ones read) and leave in three
        /// ways: released after a random number of elements, cancelling their own task, or
        /// cancelled from outside while they wait. Each checks what it saw.
        @Test(arguments: [
            (SharedBufferingPolicy.bounded(4), UInt64(1)), (.bounded(1), 2), (.unbounded, 3),
            (.bufferingNewest(2), 4), (.bufferingNewest(0), 5), (.bufferingOldest(2), 6),
        ])
        func subscribersJoinAndLeaveWhileTheUpstreamProduces(policy: SharedBufferingPolicy, seed: UInt64) async throws {
            try await withTimeout(seconds: 150) {
                let probe = Probe()
                let shared = Instrumented(Counter(), probe: probe).share(buffering: policy)
                var rng = LCG(seed: seed)
                struct Outcome: Sendable {
                    var received: [Int]
                    var wanted: Int?
                }
                var tasks: [Task<Outcome, Never>] = []
                var cancellable: [Int] = []  // indices of tasks that read until cancelled
                for _ in 0..<300 {
                    let mode = rng.next() % 3
                    let wanted = Int(rng.next() % 30) + 1
                    var iterator = shared.makeAsyncIterator()
                    if mode == 2 { cancellable.append(tasks.count) }
                    tasks.append(
                        Task {
                            var received: [Int] = []
                            while mode == 2 || received.count < wanted, let element = await iterator.next() {
                                received.append(element)
                            }
                            if mode == 1 {
                                // A cancelled task gets at most the elements its iterator had
                                // already taken (its batch: at most 64), then nil.
                                withUnsafeCurrentTask { $0?.cancel() }
                                var afterCancel: [Int] = []
                                while afterCancel.count <= 64, let element = await iterator.next() {
                                    afterCancel.append(element)
                                }
                                #expect(afterCancel.count <= 64, "after its cancellation: \(afterCancel)")
                                #expect(
                                    isStrictlyIncreasing(received + afterCancel),
                                    "after its cancellation: \(afterCancel)")
                            }
                            return Outcome(received: received, wanted: mode == 2 ? nil : wanted)
                        })
                    if !cancellable.isEmpty, rng.next() % 3 == 0 {
                        let victim = cancellable.remove(at: Int(rng.next() % UInt64(cancellable.count)))
                        tasks[victim].cancel()
                    }
                    if rng.next() % 2 == 0 { await Task.yield() }
                }
                for victim in cancellable { tasks[victim].cancel() }

                let lossless: Bool
                switch policy {
                case .bounded, .unbounded, .evicting: lossless = true
                case .bufferingNewest, .bufferingOldest: lossless = false
                }
                for (index, task) in tasks.enumerated() {
                    let outcome = await task.value
                    if let wanted = outcome.wanted {
                        #expect(outcome.received.count == wanted, "subscriber \(index)")
                    }
                    if lossless {
                        #expect(isConsecutive(outcome.received), "subscriber \(index): \(outcome.received)")
                    } else {
                        #expect(isStrictlyIncreasing(outcome.received), "subscriber \(index): \(outcome.received)")
                    }
                }
                #expect(shared.subscriberCount == 0)
                try await waitUntil("every upstream iteration to end") { probe.liveIterators == 0 }
                #expect(shared.storage.upstreamState == .idle)
                #expect(shared.storage.bufferedCount == 0)
                let stats = probe.snapshot
                #expect(stats.iterators >= 1)
                #expect(stats.maxLiveIterators == 1, "never two base iterators at once")
            }
        }
    }
}
