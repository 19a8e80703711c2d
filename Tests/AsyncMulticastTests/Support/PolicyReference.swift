// What a subscriber with a given buffering policy must receive: the same as if it iterated an
// `AsyncStream` of its own with the same policy, fed with every element from the moment it
// joined (and, for `replay(n)`, starting with the latest replayed elements it would keep).
// The buffering-policy suite checks this against real `AsyncStream`s; the state-machine
// suites keep one such queue per subscriber as their reference model.

@testable import AsyncMulticast

extension SharedBufferingPolicy {
    /// The `AsyncStream` policy a subscriber with this policy must behave like.
    var streamPolicy: AsyncStream<Int>.Continuation.BufferingPolicy {
        switch self {
        case .bufferingNewest(let n): return .bufferingNewest(n)
        case .bufferingOldest(let n): return .bufferingOldest(n)
        case .unbounded, .bounded, .evicting: return .unbounded  // .evicting: until evicted
        }
    }

    /// How many elements a dropping policy keeps; `nil` for the lossless ones.
    var dropLimit: Int? {
        switch self {
        case .bufferingNewest(let n), .bufferingOldest(let n): return n
        case .unbounded, .bounded, .evicting: return nil
        }
    }

    /// Adds a newly produced `value` to a subscriber's own queue, as its own `AsyncStream`
    /// would: `.bufferingNewest` drops the oldest queued value when full, `.bufferingOldest`
    /// drops the new one.
    func enqueue(_ value: Int, into queue: inout [Int]) {
        switch self {
        case .bounded, .unbounded, .evicting:
            queue.append(value)
        case .bufferingNewest(let n):
            queue.append(value)
            if queue.count > n { queue.removeFirst() }
        case .bufferingOldest(let n):
            if queue.count < n { queue.append(value) }
        }
    }

    /// What a subscriber that joins now starts with: the latest `replay` of the `produced`
    /// elements, and no more of them than a dropping policy keeps (its newest). An
    /// `.evicting` one gets them all: a greeting that counts against no limit.
    func replayed(_ produced: [Int], replay: Int) -> [Int] {
        let replayed = Array(produced.suffix(replay))
        guard let limit = self.dropLimit else { return replayed }
        return Array(replayed.suffix(limit))
    }
}

extension SharedBufferingPolicy {
    /// Policies whose limit never binds in the reliability tests: each must behave like
    /// `.unbounded`.
    static let effectivelyUnbounded: [SharedBufferingPolicy] = [
        .bounded(Int.max), .bufferingNewest(Int.max), .bufferingOldest(Int.max), .unbounded,
    ]
}
