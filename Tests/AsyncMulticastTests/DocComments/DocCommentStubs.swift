// What the doc-comment examples take from the app around them, for the tests in this folder.
//
// Each test in DocComments/ contains a doc-comment example of Sources/AsyncMulticast verbatim
// (one test file per source file, one suite per file named "Doc comments: <type>"); the lines
// marked `// (test only)` are the test's own: the stubs an example needs (`feed`, `render`,
// `client`), a recording `print`, a gate.
// `.ci/check-examples.py` checks that every example appears in a test this way. Where an
// example states its output in a comment (`// true`, `// b, c`, `// missed(2)`), the test
// checks exactly that output; where it states none, the test checks what the example claims.
//
// `print` is a local function of each test that records the line in that test's own
// `PrintedLines` (the per-example way of Support/PrintedLines.swift), so the tests may run in
// parallel. The objects an example calls into (`ui.apply(e)`, `client.send(line)`) are the
// stand-ins below, which record what they were given, so that a test can wait for a value to
// arrive instead of sleeping.

import Testing

@testable import AsyncMulticast  // only for `Lock`

/// An app object that receives values: `ui.apply(e)`, `logger.log(e)`, `display.show(t)`,
/// `ui.render(e)`, `sync.adapt(to: path)`. Every method records its argument, formatted as
/// `print` formats it, in `received`.
final class StubSink: Sendable {
    let received = PrintedLines()

    func apply<Value: Sendable>(_ value: Value) { self.received.record([value]) }
    func log<Value: Sendable>(_ value: Value) { self.received.record([value]) }
    func show<Value: Sendable>(_ value: Value) { self.received.record([value]) }
    func render<Value: Sendable>(_ value: Value) { self.received.record([value]) }
    func adapt<Value: Sendable>(to value: Value) { self.received.record([value]) }
}

/// A network client that the examples write to: `client.send(line)`, `client.write(event)`,
/// `client.close(reason:)`.
final class StubClient: Sendable {
    /// The values written, in order.
    let written = PrintedLines()
    /// The reasons given to `close(reason:)`.
    let closed = PrintedLines()

    func send<Value: Sendable>(_ value: Value) async throws {
        self.written.record([value])
    }

    func write<Value: Sendable>(_ value: Value) async throws {
        self.written.record([value])
    }

    func close(reason: String) async {
        self.closed.record([reason])
    }
}

/// A callback API such as a network path monitor (`PathMonitor` in the examples). What is
/// done to it is recorded in `calls` ("onUpdate" when the handler is set, "start", "stop");
/// the test makes it report a value through `onUpdate` with ``report(_:)``. A monitor made
/// with a `started` signal sends itself there when started.
final class StubMonitor<Value: Sendable>: Sendable {
    let calls = PrintedLines()
    private let handler = Lock<(@Sendable (Value) -> Void)?>(nil)
    private let started: Signal<StubMonitor>?

    init(announcingStartTo started: Signal<StubMonitor>? = nil) {
        self.started = started
    }

    var onUpdate: (@Sendable (Value) -> Void)? {
        get { self.handler.withLock { $0 } }
        set {
            self.handler.withLock { $0 = newValue }
            self.calls.record(["onUpdate"])
        }
    }

    func start() {
        self.calls.record(["start"])
        self.started?.send(self)
    }

    func stop() {
        self.calls.record(["stop"])
    }

    /// Calls the `onUpdate` handler, as the real API does when something changes.
    func report(_ value: Value) {
        self.handler.withLock { $0 }?(value)
    }
}

/// A Combine-like publisher (`pricePublisher` in an example): `sink` returns a
/// ``StubCancellable``, which, like Combine's `AnyCancellable`, is not `Sendable`.
final class StubPublisher<Value: Sendable>: Sendable {
    private let receivers = Lock<[Int: @Sendable (Value) -> Void]>([:])
    private let nextID = Lock(0)
    /// Sent once for every `sink`.
    let subscribed = Signal<Void>()
    /// Sent once for every cancelled subscription.
    let cancelled = Signal<Void>()

    func sink(_ receive: @escaping @Sendable (Value) -> Void) -> StubCancellable {
        let id = self.nextID.withLock { id in
            defer { id += 1 }
            return id
        }
        self.receivers.withLock { $0[id] = receive }
        self.subscribed.send(())
        return StubCancellable { [self] in
            self.receivers.withLock { _ = $0.removeValue(forKey: id) }
            self.cancelled.send(())
        }
    }

    /// Publishes `value` to every subscription.
    func send(_ value: Value) {
        for receive in self.receivers.withLock({ Array($0.values) }) { receive(value) }
    }
}

/// What ``StubPublisher/sink(_:)`` returns: not `Sendable`, like Combine's `AnyCancellable`.
final class StubCancellable {
    private let onCancel: @Sendable () -> Void

    init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = onCancel
    }

    func cancel() {
        self.onCancel()
    }
}

/// The unstructured tasks an example starts with `Task { … }` without keeping them, when they
/// end only once cancelled. Such a test declares a local function that shadows the type (as
/// the local `print` shadows `Swift.print`):
///
///     let started = StartedTasks()                                               // (test only)
///     func Task(_ operation: @escaping @Sendable () async -> Void) { started.start(operation) }  // (test only)
///
/// and calls ``cancelAll()`` once it has checked what the tasks did.
final class StartedTasks: Sendable {
    private let tasks = Lock<[_Concurrency.Task<Void, Never>]>([])

    func start(_ operation: @escaping @Sendable () async -> Void) {
        let task = _Concurrency.Task { await operation() }
        self.tasks.withLock { $0.append(task) }
    }

    /// Cancels the tasks started so far and waits until they have returned.
    func cancelAll() async {
        let tasks = self.tasks.withLock { $0 }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }
}

/// Sums the counts of the `this client missed N` lines of a lag-reporting example, after
/// checking that every line has that form with `N >= 1`.
func missedTotal(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    var total = 0
    for line in lines {
        guard line.hasPrefix("this client missed "), let count = Int(line.dropFirst("this client missed ".count)) else {
            Issue.record("unexpected line: \(line)", sourceLocation: sourceLocation)
            continue
        }
        #expect(count >= 1, sourceLocation: sourceLocation)
        total += count
    }
    return total
}

/// A connection whose `close()` waits until the test lets it finish: a stop that must be
/// awaited. It announces itself once its notification handler is set.
final class StubConnection: Sendable {
    private let handler = Lock<(@Sendable (String) -> Void)?>(nil)
    private let state = Lock<(closed: Bool, released: Bool, waiting: CheckedContinuation<Void, Never>?)>(
        (false, false, nil))
    private let announced: Signal<StubConnection>
    /// Sent when `close()` begins.
    let closing = Signal<Void>()

    init(announcingTo announced: Signal<StubConnection>) {
        self.announced = announced
    }

    var onNotification: (@Sendable (String) -> Void)? {
        get { self.handler.withLock { $0 } }
        set {
            self.handler.withLock { $0 = newValue }
            self.announced.send(self)
        }
    }

    /// Calls the notification handler, as the real connection does.
    func notify(_ value: String) {
        self.handler.withLock { $0 }?(value)
    }

    /// Waits until `finishClosing()`.
    func close() async {
        self.closing.send(())
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = self.state.withLock { state -> Bool in
                if state.released { return true }
                state.waiting = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        self.state.withLock { $0.closed = true }
    }

    /// Lets `close()` return.
    func finishClosing() {
        let waiting = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.released = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume()
    }

    var isClosed: Bool { self.state.withLock { $0.closed } }
}

/// A connection to a client that stopped reading: its first `write` records the value and
/// then hangs (the socket's buffers are full) until `close()`, which fails it with
/// ``Closed``, as closing a real socket fails a pending write. Later writes fail at once.
final class StalledConnection: Sendable {
    struct Closed: Error {}

    /// The values written, in order.
    let written = PrintedLines()
    /// Sent when a write starts hanging.
    let stalled = Signal<Void>()
    private let state = Lock<(closed: Bool, pending: CheckedContinuation<Void, any Error>?)>((false, nil))

    var isClosed: Bool { self.state.withLock { $0.closed } }

    func write<Value: Sendable>(_ value: Value) async throws {
        self.written.record([value])
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let closed = self.state.withLock { state -> Bool in
                if state.closed { return true }
                state.pending = continuation
                return false
            }
            if closed { continuation.resume(throwing: Closed()) } else { self.stalled.send(()) }
        }
    }

    func close() async throws {
        let pending = self.state.withLock { state in
            state.closed = true
            defer { state.pending = nil }
            return state.pending
        }
        pending?.resume(throwing: Closed())
    }
}
