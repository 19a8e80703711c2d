// What the guide examples print, recorded instead of written, so that a test can compare it
// with the output block the guide shows. Two ways of sending an example's `print` here are in
// use, because each keeps the example lines exactly as the guide shows them:
//
// - A file-wide `print`: ShareGuideTests.swift declares a `fileprivate func print` that
//   shadows `Swift.print` in that file and records into one `PrintedLines` for the file; its
//   suite is serialized, and the guide's top-level declarations (which print too) sit at file
//   scope.
// - A per-example `print`: the other guide-test files declare a local `print` in each test,
//   `let (printed, print) = PrintedLines.recorder()` (or a `static func print` in the namespace
//   that holds an example's declarations) recording into that example's own `PrintedLines`;
//   those tests may run in parallel.

import Testing

@testable import AsyncMulticast  // only for `Lock` (a pthread mutex, which TSan understands)

/// The lines an example printed, in order. Thread-safe: lines printed by other tasks (an
/// `onTermination` handler, a detached upstream task) are waited for, never slept for.
final class PrintedLines: Sendable {
    private struct State: Sendable {
        var lines: [String] = []
        var waiters: [(isReady: @Sendable ([String]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Lock(State())

    /// A recorder and a `print` that records into it, to shadow `Swift.print` in one example:
    /// `let (printed, print) = PrintedLines.recorder()`.
    static func recorder() -> (PrintedLines, Printer) {
        let printed = PrintedLines()
        return (printed, Printer(printed: printed))
    }

    /// Called as `print(items...)`: records one line, formatted as `Swift.print` formats `items`.
    struct Printer: Sendable {
        let printed: PrintedLines
        func callAsFunction(_ items: Any...) { self.printed.record(items) }
    }

    /// Records one line, formatted as `Swift.print` formats `items`.
    func record(_ items: [Any], separator: String = " ") {
        let line = items.map { String(describing: $0) }.joined(separator: separator)
        let ready = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.lines.append(line)
            let lines = state.lines
            var ready: [CheckedContinuation<Void, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.isReady(lines) else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// The lines recorded so far.
    var lines: [String] {
        self.state.withLock { $0.lines }
    }

    /// The lines that start with `prefix`, in order: one subscriber's output.
    func lines(startingWith prefix: String) -> [String] {
        self.lines.filter { $0.hasPrefix(prefix) }
    }

    /// Suspends until `isReady` holds for the lines recorded so far; under a hang guard that
    /// records an issue and returns.
    func wait(
        until isReady: @escaping @Sendable ([String]) -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        _ = await withTimeoutOrNil("the printed lines", sourceLocation: sourceLocation) {
            await self.waitUnguarded(until: isReady)
        }
    }

    private func waitUnguarded(until isReady: @escaping @Sendable ([String]) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let readyNow = self.state.withLock { state -> Bool in
                if isReady(state.lines) { return true }
                state.waiters.append((isReady, continuation))
                return false
            }
            if readyNow { continuation.resume() }
        }
    }

    /// Suspends until `line` has been recorded.
    func wait(for line: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        await self.wait(until: { $0.contains(line) }, sourceLocation: sourceLocation)
    }

    /// The recorded lines, once there are at least `count` of them.
    func lines(waitingFor count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        await self.wait(until: { $0.count >= count }, sourceLocation: sourceLocation)
        return self.lines
    }

    /// Forgets the lines recorded so far (a file-wide recorder, between two examples).
    func reset() {
        self.state.withLock { $0.lines = [] }
    }
}
