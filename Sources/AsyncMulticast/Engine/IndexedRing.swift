/// A FIFO ring buffer addressed by *absolute* positions.
///
/// The shared buffer numbers every element the upstream ever produced (0, 1, 2, …); a
/// subscriber's cursor is such a number. `IndexedRing` stores the contiguous window
/// `startIndex..<endIndex` of those positions, grows by doubling, and never moves the
/// absolute numbering, so cursors stay valid while the window slides.
///
/// Invariants: `capacity` is zero or a power of two; `count <= capacity`; the element at
/// absolute position `startIndex + k` lives in physical slot `(head + k) & (capacity - 1)`.
@usableFromInline
struct IndexedRing<Element> {
    @usableFromInline
    var slots: [Element?] = []
    @usableFromInline
    var head = 0
    /// Absolute position of the first stored element.
    @usableFromInline
    var startIndex: Int
    /// Number of stored elements.
    @usableFromInline
    var count = 0

    @inlinable
    init(startIndex: Int = 0) {
        self.startIndex = startIndex
    }

    /// One past the absolute position of the last stored element.
    @inlinable
    var endIndex: Int { self.startIndex + self.count }
    @inlinable
    var isEmpty: Bool { self.count == 0 }
    @inlinable
    var capacity: Int { self.slots.count }
    @inlinable
    var mask: Int { self.slots.count &- 1 }

    /// The element at absolute position `position`, which must be stored.
    @inlinable
    subscript(position: Int) -> Element {
        get {
            precondition(
                position >= self.startIndex && position < self.endIndex,
                "IndexedRing: position \(position) outside \(self.startIndex)..<\(self.endIndex)")
            return self.slots[(self.head &+ (position &- self.startIndex)) & self.mask]!
        }
        set {
            precondition(
                position >= self.startIndex && position < self.endIndex,
                "IndexedRing: position \(position) outside \(self.startIndex)..<\(self.endIndex)")
            self.slots[(self.head &+ (position &- self.startIndex)) & self.mask] = newValue
        }
    }

    /// Appends the elements at `positions` to `array`, in order: one uniqueness and
    /// capacity check for all of them instead of one per element.
    @inlinable
    func copy(_ positions: Range<Int>, appendingTo array: inout [Element]) {
        precondition(
            positions.lowerBound >= self.startIndex && positions.upperBound <= self.endIndex,
            "IndexedRing: positions \(positions) outside \(self.startIndex)..<\(self.endIndex)")
        let first = self.head &+ (positions.lowerBound &- self.startIndex)
        let mask = self.mask
        self.slots.withUnsafeBufferPointer { slots in
            array.append(contentsOf: Run(slots: slots, position: first, end: first &+ positions.count, mask: mask))
        }
    }

    /// Consecutive elements of the ring, wrapping around its end: what `copy` appends. A
    /// concrete iterator (rather than a closure over the positions) so the append's copy
    /// loop inlines it.
    @usableFromInline
    struct Run: Sequence, IteratorProtocol {
        @usableFromInline let slots: UnsafeBufferPointer<Element?>
        @usableFromInline var position: Int
        @usableFromInline let end: Int
        @usableFromInline let mask: Int

        @inlinable
        init(slots: UnsafeBufferPointer<Element?>, position: Int, end: Int, mask: Int) {
            self.slots = slots
            self.position = position
            self.end = end
            self.mask = mask
        }

        @inlinable
        var underestimatedCount: Int { self.end &- self.position }

        @inlinable
        mutating func next() -> Element? {
            guard self.position < self.end else { return nil }
            defer { self.position &+= 1 }
            return self.slots[self.position & self.mask].unsafelyUnwrapped
        }
    }

    /// Stores `element` at `endIndex`.
    @inlinable
    mutating func append(_ element: Element) {
        if self.count == self.capacity { self.grow() }
        self.slots[(self.head &+ self.count) & self.mask] = element
        self.count &+= 1
    }

    /// Removes the first `k` elements: one uniqueness check for all of them.
    @inlinable
    mutating func removeFirst(_ k: Int) {
        precondition(k >= 0 && k <= self.count, "IndexedRing: removeFirst(\(k)) on \(self.count) elements")
        let head = self.head
        let mask = self.mask
        self.slots.withUnsafeMutableBufferPointer { slots in
            for offset in 0..<k {
                slots[(head &+ offset) & mask] = nil
            }
        }
        self.head = (head &+ k) & mask
        self.startIndex &+= k
        self.count &-= k
    }

    /// Moves an empty window so that it starts (and ends) at `position`.
    @inlinable
    mutating func rebase(to position: Int) {
        precondition(self.count == 0, "IndexedRing: rebase of a non-empty ring")
        self.startIndex = position
    }

    @inlinable
    mutating func grow() {
        let newCapacity = Swift.max(8, self.capacity &* 2)
        var newSlots = [Element?](repeating: nil, count: newCapacity)
        for k in 0..<self.count {
            newSlots[k] = self.slots[(self.head &+ k) & self.mask].take()
        }
        self.slots = newSlots
        self.head = 0
    }
}

extension IndexedRing: Sendable where Element: Sendable {}
