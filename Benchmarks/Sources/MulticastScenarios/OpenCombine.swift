// OpenCombine's side: the synchronous anchor of the cost-per-delivery comparison
// (the synchronous anchor). A `PassthroughSubject<Int, Never>` with N `sink`s; `send` delivers
// each element to every sink by plain function calls on the sending thread.
// This file imports only OpenCombine (MemberImportVisibility is on for this target).

import OpenCombine

/// What one sink saw, checked like `consume(_:expected:lossless:)` checks an
/// async subscriber: exactly `0..<expected` in order, then `.finished`.
private final class SinkTally {
    var received = 0
    var last = -1
    var finished = false
    var failure: String?

    func receive(_ value: Int) {
        if failure == nil, value != last + 1 {
            failure = "got \(value) after \(last)"
        }
        last = value
        received += 1
    }

    func tally(expected: Int) -> SubscriberTally {
        var tally = SubscriberTally()
        tally.received = received
        tally.failure = failure
        if tally.failure == nil, !finished {
            tally.failure = "no completion after \(received) elements"
        }
        if tally.failure == nil, received != expected {
            tally.failure = "received \(received) of \(expected)"
        }
        return tally
    }
}

enum OpenCombineSide {
    /// `subscribers` sinks on one `PassthroughSubject<Int, Never>`, then `0..<elements`
    /// sent synchronously from the calling thread, then `.finished`. Every sink must have
    /// seen exactly `0..<elements` in order and the completion.
    static func fanOut(subscribers: Int, elements: Int) -> FanOutTally {
        let subject = PassthroughSubject<Int, Never>()
        var tallies: [SinkTally] = []
        var cancellables: [AnyCancellable] = []
        tallies.reserveCapacity(subscribers)
        cancellables.reserveCapacity(subscribers)
        for _ in 0..<subscribers {
            let tally = SinkTally()
            tallies.append(tally)
            cancellables.append(
                subject.sink(
                    receiveCompletion: { _ in tally.finished = true },
                    receiveValue: { tally.receive($0) }
                )
            )
        }
        for element in 0..<elements { subject.send(element) }
        subject.send(completion: .finished)
        var total = FanOutTally()
        for tally in tallies { total.add(tally.tally(expected: elements)) }
        withExtendedLifetime(cancellables) {}
        return total
    }
}
