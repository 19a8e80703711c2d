// Reading a resumption's events: `subscribe(after:)` (positions) and `subscribe(after:id:)`
// (the elements' ids) both give `PositionedEvent`s, read the same way; `ResumptionKey` runs
// the cases both share once for each.

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

/// How a client names the last element it saw, in the cases both ways of resuming share: the
/// library's position (`subscribe(after:)`) or the element's own id (`subscribe(after:id:)`).
/// The element sent n-th (from 0) is 10 × n, so its position is n and its id 10 × n: ids that
/// are not contiguous, like a database's.
enum ResumptionKey: String, NamedTestCase {
    case position, id

    /// The key of the element sent n-th.
    func key(_ n: Int) -> Int { self == .position ? n : 10 * n }

    /// n, for the key of the element sent n-th.
    func number(ofKey key: Int) -> Int { self == .position ? key : key / 10 }

    /// The event that delivers the element sent n-th.
    func element(_ n: Int) -> PositionedEvent<Int, Int> { .element(10 * n, position: self.key(n)) }

    /// The events that deliver the elements sent n-th for each n of `ns`.
    func elements(_ ns: ClosedRange<Int>) -> [PositionedEvent<Int, Int>] { ns.map(self.element) }

    /// The gap between the elements sent `after`-th and `before`-th.
    func gap(after: Int, before: Int) -> PositionedEvent<Int, Int> {
        .gap(after: self.key(after), before: self.key(before))
    }

    /// Subscribes to `sequence` after the element sent n-th (`nil`: none seen).
    func subscribe(
        _ sequence: some AsyncSubscribableSequence<Int, Never>, after n: Int?,
        buffering policy: SharedBufferingPolicy? = nil
    ) -> any AsyncSequence<PositionedEvent<Int, Int>, Never> & Sendable {
        switch self {
        case .position: sequence.subscribe(after: n, buffering: policy)
        case .id: sequence.subscribe(after: n.map(self.key), id: { $0 }, buffering: policy)
        }
    }
}
