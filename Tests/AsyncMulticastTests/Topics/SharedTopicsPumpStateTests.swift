// The decisions of topics of one upstream about their pump (`PumpState`), without tasks: a
// pump is installed once while a key is live, never while none is, and stopped only when no
// key is live under the session's lock; a pump that returns forgets only its own handle.

import Testing

@testable import AsyncMulticast

@Suite("AsyncSharedTopics: when the pump runs")
struct SharedTopicsPumpStateTests {
    /// A task that does nothing, standing for a pump's handle.
    func idleTask() -> Task<Void, Never> { Task {} }

    @Test("the first join installs a pump; a join that finds one installs none")
    func onePumpWhileKeysAreLive() {
        var state = PumpState()
        #expect(state.pumpRequested())
        guard case .install = state.pumpOffered(liveKeys: 1) else {
            Issue.record("the first offer must be installed")
            return
        }
        let (generation, previous) = state.pumpInstalling()
        #expect(previous == nil)
        state.pumpCreated(self.idleTask())
        #expect(!state.pumpRequested())
        guard case .discard = state.pumpOffered(liveKeys: 2) else {
            Issue.record("a second offer must be discarded")
            return
        }
        #expect(generation == 1)
    }

    @Test("an offer while no key is live is discarded: nothing would stop that pump")
    func noPumpWithoutALiveKey() {
        let state = PumpState()
        guard case .discard = state.pumpOffered(liveKeys: 0) else {
            Issue.record("an offer without a live key must be discarded")
            return
        }
    }

    @Test("the last key freed stops the pump, unless a key became live since")
    func lastKeyFreedStopsThePumpOnlyWithoutLiveKeys() {
        var state = PumpState()
        _ = state.pumpInstalling()
        let pump = self.idleTask()
        state.pumpCreated(pump)
        let kept = state.lastKeyFreed(liveKeys: 1)
        #expect(kept == nil, "a join counted its key first: the pump stays")
        #expect(!state.pumpRequested())
        let stopped = state.lastKeyFreed(liveKeys: 0)
        #expect(stopped == pump)
        #expect(state.pumpRequested(), "the next join installs a fresh pump")
        let again = state.lastKeyFreed(liveKeys: 0)
        #expect(again == nil, "stopped once")
    }

    @Test("a returning pump forgets its own handle, never a newer pump's; the newer one waits for it")
    func returningPumpForgetsOnlyItself() {
        var state = PumpState()
        let (first, _) = state.pumpInstalling()
        let firstPump = self.idleTask()
        state.pumpCreated(firstPump)
        _ = state.lastKeyFreed(liveKeys: 0)
        let (second, previous) = state.pumpInstalling()
        #expect(previous == firstPump, "the stopped pump routes its last elements before the new one routes any")
        state.pumpCreated(self.idleTask())
        let firstWasInstalled = state.pumpReturned(generation: first)
        #expect(!firstWasInstalled, "the stopped pump returns late")
        #expect(state.retiring == nil, "and is forgotten")
        #expect(!state.pumpRequested(), "the newer pump is still installed")
        let secondWasInstalled = state.pumpReturned(generation: second)
        #expect(secondWasInstalled, "the upstream ended")
        #expect(state.pumpRequested())
    }
}
