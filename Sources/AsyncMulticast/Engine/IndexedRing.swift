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

    /// A run of slots: the part before the end of the slots, then the part from slot 0.
    @usableFromInline
    typealias Pieces = (UnsafeMutableBufferPointer<Element>, UnsafeMutableBufferPointer<Element>)

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
            let (first, second) = self.pieces(from: self.header.pointee.head, count: self.header.pointee.count)
            first.deinitialize()
            second.deinitialize()
            self.slots.deallocate()
            self.header.deinitialize(count: 1)
            self.header.deallocate()
        }

        /// The `count` slots from physical slot `start` on, wrapping around the end: the
        /// part before the end, then the part from slot 0 (often empty).
        @inlinable
        func pieces(from start: Int, count: Int) -> Pieces {
            let firstCount = Swift.min(count, self.header.pointee.capacity &- start)
            return (
                UnsafeMutableBufferPointer(start: self.slots + start, count: firstCount),
                UnsafeMutableBufferPointer(start: self.slots, count: count &- firstCount)
            )
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
    @inline(__always)
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
        // The pieces are taken before `array` grows, so that the storage (kept alive by
        // `self`) is not retained around the appends: under contention that retain is an
        // atomic write to a line every reader and the producer touch.
        let (first, second) = self.slots(at: positions)
        array.append(contentsOf: UnsafeBufferPointer(first))
        if !second.isEmpty { array.append(contentsOf: UnsafeBufferPointer(second)) }
    }

    /// The slots holding the elements at `positions` (stored, not empty), in order.
    @inlinable
    @inline(__always)
    func slots(at positions: Range<Int>) -> Pieces {
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header.pointee
        return storage.pieces(
            from: (header.head &+ (positions.lowerBound &- self.startIndex)) & (header.capacity &- 1),
            count: positions.count)
    }

    /// The `count` slots after the stored elements (there is room for them), in order.
    @inlinable
    @inline(__always)
    func freeSlots(count: Int) -> Pieces {
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header.pointee
        return storage.pieces(from: (header.head &+ header.count) & (header.capacity &- 1), count: count)
    }

    /// Stores `element` at `endIndex`.
    @inlinable
    mutating func append(_ element: Element) {
        self.makeUnique(withRoomFor: 1)
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header
        (storage.slots + ((header.pointee.head &+ header.pointee.count) & (header.pointee.capacity &- 1)))
            .initialize(to: element)
        header.pointee.count &+= 1
    }

    /// Stores `element` at `endIndex` and removes the first element: the window slides by
    /// one, as `append` then `removeFirst(1)` would, with one uniqueness check. Always
    /// inlined: it is a lossy send's every step once the window is full.
    @inlinable
    @inline(__always)
    mutating func appendRemovingFirst(_ element: Element) {
        precondition(!self.isEmpty, "IndexedRing: appendRemovingFirst on an empty ring")
        self.makeUnique(withRoomFor: 0)
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header
        let mask = header.pointee.capacity &- 1
        let head = header.pointee.head
        (storage.slots + head).deinitialize(count: 1)
        (storage.slots + ((head &+ header.pointee.count) & mask)).initialize(to: element)
        header.pointee.head = (head &+ 1) & mask
        self.startIndex &+= 1
    }

    /// Removes the first `k` elements.
    @inlinable
    mutating func removeFirst(_ k: Int) {
        precondition(k >= 0 && k <= self.count, "IndexedRing: removeFirst(\(k)) on \(self.count) elements")
        guard k > 0 else { return }
        self.makeUnique(withRoomFor: 0)
        let storage = self.storage.unsafelyUnwrapped
        let header = storage.header
        let (first, second) = storage.pieces(from: header.pointee.head, count: k)
        first.deinitialize()
        second.deinitialize()
        header.pointee.head = (header.pointee.head &+ k) & (header.pointee.capacity &- 1)
        header.pointee.count &-= k
        self.startIndex &+= k
    }

    /// Moves an empty window so that it starts (and ends) at `position`.
    @inlinable
    mutating func rebase(to position: Int) {
        precondition(self.count == 0, "IndexedRing: rebase of a non-empty ring")
        self.startIndex = position
    }

    /// Makes the storage this ring's own, with room for `extra` more elements: copied if
    /// it is shared, grown (doubling) if it is full.
    @inlinable
    @inline(__always)
    mutating func makeUnique(withRoomFor extra: Int) {
        let isUnique = isKnownUniquelyReferenced(&self.storage)
        let needed = self.count &+ extra
        guard !isUnique || needed > self.capacity else { return }
        var capacity = Swift.max(8, self.capacity)
        while capacity < needed { capacity &*= 2 }
        self.reallocate(capacity: capacity, moving: isUnique)
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
            let (first, second) = old.pieces(from: old.header.pointee.head, count: count)
            if moving {
                // Growing: move the elements (the old slots end up holding none).
                new.slots.moveInitialize(from: first.baseAddress!, count: first.count)
                (new.slots + first.count).moveInitialize(from: second.baseAddress!, count: second.count)
                old.header.pointee.count = 0
            } else {
                new.slots.initialize(from: first.baseAddress!, count: first.count)
                (new.slots + first.count).initialize(from: second.baseAddress!, count: second.count)
            }
            new.header.pointee.count = count
        }
        self.storage = new
    }
}

extension IndexedRing: Sendable where Element: Sendable {}

// What a dense histogram of counts needs (`CursorHistogram`): changing a count in place,
// padding with zeros, and finding the first non-zero count.
extension IndexedRing where Element == Int {
    /// Adds `delta` to the count at `position`, which must be stored.
    @inlinable
    @inline(__always)
    mutating func add(_ delta: Int, at position: Int) {
        precondition(
            position >= self.startIndex && position < self.endIndex,
            "IndexedRing: position \(position) outside \(self.startIndex)..<\(self.endIndex)")
        self.makeUnique(withRoomFor: 0)
        let (slot, _) = self.slots(at: position..<position &+ 1)
        slot[0] &+= delta
    }

    /// Appends `count` zeros.
    @inlinable
    mutating func appendZeros(_ count: Int) {
        guard count > 0 else { return }
        self.makeUnique(withRoomFor: count)
        let (first, second) = self.freeSlots(count: count)
        first.initialize(repeating: 0)
        second.initialize(repeating: 0)
        self.storage.unsafelyUnwrapped.header.pointee.count &+= count
    }

    /// How many counts from `startIndex` on are zero (all of them if none is positive).
    @inlinable
    func leadingZeroCount() -> Int {
        guard !self.isEmpty else { return 0 }
        let (first, second) = self.slots(at: self.startIndex..<self.endIndex)
        if let index = first.firstIndex(where: { $0 != 0 }) { return index }
        if let index = second.firstIndex(where: { $0 != 0 }) { return first.count &+ index }
        return first.count &+ second.count
    }
}
