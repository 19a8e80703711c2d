// Checks Guides/Share.md: every compiled example, and the output the guide shows for it.
//
// Each test carries a `// Guides/Share.md: <section>` comment and contains its example
// verbatim; where the guide shows an output block, the test compares the printed lines with
// it exactly, in order (`example(printing:)`). The examples call `print`; in this file `print`
// is the `fileprivate` function below, which records the line in `printed` instead of writing
// it (the file-wide way of PrintedLines.swift). Types and functions the guide declares at the
// top level are declared here at file scope, `fileprivate` so that they cannot clash with
// other test files, and print through the same function.
//
// No sleeps: where an example's last line is printed by another task (an `onTermination`
// handler), the test waits for that line explicitly. The suite is serialized because the
// record is shared by all its tests (the upstream tasks that print are detached, so a
// task-local record would not reach them).

import AsyncMulticast
import Testing

// MARK: - Recording `print`

/// The lines the examples of this file printed, in order.
private let printed = PrintedLines()

/// Shadows `Swift.print` in this file: formats the items as `print` does and records the line.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    printed.record(items, separator: separator)
}

/// Runs a guide example and expects it to print exactly `output` (the block shown in the
/// guide). Lines printed by other tasks are waited for; the suite's time limit is the only
/// hang guard.
private func example(
    printing output: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async -> Void
) async {
    printed.reset()
    await body()
    let expected = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let lines = await printed.lines(waitingFor: expected.count)
    #expect(lines == expected, sourceLocation: sourceLocation)
}

// MARK: - Declarations the guide makes at the top level

// Guides/Share.md: About the examples (`Numbers`, used by several examples)
/// Counts 1, 2, 3, … afresh for every iteration, and says when an iteration starts.
private struct Numbers: AsyncSequence, Sendable {
    struct Iterator: AsyncIteratorProtocol {
        var count = 0
        mutating func next() async -> Int? {
            count += 1
            return count
        }
    }

    func makeAsyncIterator() -> Iterator {
        print("numbers: started")
        return Iterator()
    }
}

// Guides/Share.md: Terminal events are sticky
private struct SensorError: Error {}

// Guides/Share.md: Buffering policies
private func fastAndSlow(_ policy: SharedBufferingPolicy) async {
    let (source, continuation) = AsyncStream.makeStream(of: Int.self)
    let shared = source.share(buffering: policy)
    var fast = shared.makeAsyncIterator()
    var slow = shared.makeAsyncIterator()

    var fastSaw: [Int] = []
    for n in 1...5 {
        continuation.yield(n)
        fastSaw.append(await fast.next()!)  // fast takes each element at once
    }
    continuation.finish()

    var slowSaw: [Int] = []
    while let n = await slow.next() {  // slow reads only now
        slowSaw.append(n)
    }
    print("\(policy): fast \(fastSaw), slow \(slowSaw)")
}

// Guides/Share.md: An AsyncStream does not start again (`Heartbeat`)
/// Starts a producer for every iteration and stops it when the iteration ends.
private struct Heartbeat: AsyncSequence, Sendable {
    func makeAsyncIterator() -> AsyncStream<Int>.Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let producer = Task {
            var n = 0
            while !Task.isCancelled {
                n += 1
                continuation.yield(n)
                try? await Task.sleep(for: .seconds(1))
            }
        }
        continuation.onTermination = { _ in producer.cancel() }
        return stream.makeAsyncIterator()
    }
}

// Guides/Share.md: Create the shared sequence once and store it (`HeartRateMonitor`)
private final class HeartRateMonitor: Sendable {
    /// Created once; every screen iterates this same value.
    let beats = Heartbeat().share()
}

// MARK: - The examples

@Suite("Guides/Share.md", .serialized, .timeLimit(.minutes(3)))
struct ShareGuideTests {
    // Guides/Share.md: Sharing one asynchronous sequence (the first example)
    @Test func introduction() async {
        let (source, continuation) = AsyncStream.makeStream(of: Int.self)  // (test only)
        let shared = source.share()  // .bounded(64)
        let latest = source.share(buffering: .bufferingNewest(1))  // see "Buffering policies"
        #expect(shared.subscriberCount == 0 && latest.subscriberCount == 0)
        continuation.finish()
    }

    // Guides/Share.md: Each iterator is one subscriber
    @Test func eachIteratorIsOneSubscriber() async {
        await example(
            printing: """
                A: 1
                A: 2 B: 2
                A: nil B: nil
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            let shared = source.share()

            var a = shared.makeAsyncIterator()  // A joins
            continuation.yield(1)
            print("A:", await a.next()!)  // the upstream took 1; A has it

            var b = shared.makeAsyncIterator()  // B joins after 1 was produced
            continuation.yield(2)
            continuation.finish()
            print("A:", await a.next()!, "B:", await b.next()!)
            print("A:", await a.next() as Any, "B:", await b.next() as Any)
        }
    }

    // Guides/Share.md: Lazy start, one upstream iteration
    @Test func lazyStart() async {
        await example(
            printing: """
                two subscribers, nothing started yet
                numbers: started
                A: 1
                B: 1
                """
        ) {
            let shared = Numbers().share()
            var a = shared.makeAsyncIterator()
            var b = shared.makeAsyncIterator()
            print("two subscribers, nothing started yet")
            print("A:", await a.next()!)  // starts the one upstream iteration
            print("B:", await b.next()!)
        }
    }

    // Guides/Share.md: Each subscriber leaves on its own
    @Test func eachSubscriberLeavesOnItsOwn() async {
        await example(
            printing: """
                A: nil
                subscribers: 1
                B: 1
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            let shared = source.share()
            var a = shared.makeAsyncIterator()
            var b = shared.makeAsyncIterator()

            let taskA = Task { await a.next() }  // A waits in its own task...
            taskA.cancel()  // ...which is cancelled
            print("A:", await taskA.value as Any)
            print("subscribers:", shared.subscriberCount)

            continuation.yield(1)
            print("B:", await b.next()!)  // B is not affected
        }
    }

    // Guides/Share.md: Last one out cancels the upstream
    @Test func lastOneOutCancelsTheUpstream() async {
        await example(
            printing: """
                A: 1
                source: cancelled
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            continuation.onTermination = { reason in print("source:", reason) }
            let shared = source.share()

            continuation.yield(1)
            for await n in shared {
                print("A:", n)
                break  // A leaves: nobody is left
            }
        }
    }

    // Guides/Share.md: Restart
    @Test func restart() async {
        await example(
            printing: """
                numbers: started
                A: 1
                numbers: started
                B: 1
                """
        ) {
            let shared = Numbers().share()
            for await n in shared {
                print("A:", n)
                break  // the last one out: the iteration stops
            }
            for await n in shared {  // a new subscriber: a new iteration
                print("B:", n)
                break
            }
        }
    }

    // Guides/Share.md: Terminal events are sticky (finished)
    @Test func finishIsSticky() async {
        await example(
            printing: """
                A: 1
                A: finished
                late: nil
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            let shared = source.share()
            var a = shared.makeAsyncIterator()
            continuation.yield(1)
            continuation.finish()

            while let n = await a.next() { print("A:", n) }
            print("A: finished")

            var late = shared.makeAsyncIterator()  // nothing starts again
            print("late:", await late.next() as Any)
        }
    }

    // Guides/Share.md: Terminal events are sticky (failed)
    @Test func failureIsSticky() async {
        await example(
            printing: """
                A: 1
                A: SensorError()
                late: SensorError()
                """
        ) {
            let (source, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
            let shared = source.share()
            var a = shared.makeAsyncIterator()
            continuation.yield(1)
            continuation.finish(throwing: SensorError())

            do {
                while let n = try await a.next() { print("A:", n) }
            } catch {
                print("A:", error)
            }

            var late = shared.makeAsyncIterator()
            do {
                _ = try await late.next()
            } catch {
                print("late:", error)
            }
        }
    }

    // Guides/Share.md: Buffering policies (`fastAndSlow` calls)
    @Test func droppingPolicies() async {
        await example(
            printing: """
                unbounded: fast [1, 2, 3, 4, 5], slow [1, 2, 3, 4, 5]
                bufferingNewest(2): fast [1, 2, 3, 4, 5], slow [4, 5]
                bufferingOldest(2): fast [1, 2, 3, 4, 5], slow [1, 2]
                """
        ) {
            await fastAndSlow(.unbounded)
            await fastAndSlow(.bufferingNewest(2))
            await fastAndSlow(.bufferingOldest(2))
        }
    }

    // Guides/Share.md: Buffering policies (`.bounded(2)`)
    @Test func boundedPolicy() async {
        await example(
            printing: """
                fast: 1 2
                slow: 1
                fast: 3
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            let shared = source.share(buffering: .bounded(2))
            var fast = shared.makeAsyncIterator()
            var slow = shared.makeAsyncIterator()
            for n in 1...5 { continuation.yield(n) }

            print("fast:", await fast.next()!, await fast.next()!)
            // slow holds 1 and 2 now: the upstream pauses, a third fast.next() would wait.
            print("slow:", await slow.next()!)  // 1 (and 2, into its iterator): room again
            print("fast:", await fast.next()!)
        }
    }

    // Guides/Share.md: An AsyncStream does not start again
    @Test func asyncStreamDoesNotRestart() async {
        await example(
            printing: """
                A: 1
                source: cancelled
                B: done
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            continuation.onTermination = { reason in print("source:", reason) }
            let shared = source.share()

            continuation.yield(1)
            for await n in shared {
                print("A:", n)
                break  // the last one out cancels `source`
            }
            continuation.yield(2)  // dropped: `source` was cancelled
            for await n in shared {  // a new iteration of `source`, which is over
                print("B:", n)
            }
            print("B: done")
        }
    }

    // Guides/Share.md: An AsyncStream does not start again (a base that can start again)
    @Test func restartableSource() async {
        await example(
            printing: """
                A: 1
                B: 1
                """
        ) {
            let beats = Heartbeat().share()
            for await n in beats {
                print("A:", n)
                break  // stops the producer
            }
            for await n in beats {  // starts a new one
                print("B:", n)
                break
            }
        }
    }

    // Guides/Share.md: Create the shared sequence once and store it
    @Test func oneSharePerSubscriberSplitsAgain() async {
        await example(
            printing: """
                A: 1
                A: 2
                B got nothing
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            var a = source.share().makeAsyncIterator()  // wrong: a share() per subscriber
            var b = source.share().makeAsyncIterator()
            continuation.yield(1)
            continuation.yield(2)
            continuation.finish()

            while let n = await a.next() { print("A:", n) }
            while let n = await b.next() { print("B:", n) }
            print("B got nothing")
        }
    }

    // Guides/Share.md: Create the shared sequence once and store it (`HeartRateMonitor`)
    @Test func storedSharedSequence() async {
        // The guide shows no output for this one; check that it works as described.
        await example(
            printing: """
                screen 1: 1
                screen 2: 1
                """
        ) {
            let monitor = HeartRateMonitor()
            for await beat in monitor.beats {
                print("screen 1:", beat)
                break
            }
            for await beat in monitor.beats {
                print("screen 2:", beat)
                break
            }
        }
    }

    // Guides/Share.md: Iterators are per task; join before you spawn
    @Test func joinBeforeTheTaskStarts() async {
        await example(
            printing: """
                A: 1
                B: [2]
                """
        ) {
            let (source, continuation) = AsyncStream.makeStream(of: Int.self)
            let shared = source.share()
            var a = shared.makeAsyncIterator()
            continuation.yield(1)
            print("A:", await a.next()!)  // the upstream is running now

            var iterator = shared.makeAsyncIterator()  // B joins here, before 2 exists
            let b = Task {
                var saw: [Int] = []
                while let n = await iterator.next() { saw.append(n) }
                return saw
            }
            continuation.yield(2)
            continuation.finish()
            print("B:", await b.value)
        }
    }

    // Guides/Share.md: Structured sharing
    @Test func structuredSharing() async {
        await example(
            printing: """
                received 1
                received 2
                received 3
                the end
                nothing of it is left running
                """
        ) {
            let numbers = AsyncStream<Int> { continuation in
                for n in 1...3 { continuation.yield(n) }
                continuation.finish()
            }
            let shared = numbers.sharedService(replay: 3, started: .eagerly)
            await withDiscardingTaskGroup { group in
                group.addTask { await shared.run() }  // hosts the upstream
                group.addTask {
                    for await n in shared { print("received", n) }
                    print("the end")
                }
            }
            print("nothing of it is left running")
        }
    }
}
