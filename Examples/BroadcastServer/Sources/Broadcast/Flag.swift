import Synchronization

/// A flag that is set once.
final class Flag: Sendable {
    private let value = Mutex(false)

    /// Sets the flag; true if this call set it.
    func set() -> Bool {
        self.value.withLock { isSet in
            defer { isSet = true }
            return !isSet
        }
    }

    var isSet: Bool { self.value.withLock { $0 } }
}
