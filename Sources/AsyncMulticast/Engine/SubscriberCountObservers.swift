/// The observers of a storage's subscriber count (`subscriberCounts`,
/// `waitForSubscribers(atLeast:)`), and the count and change number they were last told.
///
/// Part of the storage's locked state: the end of each critical section asks it for the
/// change to announce (`change(to:)`), numbered there, under the lock; the storage offers it
/// to the cells once the lock is released. Offers may therefore arrive out of order: the
/// change number makes a late, older one harmless (`SubscriberCountCell`).
@usableFromInline
struct SubscriberCountObservers: Sendable {
    @usableFromInline
    var cells: [SubscriberCountCell] = []
    /// The count the observers were last told.
    @usableFromInline
    var reportedCount = 0
    /// The number of the last change told.
    @usableFromInline
    var version: UInt64 = 0

    @inlinable
    init() {}

    /// A change of the subscriber count to offer to its observers, outside the lock.
    @usableFromInline
    struct Change: Sendable {
        @usableFromInline
        let observers: [SubscriberCountCell]
        @usableFromInline
        let version: UInt64
        @usableFromInline
        let count: Int

        @inlinable
        init(observers: [SubscriberCountCell], version: UInt64, count: Int) {
            self.observers = observers
            self.version = version
            self.count = count
        }

        /// Outside the lock: offers the change to each observer.
        @inlinable
        func offer() {
            for observer in self.observers {
                observer.offer(version: self.version, count: self.count)
            }
        }
    }

    /// Whether no observer is registered.
    @inlinable
    var isEmpty: Bool { self.cells.isEmpty }

    /// Under the lock, at the end of a critical section: the change to announce, if the
    /// count is not the one the observers were last told (and there are observers).
    @inlinable
    mutating func change(to count: Int) -> Change? {
        guard !self.cells.isEmpty, count != self.reportedCount else { return nil }
        self.reportedCount = count
        self.version += 1
        return Change(observers: self.cells, version: self.version, count: count)
    }

    /// Under the lock: registers `cell`. The returned change, offered to `cell` alone, tells
    /// it the current `count` first.
    @inlinable
    mutating func add(_ cell: SubscriberCountCell, count: Int) -> Change {
        self.cells.append(cell)
        self.reportedCount = count
        self.version += 1
        return Change(observers: [cell], version: self.version, count: count)
    }

    /// Under the lock: forgets `cell`, if it is registered.
    @inlinable
    mutating func remove(_ cell: SubscriberCountCell) {
        if let index = self.cells.firstIndex(where: { $0 === cell }) {
            self.cells.remove(at: index)
        }
    }
}
