// Reading a resumption's events: `subscribe(after:)` (positions) and `subscribe(after:id:)`
// (the elements' ids) both give `PositionedEvent`s, read the same way.

import Testing

@testable import AsyncMulticast

/// Reads events until `count` were read, or the iteration ended.
func take<Iterator: AsyncIteratorProtocol>(
    _ count: Int, from iterator: inout Iterator, isolation actor: isolated (any Actor)? = #isolation
) async throws(Iterator.Failure) -> [Iterator.Element] {
    var events: [Iterator.Element] = []
    while events.count < count, let event = try await iterator.next(isolation: actor) { events.append(event) }
    return events
}

/// Reads up to `count` events of `subscription` in a task of its own; an iteration that
/// throws ends the reading with what was read before.
func reading<Subscription: AsyncSequence & Sendable>(
    _ count: Int, from subscription: Subscription
) -> Task<[Subscription.Element], Never> where Subscription.Element: Sendable {
    Task {
        var iterator = subscription.makeAsyncIterator()
        var events: [Subscription.Element] = []
        while events.count < count, let event = try? await iterator.next() { events.append(event) }
        return events
    }
}
