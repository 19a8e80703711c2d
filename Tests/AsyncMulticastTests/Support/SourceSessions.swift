// The recorded sessions of an `AsyncSharedSource`: starts and stops in order, overlaps, stops
// called twice, and a stop that can be held, slowed or made to run a late callback. Shared by
// the timer suites (Share/MisbehavingClockTimerTests*.swift) and the stop suite
// (Share/SharedSourceStopTests.swift).

import Testing

@testable import AsyncMulticast

/// Set when the object holding it is released.
final class GoneFlag: Sendable {
    private let state = Lock(false)
    func set() { self.state.withLock { $0 = true } }
    var isSet: Bool { self.state.withLock { $0 } }
}

/// Held only by a base (or a source's start closure): released with the shared storage, which
/// the upstream task and the timer task hold while they run.
final class Sentinel: Sendable {
    let gone: GoneFlag
    init(_ gone: GoneFlag) { self.gone = gone }
    deinit { self.gone.set() }
}

/// The sessions of an `AsyncSharedSource` made by `makeSource`: each `start` sends its
/// session's index (0, 1, …) first, unless told not to. Its `stop` is `async` and, while
/// `hold(true)` is set, waits (ignoring cancellation) until `releaseStops()`. Records starts and
/// stops, a start while the previous session had not finished stopping, and a stop called twice.
final class SourceSessions: Sendable {
    private struct State: Sendable {
        /// The emitter of each session; once it is stopped, only if `keepsStoppedEmitters`
        /// (an emitter holds the storage).
        var emitters: [AsyncSharedSource<Int, Never>.Emitter?] = []
        var stopsBegun: [Int] = []
        var stops: [Int] = []
        var running = false
        var overlaps = 0
        var doubleStops = 0
        var holdStops = false
        var heldStops: [CheckedContinuation<Void, Never>] = []
        /// Run inside each stop, before it is held (a late callback from the stopping session).
        var duringStop: (@Sendable (AsyncSharedSource<Int, Never>.Emitter) -> Void)?
        var yieldsInStop = 0
    }
    private let state = Lock(State())
    private let keepsStoppedEmitters: Bool

    /// `keepsStoppedEmitters`: a stopped session's emitter stays reachable through `emitter(_:)`
    /// (and keeps the storage alive), for a test of a late emitter.
    init(keepsStoppedEmitters: Bool = false) { self.keepsStoppedEmitters = keepsStoppedEmitters }

    var starts: Int { self.state.withLock { $0.emitters.count } }
    /// The sessions stopped (their `stop` returned), in order.
    var stops: [Int] { self.state.withLock { $0.stops } }
    /// The sessions whose `stop` was called, in order.
    var stopsBegun: [Int] { self.state.withLock { $0.stopsBegun } }
    /// Starts while the previous session was not stopped.
    var overlaps: Int { self.state.withLock { $0.overlaps } }
    var doubleStops: Int { self.state.withLock { $0.doubleStops } }
    var isRunning: Bool { self.state.withLock { $0.running } }
    /// Stops waiting in `hold(true)`.
    var heldCount: Int { self.state.withLock { $0.heldStops.count } }
    func emitter(_ index: Int) -> AsyncSharedSource<Int, Never>.Emitter { self.state.withLock { $0.emitters[index]! } }

    func hold(_ hold: Bool) { self.state.withLock { $0.holdStops = hold } }
    func setYieldsInStop(_ count: Int) { self.state.withLock { $0.yieldsInStop = count } }
    func setDuringStop(_ body: (@Sendable (AsyncSharedSource<Int, Never>.Emitter) -> Void)?) {
        self.state.withLock { $0.duringStop = body }
    }

    /// Lets every held stop return.
    func releaseStops() {
        let held = self.state.withLock { state in
            defer { state.heldStops = [] }
            return state.heldStops
        }
        for continuation in held { continuation.resume() }
    }

    func makeSource(
        replay: Int = 0, keepAlive: Duration = .zero, replayExpiration: Duration = .zero,
        clock: some Clock<Duration> = ContinuousClock(), gone: GoneFlag = GoneFlag(), greets: Bool = true
    ) -> AsyncSharedSource<Int, Never> {
        let sentinel = Sentinel(gone)
        return AsyncSharedSource(
            replay: replay, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock
        ) { emitter in
            _ = sentinel
            let index = self.state.withLock { state in
                if state.running { state.overlaps += 1 }
                state.running = true
                state.emitters.append(emitter)
                return state.emitters.count - 1
            }
            if greets { emitter.send(index) }
            let stopped = Lock(false)
            return {
                let (hold, during, yields) = self.state.withLock { state in
                    state.stopsBegun.append(index)
                    return (state.holdStops, state.duringStop, state.yieldsInStop)
                }
                during?(emitter)
                for _ in 0..<yields { await Task.yield() }
                if hold {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.state.withLock { $0.heldStops.append(continuation) }
                    }
                }
                let again = stopped.withLock { flag in
                    defer { flag = true }
                    return flag
                }
                self.state.withLock { state in
                    if again { state.doubleStops += 1 }
                    state.running = false
                    state.stops.append(index)
                    if !self.keepsStoppedEmitters { state.emitters[index] = nil }
                }
            }
        }
    }

    /// Sends `value` through the latest session's emitter, if it runs.
    func send(_ value: Int) { self.state.withLock { $0.emitters.last ?? nil }?.send(value) }

    /// Ends the latest session's producer (`Emitter.finish()`), if it runs.
    func finish() { self.state.withLock { $0.emitters.last ?? nil }?.finish() }

    /// Waits until `count` sessions were stopped.
    func waitForStops(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("\(count) stops", sourceLocation: sourceLocation) { self.stops.count >= count }
    }

    /// Every session stopped once, in order, none started before the previous one stopped.
    func expectOrderly(running: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        let starts = self.starts
        #expect(self.stops == Array(0..<(running ? starts - 1 : starts)), sourceLocation: sourceLocation)
        #expect(self.overlaps == 0, "a start while the previous session ran", sourceLocation: sourceLocation)
        #expect(self.doubleStops == 0, "a stop called twice", sourceLocation: sourceLocation)
        #expect(self.isRunning == running, sourceLocation: sourceLocation)
    }
}
