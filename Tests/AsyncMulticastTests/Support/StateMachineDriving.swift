// Driving `MulticastStateMachine` directly in tests, transition by transition: the machine the
// engine suites use, its reads reduced to an `Equatable` outcome, the producing transitions
// with their effects gathered in one value (as the storage would perform them), and a
// machine already running with a few subscribers.

import Testing

@testable import AsyncMulticast

/// The machine of the engine suites: `Int` elements, failing with `TestError`.
typealias Machine = MulticastStateMachine<Int, TestError>

/// `NextAction` reduced to something `Equatable` (continuations are not).
enum ReadOutcome: Equatable, CustomStringConvertible {
    case element(Int)
    case suspend(startUpstream: UInt64?)
    case finished
    case failed(TestError)

    var description: String {
        switch self {
        case .element(let e): return ".element(\(e))"
        case .suspend(let s): return ".suspend(startUpstream: \(s.map(String.init) ?? "nil"))"
        case .finished: return ".finished"
        case .failed(let e): return ".failed(\(e))"
        }
    }
}

// MARK: - Reading, and producing what must be taken

extension Machine {
    /// `nextRequested(_:)`, reduced to a `ReadOutcome`. The read must not wake a parked
    /// producer: where it may, call `nextRequested` directly.
    mutating func take(_ id: SubscriberID) -> ReadOutcome {
        switch self.nextRequested(id) {
        case .element(let element, let producers):
            precondition(producers.isEmpty, "unexpected producers; use nextRequested(_:) directly")
            return .element(element)
        case .elementReleasingSenders:
            preconditionFailure("unexpected senders released; use nextRequested(_:) directly")
        case .nothingReady:
            return .suspend(startUpstream: nil)
        case .nothingReadyStartingUpstream(let effects):
            return .suspend(startUpstream: effects.startUpstream)
        case .ended(.success(nil)), .endedNoticed(.success(nil), _):
            return .finished
        case .ended(.success(let element?)), .endedNoticed(.success(let element?), _):
            preconditionFailure("a terminal event carried the element \(element)")
        case .ended(.failure(let error)), .endedNoticed(.failure(let error), _):
            return .failed(error)
        case .gap:
            preconditionFailure("a gap reported to a reader that does not report gaps")
        }
    }

    /// Reads elements until the subscriber would suspend or has ended.
    mutating func drain(_ id: SubscriberID) -> [Int] {
        var out: [Int] = []
        while case .element(let element) = self.take(id) { out.append(element) }
        return out
    }

    /// Produces `element`, expecting it to be taken (not `.stop`); returns its effects and
    /// whether the producer must park.
    mutating func push(
        _ element: Int, epoch: UInt64, sourceLocation: SourceLocation = #_sourceLocation
    )
        -> (effects: Effects, park: Bool)
    {
        switch self.produce(element, epoch: epoch) {
        case .proceed(let effects): return (effects, false)
        case .park(let effects): return (effects, true)
        case .stop:
            Issue.record("produce(\(element)) was refused", sourceLocation: sourceLocation)
            return (Effects(), false)
        }
    }

    /// Suspends subscriber `id`, then pushes `element` into iteration 0 and performs what
    /// the push decides: what the suspended subscriber is resumed with.
    mutating func suspended(
        _ id: SubscriberID, thenPushed element: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Result<Int?, TestError> {
        await withUnsafeContinuation { continuation in
            _ = self.subscriberSuspended(id, continuation: continuation)
            self.push(element, epoch: 0, sourceLocation: sourceLocation).effects.perform()
        }
    }
}

// MARK: - Suspending, as effects

extension MulticastStateMachine {
    /// `subscriberWaiting`, with its outcome as the `Effects` the storage would perform: the
    /// suspended subscriber is stored (nothing to perform but starting the upstream, if its
    /// demand connects it), or resumed at once.
    mutating func subscriberSuspended(_ id: SubscriberID, continuation: SubscriberContinuation) -> Effects {
        var report = ReadReport()
        return self.subscriberSuspended(id, continuation: continuation, report: &report)
    }

    /// `subscriberSuspended(_:continuation:)` with a report; see `read(_:batch:report:)`.
    /// `priority`: the waiting task's (`TaskPriority.rawValue`); whether it raises the
    /// upstream is tested apart (StateMachinePriorityTests).
    mutating func subscriberSuspended(
        _ id: SubscriberID, continuation: SubscriberContinuation, report: inout ReadReport, priority: UInt8 = 0
    ) -> Effects {
        let outcome = self.subscriberWaiting(id, continuation: continuation, priority: priority, report: &report)
        switch outcome {
        case .stored:
            return Effects()
        case .storedStartingUpstream(let effects), .resumed(let effects):
            return effects
        }
    }

    /// `subscriberSuspended(_:continuation:report:)` for a reader that says whether its
    /// demand connects the upstream, as the model tests do: see
    /// `nextRequested(_:batch:report:connectsOnDemand:)`.
    mutating func subscriberSuspended(
        _ id: SubscriberID, continuation: SubscriberContinuation, report: inout ReadReport, connectsOnDemand: Bool
    ) -> Effects {
        self.recordConnectsOnDemand(connectsOnDemand, for: id)
        return self.subscriberSuspended(id, continuation: continuation, report: &report)
    }
}

// MARK: - Performing effects, and a running machine

extension MulticastStateMachine.Effects {
    /// Resumes what the storage would resume.
    func perform() {
        for continuation in self.subscribers { continuation.resume(returning: self.subscriberResult) }
        for (continuation, element) in self.handedOver { continuation.resume(returning: .success(element)) }
        for continuation in self.producers { continuation.resume(returning: self.producerResult) }
    }
}

/// A machine with one running upstream (epoch 0) and `count` subscribers, none suspended.
func runningMachine(
    policy: SharedBufferingPolicy, subscribers count: Int, replay: Int = 0
) -> (Machine, [SubscriberID]) {
    var machine = Machine(policy: policy, replay: replay, mode: .automatic)
    let ids = (0..<count).map { _ in machine.subscriberJoined() }
    let first = machine.take(ids[0])
    precondition(first == .suspend(startUpstream: 0))
    return (machine, ids)
}

// MARK: - Producing

extension MulticastStateMachine {
    /// What producing an element returned, with the waiting subscribers to resume.
    enum ProduceAction: Sendable {
        /// The element is in; go on producing.
        case proceed(Effects)
        /// The element is in; wait for room (see `producerParked`) before the next one.
        case park(Effects)
        /// The element was not taken: a stale epoch, or the sequence has ended.
        case stop
    }

    /// `elementProduced`, the producer's hot path that the storage's `offer` takes (a send
    /// that wakes nobody, a sole dropping lane's slide), with the subscribers it resumes
    /// gathered into `Effects`.
    mutating func produce(_ element: Element, epoch: UInt64, respectingBounds: Bool = true) -> ProduceAction {
        switch self.elementProduced(element, epoch: epoch, respectingBounds: respectingBounds) {
        case .quiet(let packed):
            return ProduceAction(Self.producedOutcome(packed), element: element, resuming: [])
        case .waking(let packed, let resuming):
            return ProduceAction(Self.producedOutcome(packed), element: element, resuming: resuming)
        }
    }

    /// The outcome in the low bits of `Produced`'s byte (the follow-up's bits are above it,
    /// and stay in `followUp` for the critical section's end).
    static func producedOutcome(_ packed: UInt8) -> ProduceOutcome {
        ProduceOutcome(rawValue: packed & 0xF)!
    }

    /// `elementProducedIfRoom`, with the subscribers it resumes gathered into `Effects`;
    /// `nil` when the sender must wait for room.
    mutating func produceIfRoom(_ element: Element, epoch: UInt64) -> ProduceAction? {
        var resuming: [SubscriberContinuation] = []
        switch self.elementProducedIfRoom(element, epoch: epoch, resuming: &resuming) {
        case .noRoom: return nil
        case .produced: return ProduceAction(.proceed, element: element, resuming: resuming)
        case .stop: return ProduceAction(.stop, element: element, resuming: resuming)
        }
    }
}

extension MulticastStateMachine.ProduceAction {
    /// `outcome`, with the waiting subscribers to resume with `element` as `Effects`.
    init(
        _ outcome: MulticastStateMachine.ProduceOutcome, element: Element,
        resuming: [MulticastStateMachine.SubscriberContinuation]
    ) {
        var effects = MulticastStateMachine.Effects()
        for continuation in resuming { effects.resumeSubscriber(continuation) }
        if !resuming.isEmpty { effects.subscriberResult = .success(element) }
        switch outcome {
        case .proceed: self = .proceed(effects)
        case .park: self = .park(effects)
        case .stop: self = .stop
        }
    }
}

extension MulticastStateMachine.ProduceAction {
    var isStop: Bool { if case .stop = self { return true } else { return false } }
    var isProceed: Bool { if case .proceed = self { return true } else { return false } }
    var isPark: Bool { if case .park = self { return true } else { return false } }
}
