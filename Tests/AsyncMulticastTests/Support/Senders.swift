// Senders the tests start together or one after another: tagged values from concurrent
// tasks, and `send(waitingForRoom:)` calls parked in a known order.

import Testing

@testable import AsyncMulticast

/// Values sent by sender `s` are `s * senderStride + i`, `i` counting up from 0.
let senderStride = 1_000_000

/// Whether each sender's values (`sender * stride + i`) arrive in increasing order.
func isIncreasingPerSender(_ values: [Int], stride: Int = senderStride) -> Bool {
    var last: [Int: Int] = [:]
    for value in values {
        let sender = value / stride
        if let previous = last[sender], previous >= value { return false }
        last[sender] = value
    }
    return true
}

/// Sends `perSender` tagged values from each of `senders` tasks, all started together.
func sendConcurrently(
    senders: Int, perSender: Int, waitingForRoom: Bool = false,
    _ send: @escaping @Sendable (Int, Bool) async -> Void
) async {
    let start = Latch()
    await withTaskGroup(of: Void.self) { group in
        for s in 0..<senders {
            group.addTask {
                await start.wait()
                for i in 0..<perSender {
                    await send(s * senderStride + i, waitingForRoom)
                    if i % 7 == 0 { await Task.yield() }
                }
            }
        }
        start.release()
    }
}

/// Starts one `send(waitingForRoom:)` per value, each once the ones before it have
/// parked, so that the order in which they began waiting is known.
func parkInOrder(
    _ values: [Int], storage: MulticastStorage<Int, Never>, alreadyParked: Int = 0,
    send: @escaping @Sendable (Int) async -> Void
) async throws -> [Task<Void, Never>] {
    var senders: [Task<Void, Never>] = []
    for (index, value) in values.enumerated() {
        senders.append(Task { await send(value) })
        try await waitUntil("sender of \(value) parked") {
            storage.producersWaitingForRoom == alreadyParked + index + 1
        }
    }
    return senders
}

/// `send(waitingForRoom:)` calls parked in a known order, one of them frozen: each starts
/// once the ones before it are parked, and the sender at `heldIndex` runs on an executor
/// that is held once that sender is parked. Released by the engine, it cannot run on until
/// the test releases the executor, so only the engine can put its element in its place.
struct ParkedSenders {
    let tasks: [Task<Void, Never>]
    let heldIndex: Int
    let held: HeldExecutor

    init(
        _ values: ClosedRange<Int>, holding heldIndex: Int, storage: MulticastStorage<Int, Never>,
        send: @escaping @Sendable (Int) async -> Void
    ) async throws {
        let held = HeldExecutor()
        var tasks: [Task<Void, Never>] = []
        do {
            for (index, value) in values.enumerated() {
                tasks.append(Task(executorPreference: index == heldIndex ? held : nil) { await send(value) })
                try await waitUntil("sender of \(value) waiting") { storage.producersWaitingForRoom == index + 1 }
                if index == heldIndex { held.hold() }
            }
        } catch {
            held.release()  // no task stays frozen
            throw error
        }
        (self.tasks, self.heldIndex, self.held) = (tasks, heldIndex, held)
    }

    /// Waits for every sender but the held one, then releases it and waits for it too.
    func awaitAll() async throws {
        for (index, sender) in self.tasks.enumerated() where index != self.heldIndex {
            try await withTimeout("a released sender") { await sender.value }
        }
        self.held.release()
        try await withTimeout("the held sender") { await self.tasks[self.heldIndex].value }
    }
}

/// Starts `send(waitingForRoom: element)` into `subject` in a task of its own; returns once
/// that task started and the others had a chance to run: the task, and a flag set when the
/// send returned.
func startWaitingSend(
    _ element: Int, into subject: some AsyncSubject<Int, Never>
) async -> (sender: Task<Void, Never>, sent: LockedFlag) {
    let aboutToSend = Signal<Void>()
    let sent = LockedFlag()
    let sender = Task {
        aboutToSend.send(())
        await subject.send(waitingForRoom: element)
        sent.set()
    }
    _ = await aboutToSend.next("sender started")
    await letOthersRun()
    return (sender, sent)
}

/// A task that sends `values` to `subject` in order, yielding after every `interval` sends so
/// that readers join between them, then finishes the subject.
func startSending(
    _ values: ClosedRange<Int>, to subject: AsyncReplaySubject<Int, Never>, yieldingEvery interval: Int
) -> Task<Void, Never> {
    Task {
        for value in values {
            subject.send(value)
            if value % interval == 0 { await Task.yield() }
        }
        subject.finish()
    }
}
