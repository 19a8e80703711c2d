// Checks Guides/MigratingFromCombine.md: its compiled examples (the follow counter, the weak
// observer), and the output the guide shows for each screen. The SwiftUI section's view
// models are checked in MigratingFromCombineSwiftUIGuideTests.swift; its views are not
// compiled (SwiftUI exists on Apple platforms only).
//
// Each test carries a `// Guides/MigratingFromCombine.md: <section>` comment, which is also its
// display name, and contains the example verbatim; the lines marked `[test gate]` or
// `[test only]` are the test's own. The test then asserts exactly the output the guide shows:
// all lines in order, or, where the guide shows the lines of concurrent subscribers separately,
// each subscriber's lines on their own. `print` is a local function of each test (or a
// `static func print` of the namespace that holds an example's declarations) that records the
// line in that example's own `PrintedLines` (the per-example way of PrintedLines.swift), so the
// tests may run in parallel. Names the guide declares live in a `private` namespace per
// example.
//
// The guide's examples are written so that their output is deterministic; where it says
// "later" (a user action), the test waits for the previous step explicitly, with a gate on
// the printed lines or on `subscriberCount`, never with a sleep.

import AsyncMulticast
import Testing

private enum MigratingExample {
    actor FollowRepository {
        private let followCount = AsyncCurrentValueSubject<Int, Never>(0)

        /// Each iteration is a new subscriber: it receives the current count, then every change.
        nonisolated func listen() -> some AsyncSequence<Int, Never> & Sendable { followCount }

        func follow() {
            // Request the server's follow API here, then update the cached count:
            followCount.value += 1
        }
    }

    @MainActor final class FollowerBadge {
        private(set) var text = ""
        private var observation: Task<Void, Never>?

        init(counts: some AsyncSequence<Int, Never> & Sendable) {
            observation = Task { [weak self] in
                for await count in counts {
                    guard let self else { return }
                    self.text = "\(count) followers"
                }
            }
        }

        deinit { observation?.cancel() }
    }

    /// The mistake the guide warns about: the task holds the object strongly. (Test only.)
    @MainActor final class LeakingBadge {
        private(set) var text = ""
        var observation: Task<Void, Never>?

        init(counts: some AsyncSequence<Int, Never> & Sendable) {
            observation = Task {
                for await count in counts { self.text = "\(count) followers" }
            }
        }

        deinit { observation?.cancel() }
    }
}

// Guides/MigratingFromCombine.md: Example: a follow counter shared by two screens
@Test("Guides/MigratingFromCombine.md: Example: a follow counter shared by two screens", .timeLimit(.minutes(3)))
func migratingGuideFollowRepository() async {
    typealias FollowRepository = MigratingExample.FollowRepository
    let (printed, print) = PrintedLines.recorder()
    // [test gate] Each step of the driver is a user action: it comes after both open
    // screens have shown the previous count.
    func shown(_ lines: String...) async { for line in lines { await printed.wait(for: line) } }

    let repository = FollowRepository()
    let screen1 = Task { for await count in repository.listen() { print("screen 1:", count) } }
    let screen2 = Task { for await count in repository.listen() { print("screen 2:", count) } }

    // Each of the following lines is a user action, taken after the open screens have shown
    // the previous count:
    await shown("screen 1: 0", "screen 2: 0")  // [test gate]
    await repository.follow()
    await shown("screen 1: 1", "screen 2: 1")  // [test gate]
    await repository.follow()
    await shown("screen 1: 2", "screen 2: 2")  // [test gate]
    screen2.cancel()  // the user closes screen 2
    await screen2.value  // [test only]
    await repository.follow()
    await shown("screen 1: 3")  // [test gate]
    await repository.follow()
    await shown("screen 1: 4")  // [test gate]
    screen1.cancel()  // [test only]
    await screen1.value  // [test only]

    #expect(
        printed.lines(startingWith: "screen 1:") == [
            "screen 1: 0", "screen 1: 1", "screen 1: 2", "screen 1: 3", "screen 1: 4",
        ])
    #expect(
        printed.lines(startingWith: "screen 2:") == [
            "screen 2: 0", "screen 2: 1", "screen 2: 2",
        ])
}

/// The guide's `listen()` returns `some AsyncSequence<Int, Never> & Sendable` so that callers
/// can share it: this only has to compile, and replay the current count.
@Test("Guides/MigratingFromCombine.md: an opaque `& Sendable` sequence can be replayed", .timeLimit(.minutes(3)))
func migratingGuideOpaqueSequenceCanBeReplayed() async {
    let repository = MigratingExample.FollowRepository()
    let counts = repository.listen().replay(1)
    var reader = counts.makeAsyncIterator()
    #expect(await reader.next() == 0)
}

// Guides/MigratingFromCombine.md: Observing from an object without keeping it alive
@Test("Guides/MigratingFromCombine.md: Observing from an object without keeping it alive", .timeLimit(.minutes(3)))
@MainActor
func migratingGuideWeakObserver() async throws {
    typealias FollowerBadge = MigratingExample.FollowerBadge
    let followers = AsyncCurrentValueSubject<Int, Never>(3)
    var badge: FollowerBadge? = FollowerBadge(counts: followers)
    weak let observed = badge  // [test only]
    try await waitUntil("the badge shows the count") { observed?.text == "3 followers" }  // [test gate]
    followers.send(4)  // [test only]
    try await waitUntil("the badge shows the new count") { observed?.text == "4 followers" }  // [test gate]
    // … the screen shows the badge, then the user leaves it:
    badge = nil

    #expect(badge == nil && observed == nil, "nothing else holds the badge: it is freed at once")
    try await followers.waitForSubscribersToLeave()
    #expect(followers.subscriberCount == 0)
}

/// The other half of the guide's claim: capturing `self` strongly keeps the object alive and
/// subscribed after the last reference is dropped.
@Test("a task that captures self strongly keeps the object alive and subscribed", .timeLimit(.minutes(3)))
@MainActor
func strongCaptureKeepsTheObserverAlive() async throws {
    let followers = AsyncCurrentValueSubject<Int, Never>(3)
    var badge: MigratingExample.LeakingBadge? = MigratingExample.LeakingBadge(counts: followers)
    weak let observed = badge
    try await waitUntil("the badge shows the count") { observed?.text == "3 followers" }
    badge = nil
    #expect(observed != nil, "the task still holds the object")
    #expect(followers.subscriberCount == 1, "and its subscriber")
    observed?.observation?.cancel()  // clean up
    try await followers.waitForSubscribersToLeave()
    #expect(observed == nil)
}

extension AsyncCurrentValueSubject {
    /// Waits (under a hang guard) until the subscriber count observed is 0.
    fileprivate func waitForSubscribersToLeave() async throws {
        try await withTimeout {
            for await count in self.subscriberCounts where count == 0 { return }
        }
    }
}
