import Synchronization
import Testing

/// What a test observed happen elsewhere (an upstream started or stopped, a publisher was
/// subscribed to or cancelled), in the order it happened, with a way to wait for one of
/// them. Tests wait for the event they expect instead of sleeping: the order of events is
/// never decided by a delay.
final class EventLog<Event: Sendable & Equatable>: Sendable {
    private struct Waiter: Sendable {
        let id: Int
        let event: Event
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State: Sendable {
        var events: [Event] = []
        var waiters: [Waiter] = []
        var nextID = 0
        /// Waits whose task was cancelled before they were registered.
        var cancelledEarly: Set<Int> = []
    }

    private let state = Mutex(State())

    init() {}

    /// Every event recorded so far, oldest first.
    var events: [Event] { self.state.withLock { $0.events } }

    func record(_ event: Event) {
        let ready = self.state.withLock { state -> [Waiter] in
            state.events.append(event)
            let ready = state.waiters.filter { $0.event == event }
            state.waiters.removeAll { $0.event == event }
            return ready
        }
        for waiter in ready { waiter.continuation.resume(returning: true) }
    }

    /// Waits until `event` has been recorded (returns at once if it already was): `true`,
    /// or `false` if the waiting task was cancelled first, which is how a hang guard stops
    /// the wait.
    func wait(for event: Event) async -> Bool {
        let id = self.state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let outcome = self.state.withLock { state -> Bool? in
                    if state.events.contains(event) { return true }
                    if state.cancelledEarly.remove(id) != nil { return false }
                    state.waiters.append(Waiter(id: id, event: event, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: false)
        }
    }

    /// Waits for `event` under a hang guard: records an issue naming the event, and the
    /// events seen instead, if it has not happened within `seconds`.
    func expect(
        _ event: Event, within seconds: Int = 60, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let happened = await withHangGuard(seconds: seconds) { await self.wait(for: event) }
        if happened != true {
            Issue.record(
                "\(event) did not happen within \(seconds) s; seen: \(self.events)", sourceLocation: sourceLocation)
        }
    }
}
