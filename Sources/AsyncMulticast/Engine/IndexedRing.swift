/// A FIFO ring buffer addressed by *absolute* positions.
///
/// The shared buffer numbers every element the upstream ever produced (0, 1, 2, …); a
/// subscriber's cursor is such a number. `IndexedRing` stores the contiguous window
/// `startIndex..<endIndex` of those positions, grows by doubling, and never moves the
/// absolute numbering, so cursors stay valid while the window slides.
///
/// The elements live in a buffer of their own (not an `Array` of optionals), initialized
/// only where the window is: a stored element needs no optional tag, and a run of them
/// is one or two contiguous pieces of memory, so copying a batch out is a block copy for
/// trivial elements. It is a value: a shared buffer is copied before it is written.
///
/// Invariants: `capacity` is zero or a power of two; `count <= capacity`; the element at
/// absolute position `startIndex + k` is initialized in physical slot
/// `(head + k) & (capacity - 1)`, and no other slot is.
@usableFromInline
struct IndexedRing<Element> {
    /// The slots, and which of them hold elements; `nil` until the first element.
    @usableFromInline
    var storage: Storage?
    /// Absolute position of the first stored element.
    @usableFromInline
    var startIndex: Int

    @inlinable
    init(startIndex: Int = 0) {
        self.startIndex = startIndex
    }

    /// Where the window is in the slots. Kept with the slots so that releasing them
    /// deinitializes exactly the stored elements.
    @usableFromInline
    struct Header {
        @usableFromInline var capacity: Int
        @usableFromInline var head: Int
        @usableFromInline var count: Int

        @inlinable
        init(capacity: Int, head: Int, count: Int) {
            self.capacity = capacity
            self.head = head
            self.count = count
        }
    }

    /// The slots and their header, both out of line, so that reaching them costs no
    /// exclusivity check.
    @usableFromInline
    final class Storage: @unchecked Sendable {  // @unchecked: used under the storage's lock; copy-on-write.
        @usableFromInline let header: UnsafeMutablePointer<Header>
        @usableFromInline let slots: UnsafeMutablePointer<Element>

        @inlinable
        init(capacity: Int) {
            self.header = UnsafeMutablePointer<Header>.allocate(capacity: 1)
            self.header.initialize(to: Header(capacity: capacity, head: 0, count: 0))
            self.slots = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
        }

        @inlinable
        deinit {
            let head = self.header.pointee.head
            let count = self.header.pointee.count
            let firstPiece = Swift.min(count, self.header.pointee.capacity &- head)
            (self.slots + head).deinitialize(count: firstPiece)
            self.slots.deinitialize(count: count &- firstPiece)
            self.slots.deallocate()
            self.header.deinitialize(count: 1)
            self.header.deallocate()
        }
    }

    /// Number of stored elements.
    @inlinable
    var count: Int { self.storage?.header.pointee.count ?? 0 }

    /// One past the absolute position of the last stored element.
    @inlinable
    var endIndex: Int { self.startIndex &+ self.count }
    @inlinable
    var isEmpty: Bool { self.count == 0 }
    @inlinable
    var capacity: Int { self.storage?.header.pointee.capacity ?? 0 }

    /// The element at absolute position `position`, which must be stored.
    @inlinable
    subscript(position: Int) -> Element {
        precondition(
            position >= self.startIndex && position < self.endIndex,
            "IndexedRing: position \(position) outside \(self.startIndex)..<\(self.endIndex)")
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header.pointee
        return storage.slots[(header.head &+ (position &- self.startIndex)) & (header.capacity &- 1)]
    }

    /// Appends the elements at `positions` to `array`, in order: at most two block copies.
    @inlinable
    func copy(_ positions: Range<Int>, appendingTo array: inout [Element]) {
        precondition(
            positions.lowerBound >= self.startIndex && positions.upperBound <= self.endIndex,
            "IndexedRing: positions \(positions) outside \(self.startIndex)..<\(self.endIndex)")
        guard !positions.isEmpty else { return }
        let storage = self.storage.unsafelyUnwrapped
        let capacity = storage.header.pointee.capacity
        let first = (storage.header.pointee.head &+ (positions.lowerBound &- self.startIndex)) & (capacity &- 1)
        let firstPiece = Swift.min(positions.count, capacity &- first)
        array.append(contentsOf: UnsafeBufferPointer(start: storage.slots + first, count: firstPiece))
        if firstPiece < positions.count {
            array.append(contentsOf: UnsafeBufferPointer(start: storage.slots, count: positions.count &- firstPiece))
        }
    }

    /// Stores `element` at `endIndex`.
    @inlinable
    mutating func append(_ element: Element) {
        let isUnique = isKnownUniquelyReferenced(&self.storage)
        if !isUnique || self.count == self.capacity {
            self.reallocate(
                capacity: self.count == self.capacity ? Swift.max(8, self.capacity &* 2) : self.capacity,
                moving: isUnique)
        }
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header
        (storage.slots + ((header.pointee.head &+ header.pointee.count) & (header.pointee.capacity &- 1)))
            .initialize(to: element)
        header.pointee.count &+= 1
    }

    /// Removes the first `k` elements.
    @inlinable
    mutating func removeFirst(_ k: Int) {
        precondition(k >= 0 && k <= self.count, "IndexedRing: removeFirst(\(k)) on \(self.count) elements")
        guard k > 0 else { return }
        if !isKnownUniquelyReferenced(&self.storage) { self.reallocate(capacity: self.capacity, moving: false) }
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header
        let capacity = header.pointee.capacity
        let head = header.pointee.head
        let firstPiece = Swift.min(k, capacity &- head)
        (storage.slots + head).deinitialize(count: firstPiece)
        storage.slots.deinitialize(count: k &- firstPiece)
        header.pointee.head = (head &+ k) & (capacity &- 1)
        header.pointee.count &-= k
        self.startIndex &+= k
    }

    /// Moves an empty window so that it starts (and ends) at `position`.
    @inlinable
    mutating func rebase(to position: Int) {
        precondition(self.count == 0, "IndexedRing: rebase of a non-empty ring")
        self.startIndex = position
    }

    /// Replaces the storage by one of `capacity` (at least `count`) holding the elements,
    /// starting at slot 0: growing, or copying a shared storage before a write. `moving`:
    /// the storage is not shared (checked by the caller, before this function holds a
    /// second reference to it), so the elements are moved rather than copied.
    @inlinable
    mutating func reallocate(capacity: Int, moving: Bool) {
        let new = Storage(capacity: capacity)
        if let old = self.storage {
            let count = old.header.pointee.count
            let head = old.header.pointee.head
            let firstPiece = Swift.min(count, old.header.pointee.capacity &- head)
            if moving {
                // Growing: move the elements (the old slots end up holding none).
                new.slots.moveInitialize(from: old.slots + head, count: firstPiece)
                (new.slots + firstPiece).moveInitialize(from: old.slots, count: count &- firstPiece)
                old.header.pointee.count = 0
            } else {
                new.slots.initialize(from: old.slots + head, count: firstPiece)
                (new.slots + firstPiece).initialize(from: old.slots, count: count &- firstPiece)
            }
            new.header.pointee.count = count
        }
        self.storage = new
    }
}

extension IndexedRing: Sendable where Element: Sendable {}
