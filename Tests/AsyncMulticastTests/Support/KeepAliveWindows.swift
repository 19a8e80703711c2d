// What the keep-alive tests (KeepAliveTests, MisbehavingClockTests) do again and again with
// a `FedSource` on a `ManualClock`: a first subscriber that starts the upstream, reads and
// leaves (opening a window), a subscriber restarting the stopped upstream, and a window
// checked to close exactly at its deadline.

import Testing

@testable import AsyncMulticast

/// A keep-alive window just opened: `share` shares a new `FedSource` on a new `ManualClock`
/// (`{ $0.share(keepAlive: .seconds(10), clock: $1) }`), and a first subscriber starts the
/// upstream, reads `values` from it and leaves.
func openWindow(
    reading values: Int..., sourceLocation: SourceLocation = #_sourceLocation,
    _ share: (FedSource, ManualClock) -> AsyncShareSequence<Int, Never>
) async -> (clock: ManualClock, source: FedSource, shared: AsyncShareSequence<Int, Never>) {
    let clock = ManualClock()
    let source = FedSource()
    let shared = share(source, clock)
    await startReadAndLeave(shared, source, values: values, sourceLocation: sourceLocation)
    return (clock, source, shared)
}

/// One subscriber starts the keep-alive tests' upstream, reads `values`, and leaves; none is
/// left.
func startReadAndLeave(
    _ shared: AsyncShareSequence<Int, Never>, _ source: FedSource, _ values: Int...,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    await startReadAndLeave(shared, source, values: values, sourceLocation: sourceLocation)
}

/// ``startReadAndLeave(_:_:_:sourceLocation:)`` with the values as an array.
func startReadAndLeave(
    _ shared: AsyncShareSequence<Int, Never>, _ source: FedSource, values: [Int],
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let a = await SubscriberTask.join({ shared.makeAsyncIterator() }, sourceLocation: sourceLocation)
    var read: [Int] = []
    if let first = await a.startIteration(of: source, yielding: values, sourceLocation: sourceLocation) {
        read.append(first)
    }
    read += await a.take(values.count - 1, sourceLocation: sourceLocation)
    #expect(read == values, sourceLocation: sourceLocation)
    await a.leave(sourceLocation: sourceLocation)
    #expect(shared.subscriberCount == 0, sourceLocation: sourceLocation)
}

/// A subscriber joins `shared`, reads `replayed` from its cache if given, restarts the
/// stopped upstream (iteration `iteration`), reads `value` from it, and leaves.
func restartReadAndLeave(
    _ shared: AsyncShareSequence<Int, Never>, _ source: FedSource, iteration: Int, value: Int,
    replayed: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation
) async {
    let b = await SubscriberTask.join({ shared.makeAsyncIterator() }, sourceLocation: sourceLocation)
    if let replayed {
        #expect(
            await b.next(sourceLocation: sourceLocation) == replayed, "replayed: the cache has not expired",
            sourceLocation: sourceLocation)
    }
    b.request()
    await source.control.waitForStart(of: iteration, sourceLocation: sourceLocation)
    source.control.yield(value)
    #expect(await b.answer(sourceLocation: sourceLocation) == value, sourceLocation: sourceLocation)
    await b.leave(sourceLocation: sourceLocation)
}

/// Moves `clock` to one nanosecond before `deadline`: the timer still sleeps and iteration
/// `iteration` of `source` runs on; then to `deadline`: the iteration is cancelled.
func expectCancelledAtTheDeadline(
    _ deadline: ManualClock.Instant, clock: ManualClock, source: FedSource, iteration: Int,
    _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
) async {
    clock.advance(to: deadline.advanced(by: .zero - .nanoseconds(1)))
    #expect(clock.sleeperCount == 1, "not before its deadline: the timer still sleeps", sourceLocation: sourceLocation)
    #expect(source.control.end(of: iteration) == nil, "still running inside the window", sourceLocation: sourceLocation)
    clock.advance(by: .nanoseconds(1))
    let ended = await source.control.waitForEnd(sourceLocation: sourceLocation)
    #expect(ended?.iteration == iteration, sourceLocation: sourceLocation)
    #expect(ended?.end == .cancelled, comment, sourceLocation: sourceLocation)
}
