// Checks the section "SwiftUI: create the sequence once, iterate it in .task" of
// Guides/MigratingFromCombine.md: its two view models, verbatim (the mistake and the fix), and
// what the guide says happens to them. The views are not compiled (SwiftUI exists on Apple
// platforms only); a `ViewStandIn` (Support/ViewStandIn.swift) does what their `.task` does:
// it starts a task iterating the model's sequence when the view appears, and cancels it when
// the view disappears.
//
// The suite's display name is the guide's section, and each example's namespace carries the
// `// Guides/MigratingFromCombine.md: <section>` comment of the other guide tests. Names the
// guide declares live in a `private` namespace per example. `print` is a local function of
// each test recording into that test's own `PrintedLines`, so the tests may run in parallel.
// Every step that follows another task's work waits for it explicitly (a subscriber count, a
// printed line, an upstream's start or end), never with a sleep.

import AsyncMulticast
import Observation
import Testing

// Guides/MigratingFromCombine.md: SwiftUI: create the sequence once, iterate it in .task
private enum SwiftUIMistakeExample {
    // The mistake:
    @MainActor @Observable final class PlayerModel {
        private var continuation: AsyncStream<String>.Continuation?
        var events: AsyncStream<String> {  // a new stream on every read…
            AsyncStream { self.continuation = $0 }  // …and the producer now feeds only that one
        }
        func play() { continuation?.yield("play") }
    }
}

// Guides/MigratingFromCombine.md: SwiftUI: create the sequence once, iterate it in .task
private enum SwiftUIFixExample {
    // The fix:
    @MainActor @Observable final class PlayerModel {
        let events = AsyncPassthroughSubject<String, Never>()  // created once, with the model
        func play() { events.send("play") }
    }
}

/// The fix's shape, with the model's events shared from an upstream (`share()`): the guide's
/// note on the upstream of a `share()` or `replay(n)` sequence. (Test only.)
private enum SwiftUISharedExample {
    @MainActor @Observable final class FeedModel {
        let events: AsyncShareSequence<Int, Never>
        init(events: AsyncShareSequence<Int, Never>) { self.events = events }
    }
}

@Suite("Guides/MigratingFromCombine.md: SwiftUI: create the sequence once, iterate it in .task")
@MainActor
struct MigratingFromCombineSwiftUIGuideTests {
    /// The mistake: `.task` iterates the stream of the first evaluation of `body`, and the
    /// next evaluation points `play()` at a new stream, which nobody iterates.
    @Test("the mistake: events played after `body` read `events` again are lost", .timeLimit(.minutes(3)))
    func mistakeLosesTheEventsAfterASecondRead() async {
        let (printed, print) = PrintedLines.recorder()
        let model = SwiftUIMistakeExample.PlayerModel()
        let events = model.events  // the first evaluation of `body`
        let view = ViewStandIn { for await event in events { print(event) } }
        view.appear()
        model.play()
        await printed.wait(for: "play")  // until `body` is evaluated again, events arrive

        let reread = model.events  // `body` is evaluated again (any change of the view's state)
        model.play()
        model.play()
        await view.disappear()
        #expect(printed.lines == ["play"], "the view's task never got the events played after the second read")

        // They went into the stream of the second read, which no task iterates.
        var orphan = reread.makeAsyncIterator()
        #expect(await orphan.next() == "play")
        #expect(await orphan.next() == "play")
    }

    /// The fix: the model's one subject is read by every evaluation, and the view's `.task` is
    /// a subscriber of it exactly while the view is on screen.
    @Test("the fix: the view receives what is played while it is on screen", .timeLimit(.minutes(3)))
    func fixReceivesWhileOnScreen() async throws {
        let (printed, print) = PrintedLines.recorder()
        let model = SwiftUIFixExample.PlayerModel()
        #expect(model.events === model.events, "every read returns the same instance")
        let view = ViewStandIn { for await event in model.events { print(event) } }

        view.appear()
        try await model.events.waitForSubscribers(atLeast: 1)  // the task has subscribed
        model.play()
        await printed.wait(for: "play")
        await view.disappear()
        #expect(model.events.subscriberCount == 0, "the view's subscriber left with its task")

        model.play()  // nobody is subscribed: a passthrough subject keeps nothing for later
        view.appear()  // the view comes back: a new task, a new subscriber
        try await model.events.waitForSubscribers(atLeast: 1)
        #expect(model.events.subscriberCount == 1)
        model.play()
        _ = await printed.lines(waitingFor: 2)
        await view.disappear()
        #expect(printed.lines == ["play", "play"], "the play while the view was away is not delivered")
        #expect(model.events.subscriberCount == 0)
    }

    /// "every `.task` that iterates it is one more subscriber", and "only this view's
    /// subscriber leaves" when one view disappears.
    @Test("the fix: each view is one subscriber, and leaves alone", .timeLimit(.minutes(3)))
    func fixEachViewIsOneSubscriber() async throws {
        let (printed, print) = PrintedLines.recorder()
        let model = SwiftUIFixExample.PlayerModel()
        let list = ViewStandIn { for await event in model.events { print("list:", event) } }
        let detail = ViewStandIn { for await event in model.events { print("detail:", event) } }

        list.appear()
        detail.appear()
        try await model.events.waitForSubscribers(atLeast: 2)
        #expect(model.events.subscriberCount == 2)
        model.play()
        await printed.wait(for: "list: play")
        await printed.wait(for: "detail: play")

        await detail.disappear()
        #expect(model.events.subscriberCount == 1, "only the detail view's subscriber left")
        model.play()
        _ = await printed.lines(waitingFor: 3)
        await list.disappear()
        #expect(model.events.subscriberCount == 0)
        #expect(printed.lines(startingWith: "list:") == ["list: play", "list: play"])
        #expect(printed.lines(startingWith: "detail:") == ["detail: play"])
    }

    /// A view that comes and goes many times leaves no subscriber behind, and once the view
    /// and the model are dropped, nothing (no task of the view's) keeps the model alive.
    @Test("the fix: appearing and disappearing leaks no subscriber and no model", .timeLimit(.minutes(2)))
    func fixAppearAndDisappearLeakNothing() async throws {
        let (printed, print) = PrintedLines.recorder()
        let cycles = 50
        weak var observed: SwiftUIFixExample.PlayerModel?
        do {
            let model = SwiftUIFixExample.PlayerModel()
            observed = model
            let view = ViewStandIn { for await event in model.events { print(event) } }
            for cycle in 1...cycles {
                view.appear()
                try await model.events.waitForSubscribers(atLeast: 1)
                model.play()
                _ = await printed.lines(waitingFor: cycle)
                await view.disappear()
                guard model.events.subscriberCount == 0 else {
                    Issue.record("cycle \(cycle): \(model.events.subscriberCount) subscribers after disappearing")
                    break
                }
            }
            #expect(printed.lines.count == cycles, "one event per visit, each received once")
        }
        #expect(observed == nil, "nothing holds the model once the view and the test dropped it")
    }

    /// "On a `share()` … sequence, the upstream stops when the last view leaves": one view
    /// leaving keeps it running for the other, the last one stops it, and a view coming back
    /// starts it again.
    @Test("a shared upstream stops when the last view disappears, and restarts", .timeLimit(.minutes(3)))
    func sharedUpstreamFollowsTheViews() async throws {
        let (printed, print) = PrintedLines.recorder()
        let source = FedSource()
        let model = SwiftUISharedExample.FeedModel(events: source.share())
        let list = ViewStandIn { for await n in model.events { print("list:", n) } }
        let detail = ViewStandIn { for await n in model.events { print("detail:", n) } }

        list.appear()
        await source.control.waitForStart(of: 0)
        detail.appear()
        try await model.events.waitForSubscribers(atLeast: 2)
        source.control.yield(1)
        await printed.wait(for: "list: 1")
        await printed.wait(for: "detail: 1")
        #expect(source.control.iteratorCount == 1, "two views, one iteration of the upstream")

        await list.disappear()
        #expect(model.events.subscriberCount == 1)
        #expect(source.control.end(of: 0) == nil, "the detail view still iterates: the upstream runs on")
        source.control.yield(2)
        await printed.wait(for: "detail: 2")

        await detail.disappear()  // the last view leaves: the upstream is cancelled
        let end = await source.control.waitForEnd()
        #expect(end?.iteration == 0 && end?.end == .cancelled)

        list.appear()  // a view comes back: a new iteration of the upstream
        await source.control.waitForStart(of: 1)
        source.control.yield(3, to: 1)
        await printed.wait(for: "list: 3")
        await list.disappear()
        let restartedEnd = await source.control.waitForEnd()
        #expect(restartedEnd?.iteration == 1 && restartedEnd?.end == .cancelled)

        #expect(source.control.iteratorCount == 2)
        #expect(printed.lines(startingWith: "list:") == ["list: 1", "list: 3"])
        #expect(printed.lines(startingWith: "detail:") == ["detail: 1", "detail: 2"])
    }

    /// "Calling `share()` in `body` creates a new, separate shared iteration each time": the
    /// views of two evaluations of such a `body` run two iterations of the upstream, each
    /// feeding only its own view.
    @Test("share() called in body starts a separate upstream iteration at each evaluation", .timeLimit(.minutes(3)))
    func shareInBodyIsSeparateEachTime() async throws {
        let (printed, print) = PrintedLines.recorder()
        let source = FedSource()
        let first = source.share()  // what one evaluation of `body` creates
        let second = source.share()  // and the next one
        let list = ViewStandIn { for await n in first { print("list:", n) } }
        let detail = ViewStandIn { for await n in second { print("detail:", n) } }

        list.appear()
        await source.control.waitForStart(of: 0)
        detail.appear()
        await source.control.waitForStart(of: 1)
        #expect(first.subscriberCount == 1 && second.subscriberCount == 1)
        source.control.yield(1, to: 0)
        await printed.wait(for: "list: 1")
        await list.disappear()
        await detail.disappear()
        #expect(printed.lines == ["list: 1"], "the detail view iterates another iteration, never fed")
    }

    /// "give it a `keepAlive` window if views often disappear and come back": a view back
    /// within the window continues the same iteration of the upstream (Replay.md: "a
    /// subscriber that arrives within the window continues the same iteration"); once the
    /// window has passed with no view, the upstream stops, and the next view restarts it.
    @Test("a shared upstream with keepAlive survives a view coming back within the window", .timeLimit(.minutes(2)))
    func sharedUpstreamKeepAliveWindow() async throws {
        let (printed, print) = PrintedLines.recorder()
        let clock = ManualClock()
        let source = FedSource()
        let model = SwiftUISharedExample.FeedModel(events: source.share(keepAlive: .seconds(2), clock: clock))
        let view = ViewStandIn { for await n in model.events { print(n) } }

        view.appear()
        await source.control.waitForStart(of: 0)
        try await model.events.waitForSubscribers(atLeast: 1)
        source.control.yield(1)
        await printed.wait(for: "1")
        await view.disappear()  // at 0 s: the window opens, until 2 s
        #expect(model.events.subscriberCount == 0)

        clock.advance(by: .seconds(1))
        view.appear()  // back at 1 s, within the window
        try await model.events.waitForSubscribers(atLeast: 1)
        source.control.yield(2, to: 0)  // the same iteration still runs, and feeds the view
        await printed.wait(for: "2")
        #expect(source.control.iteratorCount == 1, "the upstream was not restarted")

        await view.disappear()  // at 1 s: the window opens again, until 3 s
        clock.advance(by: .seconds(2) - .nanoseconds(1))
        await letOthersRun()
        #expect(source.control.end(of: 0) == nil, "the window is still open")
        clock.advance(by: .nanoseconds(1))
        let end = await source.control.waitForEnd()  // nobody came back: the upstream stops
        #expect(end?.iteration == 0 && end?.end == .cancelled)

        view.appear()  // after the window: a new iteration
        await source.control.waitForStart(of: 1)
        source.control.yield(3, to: 1)
        await printed.wait(for: "3")
        await view.disappear()
        clock.advance(by: .seconds(2))
        let restartedEnd = await source.control.waitForEnd()
        #expect(restartedEnd?.iteration == 1 && restartedEnd?.end == .cancelled)
        #expect(printed.lines == ["1", "2", "3"])
    }
}
