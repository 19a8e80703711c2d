// Per-subscriber cancellation, the last subscriber out cancelling the upstream, and restarting
// with a fresh base iterator afterwards.

import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    /// "Returns at once" checks, without a clock: the upstream never yields, so the only way
    /// `next()` can return is the cancellation, and what shows that nothing is waited for
    /// first is the state right after `cancel()` returns. A wall-time bound here failed a CI
    /// run: the whole test process stalled for 5 s while other suites loaded both cores.
    @Suite("Cancellation returns at once")
    struct CancellationTiming {
        @Test func cancellingAWaitingSubscriberReturnsNilAtOnceAndKeepsTheOthers() async throws {
            try await withTimeout {
                let (upstream, terminations, shared, a, b, aNext, bNext) = try await startTwoWaitingSubscribers()

                aNext.cancel()
                // The cancellation handler ran inside `cancel()`: the subscriber has left and its
                // continuation was resumed before its task ran again, with no await in between.
                #expect(shared.subscriberCount == 1, "only the cancelled subscriber left")
                #expect(shared.storage.waitingCount == 1, "a's continuation was resumed in cancel()")
                #expect(await aNext.value == nil)
                #expect(terminations.all.isEmpty, "the upstream is untouched")

                upstream.yield(1)
                #expect(await bNext.value == 1)
                #expect(await a.next() == nil, "a left for good")
                upstream.finish()
                #expect(await b.next() == nil)
            }
        }

        @Test func nextOnAnAlreadyCancelledTaskReturnsNilImmediately() async throws {
            try await withTimeout {
                let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
                let shared = stream.share()
                let a = SubscriberBox(shared.makeAsyncIterator())
                let b = SubscriberBox(shared.makeAsyncIterator())
                // Nothing is yielded until it returned: returning at all is the proof.
                let result = await Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    return await a.next()
                }.value
                #expect(result == nil)
                #expect(shared.subscriberCount == 1)
                #expect(shared.storage.upstreamState == .idle, "a cancelled next() starts nothing")
                upstream.yield(1)
                upstream.finish()
                #expect(await b.next() == 1)
                #expect(await a.next() == nil)
            }
        }
    }
}

@Suite("Cancellation and leaving")
struct CancellationTests {
    // MARK: 3. Per-subscriber cancellation

    /// The one rule for a cancelled task's next `next()` (`SharedIterator.next`, the Share
    /// guide's "Per subscriber", the Combine guide's "What behaves differently"): it returns the
    /// elements its iterator had already taken, then `nil`, although more were buffered for it,
    /// and the subscriber has left. An iterator takes, besides the element it returns, up to
    /// `min(n / 2, 64)` ready elements under `.bounded(n)`, `.evicting(n)` or
    /// `.bufferingNewest(n)`, 64 under `.unbounded`, none under `.bufferingOldest`.
    ///
    /// `a` has `produced` elements buffered (the other subscriber read them all, so they were
    /// produced) when it reads 0, so what its iterator takes then depends on the policy only.
    @Test(arguments: [
        (SharedBufferingPolicy.bounded(8), 8, [1, 2, 3, 4]),
        (.evicting(8), 8, [1, 2, 3, 4]),
        (.unbounded, 100, Array(1...64)),
        (.bufferingNewest(8), 8, [1, 2, 3, 4]),
        (.bufferingOldest(8), 8, []),
    ])
    func cancelledTaskGetsExactlyItsTakenBatchThenNil(
        _ policy: SharedBufferingPolicy, produced: Int, taken: [Int]
    ) async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share(buffering: policy)
            let a = SubscriberBox(shared.makeAsyncIterator())
            let b = SubscriberBox(shared.makeAsyncIterator())
            for element in 0..<produced { upstream.yield(element) }
            for element in 0..<produced {
                #expect(await b.next() == element)  // so every one is buffered for a
            }
            #expect(await a.next() == 0)  // its iterator takes `taken` with it
            let afterCancel = await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                var received: [Int] = []
                while let element = await a.next() { received.append(element) }
                return received
            }.value
            #expect(afterCancel == taken, "what its iterator had taken, not the rest of its buffer")
            #expect(shared.subscriberCount == 1)
            #expect(await a.next() == nil, "a left for good")
            upstream.yield(produced)
            upstream.finish()
            #expect(await b.next() == produced)
            #expect(await b.next() == nil)
        }
    }

    @Test func cancelledSubscriberLeavesWhileOthersReceiveEverything() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            let readyToBeCancelled = Signal<Void>()
            var others: [Task<[Int], Never>] = []
            for _ in 0..<3 {
                var iterator = shared.makeAsyncIterator()
                others.append(
                    Task {
                        let received = await iterator.readAll()
                        return received
                    })
            }
            var cancelledIterator = shared.makeAsyncIterator()
            let cancelled = Task { await cancelledIterator.readAll(announcing: 4, to: readyToBeCancelled) }
            for i in 0..<5 { upstream.yield(i) }
            _ = await readyToBeCancelled.next("the subscriber to be cancelled to reach 4")
            cancelled.cancel()
            let cancelledReceived = await cancelled.value
            #expect(cancelledReceived == [0, 1, 2, 3, 4])
            #expect(shared.subscriberCount == 3)
            for i in 5..<10 { upstream.yield(i) }
            upstream.finish()
            for task in others { #expect(await task.value == Array(0..<10)) }
        }
    }

    /// The first subscriber was alone when the upstream started waiting inside the base's
    /// `next()`; a second one joins; then the first one's task is cancelled. That
    /// cancellation must not reach the base (an `AsyncStream` ends for good when its
    /// consumer's task is cancelled): the second subscriber goes on receiving. This is why
    /// a sole subscriber does not pull the base in its own task, which would save a task
    /// hop per element (Benchmarks/README.md, "What bounds N = 1").
    @Test func cancellingTheFirstSubscriberAfterASecondJoinedDoesNotReachTheBase() async throws {
        try await withTimeout {
            let source = FedSource()
            let shared = source.share()
            let first = SubscriberBox(shared.makeAsyncIterator())
            let firstNext = first.startNext()
            await source.control.waitForStart(of: 0)
            try await waitUntil("the upstream waiting inside the base's next()") { source.control.nextCalls == 1 }
            let second = SubscriberBox(shared.makeAsyncIterator())
            let secondNext = try await shared.startWaitingRead(of: second, waiting: 2)

            firstNext.cancel()
            #expect(await firstNext.value == nil)
            #expect(shared.subscriberCount == 1)
            #expect(source.control.end(of: 0) == nil, "the base's iteration is untouched")

            source.control.yield(1, 2)
            #expect(await secondNext.value == 1)
            #expect(await second.next() == 2)
            source.control.finish()
            #expect(await second.next() == nil)
            #expect(source.control.iteratorCount == 1, "one iteration of the base throughout")
        }
    }

    @Test func releasedIteratorLeaves() async throws {
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Int.self)
            let shared = stream.share()
            var neverIterated: SharedIterator? = shared.makeAsyncIterator()
            let iterated = SubscriberBox(shared.makeAsyncIterator())
            let remaining = SubscriberBox(shared.makeAsyncIterator())
            #expect(shared.subscriberCount == 3)
            neverIterated = nil
            #expect(shared.subscriberCount == 2)
            upstream.yield(0)
            #expect(await iterated.next() == 0)
            iterated.release()
            #expect(shared.subscriberCount == 1)
            upstream.yield(1)
            upstream.finish()
            #expect(await remaining.next() == 0)
            #expect(await remaining.next() == 1)
            #expect(await remaining.next() == nil)
            _ = neverIterated
        }
    }

    // MARK: 4. Last one out cancels the upstream

    @Test func lastCancelledSubscriberCancelsTheUpstream() async throws {
        try await withTimeout {
            let (upstream, terminations, shared, a, b, aNext, bNext) = try await startTwoWaitingSubscribers()

            aNext.cancel()
            #expect(await aNext.value == nil)
            // One subscriber remains: the upstream goes on (it still delivers) and is not cancelled.
            upstream.yield(1)
            #expect(await bNext.value == 1)
            #expect(terminations.all.isEmpty)

            let bAgain = try await shared.startWaitingRead(of: b, waiting: 1)
            bAgain.cancel()
            #expect(await bAgain.value == nil)
            // The sequence value is still referenced (used below); the upstream is cancelled anyway.
            let reasons = try await terminations.waitForTermination()
            #expect(reasons == [.cancelled])
            #expect(shared.subscriberCount == 0)
            #expect(shared.storage.upstreamState == .idle)
            #expect(await a.next() == nil, "a cancelled subscriber stays gone")
            #expect(shared.storage.upstreamState == .idle, "and its next() starts nothing")
        }
    }

    /// The same leave while the count is observed: it ends its critical section the general
    /// way (`endCriticalSection`), not the allocation-free way of the test above
    /// (`MulticastStorage.endLeave`), and does all three: resumes the waiter, cancels the
    /// upstream, announces the count.
    @Test func lastCancelledSubscriberWhileTheCountIsObserved() async throws {
        try await withTimeout {
            let (upstream, terminations, shared, a, b, aNext, bNext) = try await startTwoWaitingSubscribers()
            var counts = shared.subscriberCounts.makeAsyncIterator()
            #expect(await counts.next() == 2)
            aNext.cancel()
            #expect(await aNext.value == nil)
            #expect(await counts.next() == 1)
            bNext.cancel()
            #expect(await bNext.value == nil)
            #expect(await counts.next() == 0)
            #expect(try await terminations.waitForTermination() == [.cancelled])
            #expect(shared.storage.upstreamState == .idle)
            upstream.yield(1)  // nobody is left to receive it
            #expect(await a.next() == nil)
            #expect(await b.next() == nil)
        }
    }

    @Test func lastReleasedIteratorCancelsTheUpstream() async throws {
        try await withTimeout {
            let (stream, upstream, terminations) = TerminationRecorder.recordedStream()
            let shared = stream.share()
            let a = SubscriberBox(shared.makeAsyncIterator())
            upstream.yield(0)
            #expect(await a.next() == 0)
            #expect(terminations.all.isEmpty)
            a.release()
            let reasons = try await terminations.waitForTermination()
            #expect(reasons == [.cancelled])
            #expect(shared.subscriberCount == 0)
        }
    }

    @Test func lastOneOutStopsAProducerParkedByBackPressure() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share(buffering: .bounded(1))
            let a = SubscriberBox(shared.makeAsyncIterator())
            var holder: SharedIterator? = shared.makeAsyncIterator()
            #expect(await a.next() == 0)
            // `holder` holds 0: the producer is parked with nothing pulled beyond it.
            #expect(probe.pulls == 1)
            a.release()
            holder = nil
            try await waitUntil("the upstream iteration to end") { probe.liveIterators == 0 }
            #expect(probe.iterators == 1)
            #expect(shared.storage.upstreamState == .idle)
            _ = holder
        }
    }

    @Test func neverIteratedSubscribersNeitherStartNorStopTheUpstream() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share()
            for _ in 0..<3 { _ = shared.makeAsyncIterator() }
            #expect(shared.subscriberCount == 0)
            await letOthersRun()
            #expect(probe.iterators == 0)
        }
    }

    // MARK: 5. Restart

    @Test func handoverWithoutADisconnectKeepsTheIteration() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share()
            var a = shared.makeAsyncIterator()
            for i in 0..<3 { #expect(await a.next() == i) }
            // The new subscriber is created before the old one is released: the count never
            // reaches zero, so the same iteration goes on.
            a = shared.makeAsyncIterator()
            #expect(shared.subscriberCount == 1)
            let next = await a.next()
            #expect(next != nil && next! > 2)
            #expect(probe.iterators == 1)
        }
    }

    @Test func restartAfterTheOldIterationEnded() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share()
            do {
                var a = shared.makeAsyncIterator()
                for i in 0..<3 { #expect(await a.next() == i) }
            }
            #expect(shared.subscriberCount == 0)
            try await waitUntil("the first iteration to end") { probe.liveIterators == 0 }
            var b = shared.makeAsyncIterator()
            #expect(await b.next() == 0, "a fresh iteration starts from the beginning")
            #expect(await b.next() == 1)
            #expect(probe.iterators == 2)
            #expect(shared.storage.upstreamState == .running(epoch: 1))
        }
    }

    @Test func restartRightAfterADisconnectNeverDeliversStaleElements() async throws {
        try await withTimeout {
            let probe = Probe()
            let shared = Instrumented(Counter(), probe: probe).share(buffering: .unbounded)
            for round in 0..<20 {
                var a = shared.makeAsyncIterator()
                // Each round is a fresh iteration, whatever the old one is still doing.
                #expect(await a.next() == 0, "round \(round)")
                #expect(await a.next() == 1, "round \(round)")
            }
            #expect(probe.iterators == 20)
        }
    }

    @Test func restartWaitsUntilTheCancelledIterationHasEnded() async throws {
        try await withTimeout {
            let probe = Probe()
            let source = StubbornSource()
            let shared = Instrumented(source, probe: probe).share()
            let a = SubscriberBox(shared.makeAsyncIterator())
            let aFirst = a.startNext()
            _ = await source.control.pulled.next("the first pull")
            source.control.answer(0)
            #expect(await aFirst.value == 0)
            let aNext = a.startNext()
            // The upstream is now blocked in its second next(), ignoring cancellation.
            _ = await source.control.pulled.next("the second pull")
            try await waitUntil("the upstream to block") { probe.snapshot.activePulls == 1 }
            aNext.cancel()
            #expect(await aNext.value == nil)

            let b = SubscriberBox(shared.makeAsyncIterator())
            let bNext = b.startNext()
            try await waitUntil("b to wait, or a second iteration") {
                shared.storage.waitingCount == 1 || probe.iterators == 2
            }
            // Give a wrongly started second iteration a chance to show up.
            await letOthersRun()
            #expect(probe.iterators == 1, "no new base iterator while the old one is still in next()")
            source.control.answer(1)  // the cancelled iteration's late element: not delivered
            _ = await source.control.pulled.next("the new iteration's first pull")
            source.control.answer(100)
            #expect(await bNext.value == 100, "the new subscriber is served by a new iteration")
            let stats = probe.snapshot
            #expect(stats.iterators == 2)
            #expect(!stats.iteratorMadeDuringPull, "a second base iterator was made while the first was still pulling")
            #expect(stats.maxActivePulls == 1)
            // The new iteration pulls on; once b left, end that pull too.
            _ = await source.control.pulled.next("the new iteration's second pull")
            b.release()
            source.control.answer(nil)
        }
    }
}

/// The starting point of the per-subscriber cancellation tests: an `AsyncStream` upstream
/// (its `onTermination` reasons recorded) shared by two subscribers `a` and `b`, both
/// suspended in `next()` (`aNext`, `bNext`) before this returns.
private func startTwoWaitingSubscribers() async throws -> (
    upstream: AsyncStream<Int>.Continuation,
    terminations: TerminationRecorder,
    shared: AsyncShareSequence<Int, Never>,
    a: SubscriberBox<Int, Never>, b: SubscriberBox<Int, Never>,
    aNext: Task<Int?, Never>, bNext: Task<Int?, Never>
) {
    let (stream, upstream, terminations) = TerminationRecorder.recordedStream()
    let shared = stream.share()
    let a = SubscriberBox(shared.makeAsyncIterator())
    let b = SubscriberBox(shared.makeAsyncIterator())
    let aNext = a.startNext()
    let bNext = try await shared.startWaitingRead(of: b, waiting: 2)
    return (upstream, terminations, shared, a, b, aNext, bNext)
}
