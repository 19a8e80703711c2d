// Conveniences for driving `MulticastStateMachine` directly in tests: the producing
// transitions with their effects gathered in one value, as the storage would perform them.

@testable import AsyncMulticast

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

    /// `elementProduced`, with the subscribers it resumes gathered into `Effects`.
    mutating func produce(_ element: Element, epoch: UInt64, respectingBounds: Bool = true) -> ProduceAction {
        var effects = Effects()
        let outcome = self.elementProduced(
            element, epoch: epoch, respectingBounds: respectingBounds, resuming: &effects.subscribers)
        if !effects.subscribers.isEmpty { effects.subscriberResult = .success(element) }
        switch outcome {
        case .proceed: return .proceed(effects)
        case .park: return .park(effects)
        case .stop: return .stop
        }
    }

    /// `elementProducedIfRoom`, with the subscribers it resumes gathered into `Effects`;
    /// `nil` when the sender must wait for room.
    mutating func produceIfRoom(_ element: Element, epoch: UInt64) -> ProduceAction? {
        var effects = Effects()
        guard let outcome = self.elementProducedIfRoom(element, epoch: epoch, resuming: &effects.subscribers) else {
            return nil
        }
        if !effects.subscribers.isEmpty { effects.subscriberResult = .success(element) }
        switch outcome {
        case .proceed: return .proceed(effects)
        case .park: return .park(effects)
        case .stop: return .stop
        }
    }
}
