// Checks Guides/Subjects.md: every compiled example, and the output the guide shows for it.
//
// Each test carries a `// Guides/Subjects.md: <section>` comment, which is also its display
// name, and contains the example verbatim; the lines marked `[test gate]` or `[test only]` are
// the test's own. The test then asserts exactly the output the guide shows: all lines in order,
// or, where the guide shows the lines of concurrent subscribers separately, each subscriber's
// lines on their own. `print` is a local function of each test (or a `static func print` of the
// namespace that holds an example's declarations) that records the line in that example's own
// `PrintedLines` (the per-example way of PrintedLines.swift), so the tests may run in parallel.
// Names the guide declares live in a `private` namespace per example.
//
// The guide's examples are written so that their output is deterministic; where it says
// "later" (a user action), the test waits for the previous step explicitly, with a gate on
// the printed lines or on `subscriberCount`, never with a sleep.

import AsyncMulticast
import Testing

// Guides/Subjects.md: AsyncPassthroughSubject
@Test("Guides/Subjects.md: AsyncPassthroughSubject", .timeLimit(.minutes(3)))
func subjectsGuidePassthrough() async {
    let (printed, print) = PrintedLines.recorder()

    let events = AsyncPassthroughSubject<String, Never>()
    var early = events.makeAsyncIterator()  // a subscriber from here on
    events.send("login")
    var late = events.makeAsyncIterator()
    events.send("purchase")
    events.finish()
    events.send("logout")  // ignored: the subject has finished
    var afterEnd = events.makeAsyncIterator()

    while let e = await early.next() { print("early:", e) }
    while let e = await late.next() { print("late:", e) }
    print("after end:", await afterEnd.next() == nil ? "ended at once" : "got an element")

    #expect(
        printed.lines == [
            "early: login",
            "early: purchase",
            "late: purchase",
            "after end: ended at once",
        ])
}

// Guides/Subjects.md: Subscribing from a task
@Test("Guides/Subjects.md: Subscribing from a task", .timeLimit(.minutes(3)))
func subjectsGuideSubscribingFromATask() async {
    let (printed, print) = PrintedLines.recorder()

    let events = AsyncPassthroughSubject<String, Never>()
    let subscriber = events.makeAsyncIterator()
    let listener = Task {
        var subscriber = subscriber
        while let e = await subscriber.next() { print("listener:", e) }
    }
    events.send("hello")  // cannot be missed: the listener subscribed above
    events.finish()
    await listener.value

    #expect(printed.lines == ["listener: hello"])
}

// Guides/Subjects.md: AsyncCurrentValueSubject
@Test("Guides/Subjects.md: AsyncCurrentValueSubject", .timeLimit(.minutes(3)))
func subjectsGuideCurrentValue() async {
    let (printed, print) = PrintedLines.recorder()

    let volume = AsyncCurrentValueSubject<Int, Never>(5)
    var slider = volume.makeAsyncIterator()  // default: .bufferingNewest(1)
    var history = volume.buffering(.unbounded).makeAsyncIterator()  // keeps every value
    volume.value = 6  // setting `value` sends it
    volume.send(7)
    volume.finish()
    volume.send(8)  // ignored: finished
    print("value:", volume.value)

    while let v = await slider.next() { print("slider:", v) }
    while let v = await history.next() { print("history:", v) }
    for await v in volume { print("late:", v) }  // subscribes after the end

    #expect(
        printed.lines == [
            "value: 7",
            "slider: 7",
            "history: 5",
            "history: 6",
            "history: 7",
            "late: 7",
        ])
}

// Guides/Subjects.md: Changing the value from several tasks: update(_:)
@Test("Guides/Subjects.md: Changing the value from several tasks: update(_:)", .timeLimit(.minutes(3)))
func subjectsGuideAtomicUpdate() async {
    let (printed, print) = PrintedLines.recorder()

    let cart = AsyncCurrentValueSubject<[String], Never>([])
    await withTaskGroup(of: Void.self) { group in
        for item in ["apple", "bread", "milk"] {
            group.addTask { cart.update { $0 + [item] } }  // not cart.value.append(item)
        }
    }
    print(cart.value.sorted())

    #expect(printed.lines == [#"["apple", "bread", "milk"]"#])
}

/// What the guide's advice rests on: many concurrent `update(_:)` calls lose nothing.
@Test("update(_:) from many tasks at once loses no update", .timeLimit(.minutes(3)))
func atomicUpdateLosesNothing() async {
    let counter = AsyncCurrentValueSubject<Int, Never>(0)
    var history = counter.buffering(.unbounded).makeAsyncIterator()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<8 {
            group.addTask { for _ in 0..<1_000 { counter.update { $0 + 1 } } }
        }
    }
    counter.finish()
    #expect(counter.value == 8_000)
    var seen: [Int] = []
    while let value = await history.next() { seen.append(value) }
    #expect(seen == Array(0...8_000), "every update is sent, in the order applied")
}

// Guides/Subjects.md: Completion
@Test("Guides/Subjects.md: Completion", .timeLimit(.minutes(3)))
func subjectsGuideCompletion() async {
    let (printed, print) = PrintedLines.recorder()

    struct Disconnected: Error {}

    let messages = AsyncPassthroughSubject<String, Disconnected>()
    var reader = messages.makeAsyncIterator()
    messages.send("hi")
    messages.fail(Disconnected())
    messages.finish()  // ignored: already completed
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

    #expect(
        printed.lines == [
            "reader: hi",
            "reader: failed with Disconnected()",
            "late: failed with Disconnected()",
        ])
}

// Guides/Subjects.md: Waiting for room: send(waitingForRoom:)
@Test("Guides/Subjects.md: Waiting for room: send(waitingForRoom:)", .timeLimit(.minutes(3)))
func subjectsGuideWaitingForRoom() async {
    let (printed, print) = PrintedLines.recorder()

    let jobs = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(2))
    var worker = jobs.makeAsyncIterator()
    await jobs.send(waitingForRoom: 1)
    await jobs.send(waitingForRoom: 2)  // the worker now holds 2 jobs: full
    let producer = Task {
        await jobs.send(waitingForRoom: 3)  // waits until the worker takes one
        print("producer: sent 3")
    }
    // [test only] the producer must still be waiting: nothing was consumed. A wrong one would
    // [test only] go on within a few turns (a thousand took 48 of the 60 s limit under TSan).
    for _ in 0..<100 { await Task.yield() }  // [test only]
    #expect(!printed.lines.contains("producer: sent 3"))  // [test only]

    print("worker:", await worker.next()!)  // taking 1 makes room: the producer goes on
    await producer.value
    print("worker:", await worker.next()!)
    print("worker:", await worker.next()!)

    #expect(printed.lines(startingWith: "worker:") == ["worker: 1", "worker: 2", "worker: 3"])
    #expect(printed.lines(startingWith: "producer:") == ["producer: sent 3"])
    // "producer: sent 3" comes before "worker: 2" (the example awaits the producer first);
    // whether it comes before or after "worker: 1" is up to the scheduler.
    let lines = printed.lines
    #expect(lines.firstIndex(of: "producer: sent 3")! < lines.firstIndex(of: "worker: 2")!)
    #expect(lines.count == 4)
}

// Guides/Subjects.md: Waiting for room: send(waitingForRoom:) (a subscriber that answers)
@Test(
    "Guides/Subjects.md: Waiting for room: send(waitingForRoom:) (a subscriber that answers)", .timeLimit(.minutes(3)))
func subjectsGuideASubscriberThatAnswers() async {
    let (printed, print) = PrintedLines.recorder()

    let echo = AsyncPassthroughSubject<Int, Never>(buffering: .bounded(4))
    var reader = echo.makeAsyncIterator()
    for n in 1...3 { echo.send(n) }  // a burst
    var seen: [Int] = []
    while seen.count < 9, let n = await reader.next() {
        seen.append(n)
        await echo.send(waitingForRoom: n + 10)  // the answer goes to the same subject
    }
    print(seen)

    #expect(printed.lines == ["[1, 2, 3, 11, 12, 13, 21, 22, 23]"])
}

// Guides/Subjects.md: One subscriber may drop, another may not
@Test("Guides/Subjects.md: One subscriber may drop, another may not", .timeLimit(.minutes(3)))
func subjectsGuidePerSubscriberBuffering() async {
    let (printed, print) = PrintedLines.recorder()

    let taps = AsyncPassthroughSubject<String, Never>()  // .unbounded by default
    var ui = taps.makeAsyncIterator()  // must see every tap
    var logger = taps.buffering(.bufferingNewest(2)).makeAsyncIterator()  // may drop the oldest
    for button in ["play", "pause", "play", "next", "stop"] { taps.send(button) }
    taps.finish()

    while let t = await ui.next() { print("ui:", t) }
    while let t = await logger.next() { print("logger:", t) }

    #expect(
        printed.lines == [
            "ui: play",
            "ui: pause",
            "ui: play",
            "ui: next",
            "ui: stop",
            "logger: next",
            "logger: stop",
        ])
}

/// The AsyncSharedSource example declares a class inside its body, which cannot use a
/// `print` of the enclosing type or function: this file-wide `print` records its lines (the
/// other tests of this file declare a local `print` of their own, which shadows this one).
private func print(_ items: Any...) { SubjectsSharedSourceExample.printed.record(items) }

private enum SubjectsSharedSourceExample {
    static let printed = PrintedLines()

    static func example() async {  // (test only)
        /// Stands in for a callback API such as a network path monitor: once started, it
        /// reports the current path through `onUpdate`.
        final class PathMonitor: Sendable {
            let onUpdate: @Sendable (String) -> Void
            init(onUpdate: @escaping @Sendable (String) -> Void) { self.onUpdate = onUpdate }
            func start() {
                print("monitor: start")
                onUpdate("wifi")
            }
            func stop() { print("monitor: stop") }
        }

        let paths = AsyncSharedSource<String, Never>(replay: 1, replayExpiration: .seconds(Int64.max)) { emitter in
            let monitor = PathMonitor { path in emitter.send(path) }
            monitor.start()
            return { monitor.stop() }
        }

        do {
            var statusBar = paths.makeAsyncIterator()
            print("status bar:", await statusBar.next()!)  // this first wait starts the monitor
            var sync = paths.makeAsyncIterator()
            print("sync:", await sync.next()!)  // the latest path, replayed
        }  // both iterators are released here: the last one out stops the monitor

        // Later, the user opens the settings screen:
        await printed.wait(for: "monitor: stop")  // [test gate]
        do {
            var settings = paths.makeAsyncIterator()
            print("settings:", await settings.next()!)  // the cached path, at once
            print("settings:", await settings.next()!)  // this wait starts a new session
        }
        await printed.wait { $0.filter { $0 == "monitor: stop" }.count == 2 }  // [test only]
    }  // (test only)
}

// Guides/Subjects.md: Callback producers: AsyncSharedSource
@Test("Guides/Subjects.md: Callback producers: AsyncSharedSource", .timeLimit(.minutes(3)))
func subjectsGuideAsyncSharedSource() async {
    let printed = SubjectsSharedSourceExample.printed
    await SubjectsSharedSourceExample.example()
    #expect(
        printed.lines == [
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
