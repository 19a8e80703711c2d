// Checks every compiled example of Guides/Replay.md, Guides/Multicast.md, Guides/Subjects.md
// and Guides/MigratingFromCombine.md: each test runs the example's code (verbatim, with
// `print` writing to a `G3Log`) and asserts exactly the output the guide shows.
//
// The guides' examples are written so that their output is deterministic; where a guide says
// "later" (a user action), the test waits for the previous step explicitly, with a gate on the
// log or on `subscriberCount`, never with a sleep. Where two subscribers run concurrently the
// guide shows, and the test checks, each subscriber's lines on their own.
//
// Types the guides declare live in `G3…` namespaces (one per test) so that their names cannot
// clash with other test files; inside a namespace, `print` is the namespace's log.

import AsyncMulticast
import Foundation  // NSLock only: a lock that ThreadSanitizer understands on Linux.
import Testing

// MARK: - Helpers

/// The output of one example: the lines its `print` calls produced, in order. Thread-safe;
/// `wait(for:)` suspends until a line is there (a gate, instead of sleeping).
final class G3Log: @unchecked Sendable {  // @unchecked: all state is guarded by `lock`.
    private let lock = NSLock()
    private var storage: [String] = []
    private var waiters: [(predicate: @Sendable ([String]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []

    /// Appends one line formatted like `Swift.print` formats its items.
    func append(_ items: [Any]) {
        let line = items.map { "\($0)" }.joined(separator: " ")
        self.lock.lock()
        self.storage.append(line)
        let lines = self.storage
        var ready: [CheckedContinuation<Void, Never>] = []
        self.waiters.removeAll { waiter in
            guard waiter.predicate(lines) else { return false }
            ready.append(waiter.continuation)
            return true
        }
        self.lock.unlock()
        for continuation in ready { continuation.resume() }
    }

    var lines: [String] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.storage
    }

    /// The lines that start with `prefix`, in order: one subscriber's output.
    func lines(startingWith prefix: String) -> [String] {
        self.lines.filter { $0.hasPrefix(prefix) }
    }

    /// Suspends until `predicate` holds for the lines logged so far.
    func wait(until predicate: @escaping @Sendable ([String]) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            self.lock.lock()
            if predicate(self.storage) {
                self.lock.unlock()
                continuation.resume()
                return
            }
            self.waiters.append((predicate, continuation))
            self.lock.unlock()
        }
    }

    /// Suspends until `line` has been logged.
    func wait(for line: String) async {
        await self.wait { $0.contains(line) }
    }
}

/// Polls `condition`, yielding between attempts, a bounded number of times.
func g3Eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<200_000 {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}

// MARK: - Guides/Replay.md

// Guides/Replay.md: What replay(n) does
@Test(.timeLimit(.minutes(1)))
func g3ReplayWhatItDoes() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (updates, source) = AsyncStream.makeStream(of: String.self)
    let status = updates.replay(2)

    var first = status.makeAsyncIterator()
    source.yield("connecting")
    source.yield("connected")
    source.yield("syncing")
    for _ in 1...3 { print("first:", await first.next()!) }

    var second = status.makeAsyncIterator()   // joins after three elements were produced
    source.yield("idle")
    source.finish()
    while let s = await second.next() { print("second:", s) }
    while let s = await first.next() { print("first:", s) }

    var third = status.makeAsyncIterator()    // joins after the upstream ended
    while let s = await third.next() { print("third:", s) }

    #expect(log.lines == [
        "first: connecting",
        "first: connected",
        "first: syncing",
        "second: connected",
        "second: syncing",
        "second: idle",
        "first: idle",
        "third: syncing",
        "third: idle",
    ])
}

// Guides/Replay.md: The cache outlives the upstream
@Test(.timeLimit(.minutes(1)))
func g3ReplayCacheOutlivesUpstream() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (readings, sensor) = AsyncStream.makeStream(of: Int.self)
    let temperature = readings.replay(1)

    sensor.yield(21)
    sensor.yield(22)
    for await t in temperature {
        print("screen A:", t)
        if t == 22 { break }      // the only subscriber leaves: the upstream is cancelled
    }
    for await t in temperature {
        print("screen B:", t)
    }
    print("screen B: loop ended")

    #expect(log.lines == [
        "screen A: 21",
        "screen A: 22",
        "screen B: 22",
        "screen B: loop ended",
    ])
}

enum G3ReplayState {
    enum Connection: Sendable { case offline, connecting, online }
}

// Guides/Replay.md: replay(1) as a state holder
@Test(.timeLimit(.minutes(1)))
func g3ReplayStateHolder() async {
    typealias Connection = G3ReplayState.Connection
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (changes, network) = AsyncStream.makeStream(of: Connection.self)
    let connection = changes.replay(1)

    let statusBar = Task {
        for await state in connection { print("status bar:", state) }
    }
    network.yield(.connecting)
    network.yield(.online)

    // Later, the user opens the settings screen:
    await log.wait(for: "status bar: online")  // [test gate]
    var settings = connection.makeAsyncIterator()
    print("settings:", await settings.next()!)  // the current state, at once

    network.finish()
    await statusBar.value

    #expect(log.lines == [
        "status bar: connecting",
        "status bar: online",
        "settings: online",
    ])
}

enum G3ReplayKeepAlive {
    static let log = G3Log()
    static func print(_ items: Any...) { log.append(items) }

    static func example() async {
        let (fixes, gps) = AsyncStream.makeStream(of: String.self)
        gps.onTermination = { _ in print("gps: stopped") }
        let location = fixes.replay(1, keepAlive: .seconds(2))

        gps.yield("52.5200,13.4050")
        do {                                         // the map screen appears…
            var map = location.makeAsyncIterator()
            print("map:", await map.next()!)
        }                                            // …and goes away: its subscriber leaves
        do {                                         // back within 2 seconds
            var map = location.makeAsyncIterator()
            print("map again:", await map.next()!)  // replayed at once
            gps.yield("52.5201,13.4049")
            print("map again:", await map.next()!)  // live, from the same iteration
        }
        // Nobody comes back: 2 seconds later the upstream is cancelled.
    }
}

// Guides/Replay.md: Keeping the upstream alive: navigate away and back
@Test(.timeLimit(.minutes(1)))
func g3ReplayKeepAlive() async {
    let log = G3ReplayKeepAlive.log
    await G3ReplayKeepAlive.example()
    #expect(!log.lines.contains("gps: stopped"))  // the window is still open
    await log.wait(for: "gps: stopped")            // closes about 2 seconds after the last visit
    #expect(log.lines == [
        "map: 52.5200,13.4050",
        "map again: 52.5200,13.4050",
        "map again: 52.5201,13.4049",
        "gps: stopped",
    ])
}

// Guides/Replay.md: Dropping subscribers get fewer replayed elements
@Test(.timeLimit(.minutes(1)))
func g3ReplayDroppingPolicies() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (numbers, source) = AsyncStream.makeStream(of: Int.self)
    let recent = numbers.replay(3)
    for n in 1...5 { source.yield(n) }
    source.finish()
    for await _ in recent {}   // one subscriber runs the upstream to its end

    let policies: [SharedBufferingPolicy] = [
        .bounded(64), .unbounded, .bufferingNewest(2), .bufferingOldest(2), .bufferingNewest(0),
    ]
    for policy in policies {
        var replayed: [Int] = []
        for await n in recent.buffering(policy) { replayed.append(n) }
        print(policy, replayed)
    }

    #expect(log.lines == [
        "bounded(64) [3, 4, 5]",
        "unbounded [3, 4, 5]",
        "bufferingNewest(2) [4, 5]",
        "bufferingOldest(2) [4, 5]",
        "bufferingNewest(0) []",
    ])
}

// MARK: - Guides/Multicast.md

// Guides/Multicast.md: The race share() users hit
@Test(.timeLimit(.minutes(1)))
func g3MulticastShareRace() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    let shared = prices.share()

    feed.yield(100)
    var chart = shared.makeAsyncIterator()
    print("chart:", await chart.next()!)      // this first wait starts the upstream
    var table = shared.makeAsyncIterator()    // joins after 100 was produced
    feed.yield(101)
    feed.finish()
    while let p = await chart.next() { print("chart:", p) }
    while let p = await table.next() { print("table:", p) }

    #expect(log.lines == [
        "chart: 100",
        "chart: 101",
        "table: 101",
    ])
}

// Guides/Multicast.md: Join first, then connect
@Test(.timeLimit(.minutes(1)))
func g3MulticastJoinThenConnect() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    feed.yield(100)
    feed.yield(101)
    feed.finish()

    let multicast = prices.multicast()
    let chart = multicast.makeAsyncIterator()   // both are subscribers from here on
    let table = multicast.makeAsyncIterator()
    let chartTask = Task {
        var chart = chart
        while let p = await chart.next() { print("chart:", p) }
    }
    let tableTask = Task {
        var table = table
        while let p = await table.next() { print("table:", p) }
    }
    multicast.connect()
    await chartTask.value
    await tableTask.value

    #expect(log.lines(startingWith: "chart:") == ["chart: 100", "chart: 101"])
    #expect(log.lines(startingWith: "table:") == ["table: 100", "table: 101"])
    #expect(log.lines.count == 4)
}

// Guides/Multicast.md: Join first, then connect (tasks that subscribe themselves)
@Test(.timeLimit(.minutes(1)))
func g3MulticastJoinThenConnectTasks() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let (prices, feed) = AsyncStream.makeStream(of: Int.self)
    feed.yield(100)
    feed.yield(101)
    feed.finish()

    let multicast = prices.multicast()
    let chartTask = Task { for await p in multicast { print("chart:", p) } }
    let tableTask = Task { for await p in multicast { print("table:", p) } }
    while multicast.subscriberCount < 2 { await Task.yield() }   // both loops have subscribed
    multicast.connect()
    await chartTask.value
    await tableTask.value

    #expect(log.lines(startingWith: "chart:") == ["chart: 100", "chart: 101"])
    #expect(log.lines(startingWith: "table:") == ["table: 100", "table: 101"])
    #expect(log.lines.count == 4)
}

enum G3MulticastLifecycle {
    static let log = G3Log()
    static func print(_ items: Any...) { log.append(items) }

    /// A cold source: every iteration opens a new connection, which sends two messages and
    /// then stays open until the iteration is cancelled.
    struct ServerConnection: AsyncSequence, Sendable {
        func makeAsyncIterator() -> AsyncStream<String>.Iterator {
            print("server: connect")
            let (messages, server) = AsyncStream.makeStream(of: String.self)
            server.onTermination = { _ in print("server: disconnect") }
            server.yield("hello")
            server.yield("status: ok")
            return messages.makeAsyncIterator()
        }
    }

    static func example() async {
        let server = ServerConnection().multicast()
        var a = server.makeAsyncIterator()
        var b = server.makeAsyncIterator()

        let connection = server.connect()
        print("same connection:", server.connect() == connection)
        print("a:", await a.next()!)
        print("a:", await a.next()!)

        connection.cancel()            // a has read everything; b has read nothing yet
        while let m = await b.next() { print("b:", m) }
        print("a ended:", await a.next() == nil)

        var c = server.makeAsyncIterator()     // joins while disconnected
        let second = server.connect()          // a fresh iteration of the base
        print("new connection:", second != connection)
        print("c:", await c.next()!)
        second.cancel()
    }
}

// Guides/Multicast.md: The connection: connect, cancel, reconnect
@Test(.timeLimit(.minutes(1)))
func g3MulticastConnectionLifecycle() async {
    let log = G3MulticastLifecycle.log
    await G3MulticastLifecycle.example()
    await log.wait { $0.filter { $0 == "server: disconnect" }.count == 2 }
    #expect(log.lines.filter { !$0.hasPrefix("server:") } == [
        "same connection: true",
        "a: hello",
        "a: status: ok",
        "b: hello",
        "b: status: ok",
        "a ended: true",
        "new connection: true",
        "c: hello",
    ])
    #expect(log.lines(startingWith: "server:") == [
        "server: connect",
        "server: disconnect",
        "server: connect",
        "server: disconnect",
    ])
}

enum G3MulticastAutoconnect {
    static let log = G3Log()
    static func print(_ items: Any...) { log.append(items) }

    /// The same cold source as in the previous example.
    struct ServerConnection: AsyncSequence, Sendable {
        func makeAsyncIterator() -> AsyncStream<String>.Iterator {
            print("server: connect")
            let (messages, server) = AsyncStream.makeStream(of: String.self)
            server.onTermination = { _ in print("server: disconnect") }
            server.yield("hello")
            server.yield("status: ok")
            return messages.makeAsyncIterator()
        }
    }

    static func example() async {
        let server = ServerConnection().multicast(replay: 1).autoconnect()
        do {
            var first = server.makeAsyncIterator()
            print("first:", await first.next()!)   // this wait connects
            print("first:", await first.next()!)
        }                                           // first leaves; the connection stays open
        var second = server.makeAsyncIterator()
        print("second:", await second.next()!)     // replayed; no new connection

        server.connect().cancel()                   // the running connection, cancelled
        print("second ended:", await second.next() == nil)
    }
}

// Guides/Multicast.md: autoconnect()
@Test(.timeLimit(.minutes(1)))
func g3MulticastAutoconnect() async {
    let log = G3MulticastAutoconnect.log
    await G3MulticastAutoconnect.example()
    await log.wait(for: "server: disconnect")
    #expect(log.lines.filter { !$0.hasPrefix("server:") } == [
        "first: hello",
        "first: status: ok",
        "second: status: ok",
        "second ended: true",
    ])
    #expect(log.lines(startingWith: "server:") == [
        "server: connect",
        "server: disconnect",
    ])
}

// MARK: - Guides/Subjects.md

// Guides/Subjects.md: AsyncPassthroughSubject
@Test(.timeLimit(.minutes(1)))
func g3SubjectsPassthrough() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let events = AsyncPassthroughSubject<String, Never>()
    var early = events.makeAsyncIterator()    // a subscriber from here on
    events.send("login")
    var late = events.makeAsyncIterator()
    events.send("purchase")
    events.finish()
    events.send("logout")                     // ignored: the subject has finished
    var afterEnd = events.makeAsyncIterator()

    while let e = await early.next() { print("early:", e) }
    while let e = await late.next() { print("late:", e) }
    print("after end:", await afterEnd.next() == nil ? "ended at once" : "got an element")

    #expect(log.lines == [
        "early: login",
        "early: purchase",
        "late: purchase",
        "after end: ended at once",
    ])
}

// Guides/Subjects.md: Subscribing from a task
@Test(.timeLimit(.minutes(1)))
func g3SubjectsSubscribeFromTask() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let events = AsyncPassthroughSubject<String, Never>()
    let subscriber = events.makeAsyncIterator()
    let listener = Task {
        var subscriber = subscriber
        while let e = await subscriber.next() { print("listener:", e) }
    }
    events.send("hello")    // cannot be missed: the listener subscribed above
    events.finish()
    await listener.value

    #expect(log.lines == ["listener: hello"])
}

// Guides/Subjects.md: AsyncCurrentValueSubject
@Test(.timeLimit(.minutes(1)))
func g3SubjectsCurrentValue() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let volume = AsyncCurrentValueSubject<Int, Never>(5)
    var slider = volume.makeAsyncIterator()                          // default: .bufferingNewest(1)
    var history = volume.buffering(.unbounded).makeAsyncIterator()   // keeps every value
    volume.value = 6                                                 // setting `value` sends it
    volume.send(7)
    volume.finish()
    volume.send(8)                                                   // ignored: finished
    print("value:", volume.value)

    while let v = await slider.next() { print("slider:", v) }
    while let v = await history.next() { print("history:", v) }
    for await v in volume { print("late:", v) }                      // subscribes after the end

    #expect(log.lines == [
        "value: 7",
        "slider: 7",
        "history: 5",
        "history: 6",
        "history: 7",
        "late: 7",
    ])
}

// Guides/Subjects.md: Completion
@Test(.timeLimit(.minutes(1)))
func g3SubjectsCompletion() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    struct Disconnected: Error {}

    let messages = AsyncPassthroughSubject<String, Disconnected>()
    var reader = messages.makeAsyncIterator()
    messages.send("hi")
    messages.fail(Disconnected())
    messages.finish()                         // ignored: already completed
    do {
        while let m = try await reader.next() { print("reader:", m) }
    } catch {
        print("reader: failed with", error)
    }

    var late = messages.makeAsyncIterator()
    do {
        _ = try await late.next()
    } catch {
        print("late: failed with", error)
    }

    #expect(log.lines == [
        "reader: hi",
        "reader: failed with Disconnected()",
        "late: failed with Disconnected()",
    ])
}

// Guides/Subjects.md: Waiting for room: send(waitingForRoom:)
@Test(.timeLimit(.minutes(1)))
func g3SubjectsWaitingForRoom() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let jobs = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
    var worker = jobs.makeAsyncIterator()
    await jobs.send(waitingForRoom: 1)
    await jobs.send(waitingForRoom: 2)         // the worker now holds 2 jobs: full
    let producer = Task {
        await jobs.send(waitingForRoom: 3)     // waits until the worker takes one
        print("producer: sent 3")
    }
    // [test only] the producer must still be waiting: nothing was consumed.
    for _ in 0..<1_000 { await Task.yield() }
    #expect(!log.lines.contains("producer: sent 3"))

    print("worker:", await worker.next()!)     // taking 1 makes room: the producer goes on
    await producer.value
    print("worker:", await worker.next()!)
    print("worker:", await worker.next()!)

    #expect(log.lines(startingWith: "worker:") == ["worker: 1", "worker: 2", "worker: 3"])
    #expect(log.lines(startingWith: "producer:") == ["producer: sent 3"])
    // "producer: sent 3" comes before "worker: 2" (the example awaits the producer first);
    // whether it comes before or after "worker: 1" is up to the scheduler.
    let lines = log.lines
    #expect(lines.firstIndex(of: "producer: sent 3")! < lines.firstIndex(of: "worker: 2")!)
    #expect(lines.count == 4)
}

// Guides/Subjects.md: Waiting for room: send(waitingForRoom:) (a subscriber that answers)
@Test(.timeLimit(.minutes(1)))
func g3SubjectsEcho() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let echo = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
    var reader = echo.makeAsyncIterator()
    for n in 1...3 { echo.send(n) }                  // a burst
    var seen: [Int] = []
    while seen.count < 9, let n = await reader.next() {
        seen.append(n)
        await echo.send(waitingForRoom: n + 10)      // the answer goes to the same subject
    }
    print(seen)

    #expect(log.lines == ["[1, 2, 3, 11, 12, 13, 21, 22, 23]"])
}

// Guides/Subjects.md: One subscriber may drop, another may not
@Test(.timeLimit(.minutes(1)))
func g3SubjectsPerSubscriberBuffering() async {
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }

    let taps = AsyncPassthroughSubject<String, Never>()             // .unbounded by default
    var ui = taps.makeAsyncIterator()                                 // must see every tap
    var logger = taps.buffering(.bufferingNewest(2)).makeAsyncIterator()  // may drop the oldest
    for button in ["play", "pause", "play", "next", "stop"] { taps.send(button) }
    taps.finish()

    while let t = await ui.next() { print("ui:", t) }
    while let t = await logger.next() { print("logger:", t) }

    #expect(log.lines == [
        "ui: play",
        "ui: pause",
        "ui: play",
        "ui: next",
        "ui: stop",
        "logger: next",
        "logger: stop",
    ])
}

enum G3SubjectsSharedSource {
    static let log = G3Log()
    static func print(_ items: Any...) { log.append(items) }

    /// Stands in for a callback API such as a network path monitor: once started, it
    /// reports the current path through `onUpdate`.
    final class PathMonitor: Sendable {
        let onUpdate: @Sendable (String) -> Void
        init(onUpdate: @escaping @Sendable (String) -> Void) { self.onUpdate = onUpdate }
        func start() { print("monitor: start"); onUpdate("wifi") }
        func stop() { print("monitor: stop") }
    }

    static let paths = AsyncSharedSource<String, Never>(replay: 1) { emitter in
        let monitor = PathMonitor { path in emitter.send(path) }
        monitor.start()
        return { monitor.stop() }
    }

    static func firstVisit() async {
        var statusBar = paths.makeAsyncIterator()
        print("status bar:", await statusBar.next()!)   // this first wait starts the monitor
        var sync = paths.makeAsyncIterator()
        print("sync:", await sync.next()!)              // the latest path, replayed
    }   // both iterators are released here: the last one out stops the monitor

    static func laterVisit() async {
        var settings = paths.makeAsyncIterator()
        print("settings:", await settings.next()!)      // the cached path, at once
        print("settings:", await settings.next()!)      // this wait starts a new session
    }
}

// Guides/Subjects.md: Callback producers: AsyncSharedSource
@Test(.timeLimit(.minutes(1)))
func g3SubjectsSharedSource() async {
    let log = G3SubjectsSharedSource.log
    await G3SubjectsSharedSource.firstVisit()
    // Later, the user opens the settings screen:
    await log.wait(for: "monitor: stop")                         // [test gate]
    await G3SubjectsSharedSource.laterVisit()
    await log.wait { $0.filter { $0 == "monitor: stop" }.count == 2 }
    #expect(log.lines == [
        "monitor: start",
        "status bar: wifi",
        "sync: wifi",
        "monitor: stop",
        "settings: wifi",
        "monitor: start",
        "settings: wifi",
        "monitor: stop",
    ])
}

// MARK: - Guides/MigratingFromCombine.md

enum G3Migrating {
    actor FollowRepository {
        private let followCount = AsyncCurrentValueSubject<Int, Never>(0)

        /// Each iteration is a new subscriber: it receives the current count, then every change.
        nonisolated func listen() -> some AsyncSequence<Int, Never> { followCount }

        func follow() {
            // Request the server's follow API here, then update the cached count:
            followCount.value += 1
        }
    }
}

// Guides/MigratingFromCombine.md: FollowRepository with AsyncCurrentValueSubject
@Test(.timeLimit(.minutes(1)))
func g3MigratingFollowRepository() async {
    typealias FollowRepository = G3Migrating.FollowRepository
    let log = G3Log()
    @Sendable func print(_ items: Any...) { log.append(items) }
    // [test gate] Each step of the driver is a user action: it comes after both open
    // screens have shown the previous count.
    func shown(_ lines: String...) async { for line in lines { await log.wait(for: line) } }

    let repository = FollowRepository()
    let screen1 = Task { for await count in repository.listen() { print("screen 1:", count) } }
    let screen2 = Task { for await count in repository.listen() { print("screen 2:", count) } }

    // Each of the following lines is a user action, taken after the open screens have shown
    // the previous count:
    await shown("screen 1: 0", "screen 2: 0")   // [test gate]
    await repository.follow()
    await shown("screen 1: 1", "screen 2: 1")   // [test gate]
    await repository.follow()
    await shown("screen 1: 2", "screen 2: 2")   // [test gate]
    screen2.cancel()            // the user closes screen 2
    await screen2.value                         // [test only]
    await repository.follow()
    await shown("screen 1: 3")                  // [test gate]
    await repository.follow()
    await shown("screen 1: 4")                  // [test gate]
    screen1.cancel()                            // [test only]
    await screen1.value                         // [test only]

    #expect(log.lines(startingWith: "screen 1:") == [
        "screen 1: 0", "screen 1: 1", "screen 1: 2", "screen 1: 3", "screen 1: 4",
    ])
    #expect(log.lines(startingWith: "screen 2:") == [
        "screen 2: 0", "screen 2: 1", "screen 2: 2",
    ])
}
