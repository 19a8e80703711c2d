@testable import AsyncMulticast

extension SubscriberEviction {
    /// The eviction at a hard limit of `n`: a subscriber never holds more than its hard
    /// limit, so it held `n`, the most it ever held.
    static func hardLimit(_ n: Int) -> SubscriberEviction {
        SubscriberEviction(reason: .hardLimit, backlog: n, highWaterMark: n)
    }
}

extension SharedEvent {
    /// The eviction this event carries, if it is one.
    var eviction: SubscriberEviction? {
        if case .evicted(let eviction) = self { return eviction }
        return nil
    }
}
