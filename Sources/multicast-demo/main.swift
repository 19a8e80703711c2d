// `swift run multicast-demo`: the problems people hit when several parts of an app listen to
// one AsyncStream, and what `share()` does instead. Runs in about three seconds.
//
// The sleeps below only pace the demo so that its output is readable; the tests use no sleeps.
// The subscribers run on the main actor, one at a time, in the order they were resumed: that
// keeps the printed order stable.

import AsyncMulticast

let tick = Duration.milliseconds(100)
/// B takes 30 ms per element, so its lines always follow A's (A's speed does not depend on B).
let slow = Duration.milliseconds(30)

/// A source like a sensor or a socket: an `AsyncStream` whose producer starts when the stream is
/// made, yields 1, 2, 3, … one per tick, and finishes one tick after its last value.
/// Its `onTermination` prints why the stream ended.
func ticker(count: Int) -> AsyncStream<Int> {
    AsyncStream { continuation in
        let start = ContinuousClock.now
        let producer = Task {
            for n in 1...(count + 1) {
                try await Task.sleep(until: start + tick * n, clock: .continuous)
                if n <= count { continuation.yield(n) } else { continuation.finish() }
            }
        }
        continuation.onTermination = { reason in
            print("    [upstream] onTermination: \(reason)")
            producer.cancel()
        }
    }
}

/// Sleeps until `ticks` ticks (of 100 ms) after `start`.
func wait(until ticks: Double, after start: ContinuousClock.Instant) async {
    try? await Task.sleep(until: start + tick * ticks, clock: .continuous)
}

/// Iterates `sequence` like a screen would, on the main actor, printing each element with
/// `label`; returns what it received. `work` is how long it takes to handle one element.
@MainActor
func listen<S: AsyncSequence>(_ label: String, to sequence: S, work: Duration = .zero) async -> [Int]
where S.Element == Int, S.Failure == Never {
    var received: [Int] = []
    for await n in sequence {
        if work > .zero { try? await Task.sleep(for: work) }
        print("    \(label): \(n)")
        received.append(n)
    }
    return received
}

/// Waits for a subscriber's task and says that its loop ended.
func end(_ label: String, _ task: Task<[Int], Never>) async -> [Int] {
    let received = await task.value
    print("    \(label): loop ended")
    return received
}

print("AsyncMulticast demo. Each source yields 1, 2, 3, ... every 100 ms; B takes 30 ms per element.")

// MARK: (a) The problem

do {
    print("\n(a) The problem: two for-await loops over one AsyncStream")
    let start = ContinuousClock.now
    let stream = ticker(count: 100)
    let a = Task { await listen("A", to: stream) }
    await wait(until: 0.5, after: start)  // so that A is the first one waiting
    let b = Task { await listen("B", to: stream, work: slow) }
    await wait(until: 4.5, after: start)
    print("    -- cancel A's task")
    a.cancel()
    let (fromA, fromB) = (await end("A", a), await end("B", b))
    print("    => A got \(fromA), B got \(fromB): the loops split the elements,")
    print("       and cancelling A ended the stream for B as well.")
}

// MARK: (b) share(): everyone gets everything

do {
    print("\n(b) share(): two subscribers of one producer, each gets every element")
    let shared = ticker(count: 4).share()
    let a = Task { await listen("A", to: shared) }
    let b = Task { await listen("B", to: shared, work: slow) }
    let (fromA, fromB) = (await end("A", a), await end("B", b))
    print("    => A got \(fromA), B got \(fromB); the source finished once.")
}

// MARK: (c) Per-subscriber cancellation

do {
    print("\n(c) One subscriber cancelled half-way, the other continues")
    let start = ContinuousClock.now
    let shared = ticker(count: 5).share()
    let a = Task { await listen("A", to: shared) }
    let b = Task { await listen("B", to: shared, work: slow) }
    await wait(until: 2.5, after: start)
    print("    -- cancel A's task (subscribers: \(shared.subscriberCount))")
    a.cancel()
    let fromA = await end("A", a)
    print("    -- subscribers: \(shared.subscriberCount)")
    let fromB = await end("B", b)
    print("    => A got \(fromA), B got \(fromB); the source was not cancelled.")
}

// MARK: (d) A late subscriber

do {
    print("\n(d) A late subscriber starts from the current element, not from the beginning")
    let start = ContinuousClock.now
    let shared = ticker(count: 5).share()
    let a = Task { await listen("A", to: shared) }
    await wait(until: 3.5, after: start)
    print("    -- B subscribes")
    let b = Task { await listen("B", to: shared, work: slow) }
    let (fromA, fromB) = (await end("A", a), await end("B", b))
    let first = fromB.first.map(String.init) ?? "nothing"
    print("    => B joined late and started at \(first), not at 1. A got \(fromA).")
}

// MARK: (e) Last one out

do {
    print("\n(e) The last subscriber to leave cancels the upstream")
    let start = ContinuousClock.now
    let shared = ticker(count: 100).share()
    let a = Task { await listen("A", to: shared) }
    let b = Task { await listen("B", to: shared, work: slow) }
    await wait(until: 2.5, after: start)
    print("    -- cancel A's task (subscribers: \(shared.subscriberCount))")
    a.cancel()
    _ = await end("A", a)
    await wait(until: 4.5, after: start)
    print("    -- cancel B's task (subscribers: \(shared.subscriberCount))")
    b.cancel()
    _ = await end("B", b)
    print("    => subscribers: \(shared.subscriberCount). Only the last one out cancelled the source.")
}
