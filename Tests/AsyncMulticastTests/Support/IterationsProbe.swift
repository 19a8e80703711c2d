// A base for the upstream's priority tests (Share/UpstreamTaskTests.swift,
// Share/UpstreamPriorityRuleTests.swift): each iteration has its own go-ahead, records the
// priority its task produces at, and is slow to stop.

import Testing

@testable import AsyncMulticast

/// A base each of whose iterations (`makeAsyncIterator()`) has its own go-ahead and records
/// the priority its task runs at when it produces. A go-ahead may name a priority the task is
/// expected to reach: the iteration waits for it under a short hang guard (a raise happens
/// just after a subscriber is registered, outside the lock), then records what it has.
///
/// An iteration that sees its cancellation is slow to stop: it records that it is stopping,
/// waits for `letStop`, then (if `stopFloor` is set) waits for its task to reach that
/// priority under the same short guard, and records the priority it stops at.
final class IterationsProbe: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    typealias Gate = Signal<(element: Int, raisedTo: TaskPriority?)?>
    let gates = LockedLog<Gate>()
    let seen = LockedLog<(iteration: Int, priority: TaskPriority)>()
    let stopping = LockedLog<Int>()
    let stoppedAt = LockedLog<(iteration: Int, priority: TaskPriority)>()
    let letStop = Latch()
    let stopFloor: TaskPriority?

    /// How long a raise may take to show, once the test has seen what should cause it. A
    /// raise is a synchronous call made just after a critical section: seconds are a hang
    /// guard, not an ordering.
    static let raiseGuard: Double = 10

    init(stopFloor: TaskPriority? = nil) {
        self.stopFloor = stopFloor
    }

    /// Lets iteration `iteration` produce `element` (once it has started), once its task runs
    /// at `raisedTo` or higher if given.
    func send(_ element: Int, to iteration: Int, raisedTo: TaskPriority? = nil) async throws {
        try await waitUntil("iteration \(iteration) started") { self.gates.count > iteration }
        self.gates.values[iteration].send((element, raisedTo))
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let probe: IterationsProbe
        let iteration: Int
        var elements: AsyncStream<(element: Int, raisedTo: TaskPriority?)?>.Iterator

        mutating func next() async -> Int? {
            guard let next = await self.elements.next() ?? nil else {
                if Task.isCancelled {
                    self.probe.stopping.append(self.iteration)
                    await self.probe.letStop.wait()
                    if let floor = self.probe.stopFloor {
                        try? await waitUntil(
                            "iteration \(self.iteration), stopping, raised to \(floor)",
                            seconds: IterationsProbe.raiseGuard
                        ) { Task.currentPriority >= floor }
                    }
                    self.probe.stoppedAt.append((self.iteration, Task.currentPriority))
                }
                return nil
            }
            if let floor = next.raisedTo {
                try? await waitUntil("the upstream raised to \(floor)", seconds: IterationsProbe.raiseGuard) {
                    Task.currentPriority >= floor
                }
            }
            self.probe.seen.append((self.iteration, Task.currentPriority))
            return next.element
        }
    }

    /// Iterations never overlap (the library's promise), so counting, then appending, names
    /// each one.
    func makeAsyncIterator() -> AsyncIterator {
        let gate = Gate()
        let iteration = self.gates.count
        self.gates.append(gate)
        return AsyncIterator(probe: self, iteration: iteration, elements: gate.stream.makeAsyncIterator())
    }
}

extension IterationsProbe {
    /// The subscribers of `sequence` (made from this probe) waiting in `next()`.
    func waitingCount(of sequence: any AsyncSequence<Int, Never> & Sendable) -> Int {
        switch sequence {
        case let shared as AsyncShareSequence<Int, Never>: return shared.storage.waitingCount
        case let service as AsyncSharedService<Int, Never>: return service.storage.waitingCount
        default: preconditionFailure("not a face of this probe: \(type(of: sequence))")
        }
    }
}

/// Calls `multicast.connect()` in a `.background` task; returns once `connect()` has
/// returned (it raises the new upstream task before it returns, if it raises it at all).
func connectFromABackgroundTask(_ multicast: AsyncMulticastSequence<Int, Never>) async {
    let connected = Signal<Void>()
    Task(priority: .background) {
        _ = multicast.connect()
        connected.send(())
    }
    _ = await connected.next("connect() returned")
}
