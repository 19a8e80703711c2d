// Where a produced element's hand-over puts the continuations of the subscribers waiting for
// it (`MulticastStateMachine.handOver(resuming:)`): an array, or nothing at all when the
// caller knows that nobody waits.

/// What `append` hands the waiting subscribers' continuations to.
@usableFromInline
protocol HandOverList {
    associatedtype Continuation
    mutating func reserveCapacity(_ minimumCapacity: Int)
    mutating func append(_ continuation: Continuation)
}

extension Array: HandOverList {}

/// The list of a hand-over that cannot happen: its producer checked, in the same critical
/// section, that no subscriber waits (`MulticastStateMachine.elementProduced(_:epoch:respectingBounds:)`),
/// and a produce never makes one wait. Unlike an empty array, it is nothing to build and
/// release: about 20 instructions a send that wakes nobody (`compare --instructions`).
@usableFromInline
struct NobodyWaits<Continuation>: HandOverList {
    @inlinable
    init() {}

    @inlinable
    func reserveCapacity(_ minimumCapacity: Int) {}

    @inlinable
    func append(_ continuation: Continuation) {
        preconditionFailure("a hand-over found a waiting subscriber where nobody waits")
    }
}
