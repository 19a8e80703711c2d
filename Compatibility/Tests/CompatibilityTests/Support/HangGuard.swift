import Testing

/// Runs `body` against a deadline of `seconds` that exists only to turn a hang into a
/// failed test: the body's result, or `nil` once the deadline passed (the body's task is then
/// cancelled, so a body that waits cancellably returns). Never used to order events: every
/// wait in these tests is for a condition, and the deadline is generous for a loaded
/// 2-core machine.
func withHangGuard<T: Sendable>(
    seconds: Int = 60, _ body: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Waits until `condition` holds, checking it after each yield, under a hang guard.
///
/// For states that change without an event to wait for (a replay cache expiring inside the
/// library's timer task). Only the outcome is asserted, never how long it took, so the
/// number of checks a loaded machine needs does not matter.
func waitUntil(
    _ what: String, within seconds: Int = 60, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @escaping @Sendable () -> Bool
) async {
    let held = await withHangGuard(seconds: seconds) { () -> Bool in
        while !condition() {
            guard !Task.isCancelled else { return false }
            await Task.yield()
        }
        return true
    }
    if held != true {
        Issue.record("\(what): not seen within \(seconds) s", sourceLocation: sourceLocation)
    }
}

extension Task where Failure == Never {
    /// The task's value, with the waiter's cancellation passed on: when a time limit cancels
    /// a test, the tasks it waits for are cancelled too, so that the test ends (failing)
    /// instead of waiting for them for ever.
    func waitValue() async -> Success {
        await withTaskCancellationHandler {
            await self.value
        } onCancel: {
            self.cancel()
        }
    }
}
