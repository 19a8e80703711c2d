// Private queues: what a subscriber reads instead of the shared buffer once its cell froze
// (`Overflow.freeze`, with the `FrozenGroup` it starts from), or once its multicast connection
// ended.

extension MulticastStateMachine {
    /// The pending elements of the members of a cell that froze (`.freeze(keep)`): the `keep`
    /// elements they held, copied once, and how many of them have not yet taken their
    /// private queue from it (each does on its next read). Kept in the lane's `frozen`, by
    /// the cursor its members still hold.
    @usableFromInline
    struct FrozenGroup: Sendable {
        @usableFromInline
        var elements: [Element]
        @usableFromInline
        var members: Int

        @inlinable
        init(elements: [Element], members: Int) {
            self.elements = elements
            self.members = members
        }
    }

    /// A subscriber's private queue: what it reads instead of the shared buffer, in the
    /// machine's `privateQueues`, by slot (`Slot.readsPrivateQueue`). Two kinds:
    /// - a `.freeze(keep)` member (`.bufferingOldest(keep)`) whose cell froze starts one from
    ///   its `FrozenGroup`; it receives new elements only while it holds fewer than `keep`
    ///   (its lane's `roomList`), and the member rejoins the shared buffer at the tail when
    ///   it is empty;
    /// - a subscriber whose multicast connection ended leaves its lane with one holding what
    ///   it still had to read (`endsWhenEmpty`), and ends when it is empty.
    @usableFromInline
    struct PrivateQueue: Sendable {
        @usableFromInline
        var queue: [Element]
        @usableFromInline
        var head = 0
        /// Index in its lane's `roomList`, or -1 while the queue is full.
        @usableFromInline
        var roomIndex = -1
        /// The queue is all the subscriber will ever receive: once it is empty the
        /// subscriber ends (its multicast connection was cancelled).
        @usableFromInline
        var endsWhenEmpty = false
        /// With `endsWhenEmpty`: the subscriber had been evicted, and ends as evicted, with
        /// this eviction.
        @usableFromInline
        var eviction: SubscriberEviction? = nil
        /// With `endsWhenEmpty`: the tail when the connection ended. Nothing produced later
        /// reaches the subscriber, so nothing later drops what a `.bufferingNewest` iterator
        /// took ahead (`MulticastStateMachine.heldBatchTail(of:)`).
        @usableFromInline
        var endedAtTail = 0
        /// The absolute position following the last element queued: an element queued
        /// later at a higher position means the ones in between were missed.
        @usableFromInline
        var nextPosition = 0
        /// Elements missed before the queue element of absolute index `index` (elements
        /// ever popped plus its index in `queue`), oldest first: what lag reports say.
        @usableFromInline
        var gaps: [(index: Int, missed: Int)] = []
        /// Elements popped before `queue[head]`, over the queue's life.
        @usableFromInline
        var popped = 0
        /// With `endsWhenEmpty`: how many of the queue's first elements are the rest of a
        /// replay greeting, which the subscriber does not hold (`backlog(of:)`).
        @usableFromInline
        var greeting = 0

        /// What the subscriber holds of `pending`: all of it but the greeting not read yet.
        @inlinable
        var held: Int { self.pending - Swift.max(0, self.greeting - self.popped) }

        @inlinable
        init(queue: [Element], endsWhenEmpty: Bool = false, nextPosition: Int = 0) {
            self.queue = queue
            self.endsWhenEmpty = endsWhenEmpty
            self.nextPosition = nextPosition
        }

        @inlinable
        var pending: Int { self.queue.count - self.head }

        /// The elements still to be read, in order.
        @inlinable
        var remaining: [Element] { Array(self.queue[self.head...]) }

        /// Queues the element of absolute position `position`, noting a gap before it if
        /// the queue had no room for the ones since `nextPosition`.
        @inlinable
        mutating func push(_ element: Element, at position: Int) {
            if position > self.nextPosition {
                self.gaps.append((self.popped + self.pending, position - self.nextPosition))
            }
            self.queue.append(element)
            self.nextPosition = position + 1
        }

        /// If elements were missed just before the next element, adds them to `missed`,
        /// forgets that gap and returns `true`; the element stays queued.
        @inlinable
        mutating func takeGapBeforeHead(missed: inout Int) -> Bool {
            guard let gap = self.gaps.first, gap.index == self.popped else { return false }
            missed += gap.missed
            self.gaps.removeFirst()
            return true
        }

        /// Takes the next element; adds to `missed` what was missed just before it.
        @inlinable
        mutating func pop(missed: inout Int) -> Element {
            _ = self.takeGapBeforeHead(missed: &missed)
            return self.pop()
        }

        @inlinable
        mutating func pop() -> Element {
            let element = self.queue[self.head]
            self.head += 1
            self.popped += 1
            if self.head >= 32, self.head * 2 >= self.queue.count {
                self.queue.removeFirst(self.head)
                self.head = 0
            }
            return element
        }
    }
}
