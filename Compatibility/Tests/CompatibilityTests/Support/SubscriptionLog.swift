import OpenCombine
import Synchronization

/// Records the Combine subscriptions made to a publisher: each one numbered from 1, and
/// when it was cancelled or completed. What the tests use to tell when the library started
/// and stopped a session of a source fed by the publisher.
final class SubscriptionLog: Sendable {
    enum Event: Sendable, Equatable, CustomStringConvertible {
        case subscribed(Int)
        case cancelled(Int)

        var description: String {
            switch self {
            case .subscribed(let number): "subscribed(\(number))"
            case .cancelled(let number): "cancelled(\(number))"
            }
        }
    }

    let log = EventLog<Event>()
    private let count = Mutex(0)

    init() {}

    /// How many subscriptions were made.
    var subscriptions: Int { self.count.withLock { $0 } }

    /// `publisher`, recording its subscriptions here. Subscriptions are numbered as they
    /// arrive and the library runs one session at a time, so a cancellation belongs to the
    /// latest subscription.
    func observing<Upstream: Publisher>(_ publisher: Upstream) -> Publishers.HandleEvents<Upstream> {
        publisher.handleEvents(
            receiveSubscription: { _ in
                let number = self.count.withLock { count -> Int in
                    count += 1
                    return count
                }
                self.log.record(.subscribed(number))
            },
            receiveCancel: {
                self.log.record(.cancelled(self.subscriptions))
            })
    }
}
