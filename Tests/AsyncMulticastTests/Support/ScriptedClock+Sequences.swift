// Shared sequences of a `ScriptedBase` on a `ScriptedClock`, as the timer tests make them.

import Testing

@testable import AsyncMulticast

/// `share(buffering:keepAlive:)` of a new `ScriptedBase` on `clock`: the base's log and the
/// shared sequence.
func scriptedShare(
    buffering: SharedBufferingPolicy = .bounded(64), keepAlive: Duration, on clock: ScriptedClock
) -> (ScriptedLog, AsyncShareSequence<Int, Never>) {
    let log = ScriptedLog()
    return (log, ScriptedBase(log: log).share(buffering: buffering, keepAlive: keepAlive, clock: clock))
}

/// `replay(_:keepAlive:replayExpiration:)` of a new `ScriptedBase` on `clock`: the base's log
/// and the shared sequence.
func scriptedReplay(
    _ count: Int, keepAlive: Duration = .zero, replayExpiration: Duration = .zero, on clock: ScriptedClock
) -> (ScriptedLog, AsyncShareSequence<Int, Never>) {
    let log = ScriptedLog()
    return (
        log,
        ScriptedBase(log: log).replay(count, keepAlive: keepAlive, replayExpiration: replayExpiration, clock: clock)
    )
}
