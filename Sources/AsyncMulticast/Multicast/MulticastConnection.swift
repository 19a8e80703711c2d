/// The running upstream iteration of an ``AsyncMulticastSequence``, returned by
/// ``AsyncMulticastSequence/connect()``.
///
/// ```swift
/// let connection = multicast.connect()
/// connection.cancel()   // stops the upstream; subscribers get what is buffered, then nil
/// ```
///
/// Connections are equal when they denote the same iteration of the same multicast.
/// Dropping a connection does not cancel it.
public struct MulticastConnection: Sendable, Hashable {
    @usableFromInline
    let owner: ObjectIdentifier
    @usableFromInline
    let epoch: UInt64?
    @usableFromInline
    let cancelAction: (@Sendable () -> Void)?

    @inlinable
    init<Element, Failure>(
        storage: MulticastStorage<Element, Failure>, epoch: UInt64, cancel: @escaping @Sendable () -> Void
    ) {
        self.owner = ObjectIdentifier(storage)
        self.epoch = epoch
        self.cancelAction = cancel
    }

    @inlinable
    init<Element, Failure>(inertFor storage: MulticastStorage<Element, Failure>) {
        self.owner = ObjectIdentifier(storage)
        self.epoch = nil
        self.cancelAction = nil
    }

    /// Cancels the upstream iteration. Subscribers present now receive what is buffered for
    /// them, then `nil`; subscribers that join later wait for the next `connect()`.
    /// Cancelling twice, or after the upstream ended, does nothing.
    @inlinable
    public func cancel() {
        self.cancelAction?()
    }

    @inlinable
    public static func == (lhs: MulticastConnection, rhs: MulticastConnection) -> Bool {
        lhs.owner == rhs.owner && lhs.epoch == rhs.epoch
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.owner)
        hasher.combine(self.epoch)
    }
}
