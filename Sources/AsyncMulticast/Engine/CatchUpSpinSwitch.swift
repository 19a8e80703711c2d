import Synchronization

/// Turns off, for the whole process, the brief wait of a sole subscriber that caught up with
/// a busy producer (the internal `CatchUpSpin`): not API, only for the Benchmarks package.
///
/// The instruction gate counts `share()`'s sole subscriber with the wait off (the
/// `share-nospin` cell), because how long the wait runs, and so how many instructions it
/// executes, depends on how the threads interleave and on the machine's load; the wait's
/// benefit is measured separately, by running the same cell both ways. What subscribers
/// receive does not change: without the wait, a subscriber that caught up and found nothing
/// more suspends at once, as it does whenever the wait is not allowed.
///
/// The Benchmarks package turns it off for its `share-nospin` cell (`Ours.setCatchUpSpin(on:)`):
///
/// (Not compiled: it turns the wait off in the whole process)
/// ```swift
/// @_spi(Benchmarks) import AsyncMulticast
///
/// CatchUpSpinSwitch.isOn = false  // before any subscriber starts
/// ```
@_spi(Benchmarks)
public enum CatchUpSpinSwitch {
    /// Whether a sole subscriber that caught up may wait for the producer's next elements
    /// before suspending: `true` unless a benchmark turned it off.
    ///
    /// (Not compiled: it sets the wait for the whole process)
    /// ```swift
    /// CatchUpSpinSwitch.isOn = on  // Ours.setCatchUpSpin(on:), before a cell's subscribers start
    /// ```
    public static var isOn: Bool {
        get { !CatchUpSpin.isOff.load(ordering: .relaxed) }
        set { CatchUpSpin.isOff.store(!newValue, ordering: .relaxed) }
    }
}
