// What the lag-reporting tests share: a subscriber's events summed up, read to the end, the
// lossy policies they run under, and a reader on an actor of its own.

import Testing

@testable import AsyncMulticast

/// What a lag-reporting subscriber received, summed up.
struct LagSummary: Sendable, CustomStringConvertible {
    var elements: [Int] = []
    var missedCounts: [Int] = []
    var evicted = false

    init(_ events: [SharedEvent<Int>]) {
        for event in events {
            switch event {
            case .element(let value): self.elements.append(value)
            case .missed(let count): self.missedCounts.append(count)
            case .evicted: self.evicted = true
            }
        }
    }

    var missed: Int { self.missedCounts.reduce(0, +) }
    var description: String { "\(self.elements.count) elements, missed \(self.missedCounts)" }

    /// Checks that each of the `produced` elements was received or counted as missed, and
    /// that the elements received keep each sender's order; `context` names the case.
    func expectEveryElementAccountedFor(
        _ produced: Int, _ context: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(self.elements.count + self.missed == produced, "\(context): \(self)", sourceLocation: sourceLocation)
        #expect(isIncreasingPerSender(self.elements), "\(context)", sourceLocation: sourceLocation)
    }
}

/// Reads every event until the end.
func drain(_ iterator: inout SharedEventIterator<Int, Never>) async -> [SharedEvent<Int>] {
    var events: [SharedEvent<Int>] = []
    while let event = await iterator.next() { events.append(event) }
    return events
}

/// Reads every event until the end or the error.
func drain(
    _ iterator: inout SharedEventIterator<Int, TestError>
) async -> (events: [SharedEvent<Int>], failure: TestError?) {
    var events: [SharedEvent<Int>] = []
    do {
        while let event = try await iterator.next() { events.append(event) }
        return (events, nil)
    } catch {
        return (events, error)
    }
}

/// The lossy policies, limits 0, 1, 2 and 5 (and 16 for `.bufferingNewest`, whose iterator
/// then takes batches of 8 ahead).
let lossyPolicies: [SharedBufferingPolicy] =
    [0, 1, 2, 5, 16].map { .bufferingNewest($0) } + [0, 1, 2, 5].map { .bufferingOldest($0) }

/// Sends `perSender` tagged values from each of `senders` tasks, all started together.

/// An actor that reads a lag-reporting subscriber on its own executor.
actor EventReader {
    func readAll(_ events: AsyncSharedEvents<Int, Never>, joined: Signal<Void>) async -> [SharedEvent<Int>] {
        var iterator = events.makeAsyncIterator()
        joined.send(())
        var received: [SharedEvent<Int>] = []
        while let event = await iterator.next() { received.append(event) }
        return received
    }
}
