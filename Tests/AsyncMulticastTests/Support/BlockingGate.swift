// A synchronous gate for the few tests whose subject is a *synchronous* callback that takes
// long (an `AsyncSharedSource` stop that tears down for a while): the callback blocks its
// thread in `wait()` until the test calls `open()`.
//
// Blocking is the point of such a test, and also its danger: the callback runs on the
// cooperative pool, which has one thread per core. On a two-core machine, two blocked
// threads freeze every other test in the process until one gate's hang guard fires, and the
// hang guards of whatever was running fire with it (CI saw three unrelated tests time out
// that way). So:
//
// - every test that blocks a thread belongs to a suite nested in `HeavyAndTimingSensitive`,
//   which is serialized: at most one thread is blocked at a time, and never while a stress
//   test loads both cores;
// - a gate that starts blocking while another gate blocks records an issue at once, so a
//   blocking test placed elsewhere fails by name instead of starving its neighbours;
// - a wait ends after a hang guard in any case, recording an issue.
//
// Nothing else in the tests may block a thread: wait asynchronously (`Signal`, `Latch`,
// `Tally`, `waitUntil`).

import Dispatch
import Testing

@testable import AsyncMulticast

/// Blocks the thread that calls ``wait(_:sourceLocation:)`` until ``open()``, under a hang
/// guard. Each `open()` lets one `wait()` through (earlier or later).
final class BlockingGate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)

    /// Threads blocked in any gate right now, process-wide.
    private static let blocked = Lock(0)

    /// How many threads block in a gate right now, process-wide.
    static var blockedThreads: Int { Self.blocked.withLock { $0 } }

    /// How long a wait blocks at most before it records an issue and returns `false`.
    let hangGuard: Duration

    init(hangGuard: Duration = .seconds(60)) {
        self.hangGuard = hangGuard
    }

    /// Blocks the calling thread until the gate is opened; `false` (and a recorded issue) if
    /// the hang guard fired first. Records an issue if another gate already blocks a thread.
    @discardableResult
    func wait(_ what: String = "blocking gate", sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let others = Self.blocked.withLock { count in
            defer { count += 1 }
            return count
        }
        defer { Self.blocked.withLock { $0 -= 1 } }
        if others > 0 {
            Issue.record(
                "\(what): a second thread blocked while another gate blocks one; a test that blocks a thread must run in a suite nested in HeavyAndTimingSensitive",
                sourceLocation: sourceLocation)
        }
        let (seconds, attoseconds) = self.hangGuard.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        guard self.semaphore.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success else {
            Issue.record("hang guard: \(what) was not opened within \(self.hangGuard)", sourceLocation: sourceLocation)
            return false
        }
        return true
    }

    /// Lets one waiting (or the next) `wait()` return.
    func open() {
        self.semaphore.signal()
    }
}
