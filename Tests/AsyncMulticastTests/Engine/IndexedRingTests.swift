// The ring buffer under the shared buffer and the histograms, on its own: its slots are raw
// memory, initialized only inside the window, so these tests check what the pointer code
// must get right: the window wrapping around the end of the slots, growing (moving the
// elements), copy-on-write of a shared storage (copying them), bulk removal, and each stored
// element released exactly once. Class elements count their instances, so a leak or a
// double release shows; .ci/run also runs this suite under the address sanitizer. Then
// thousands of seeded random operations against a plain array.

import Testing

@testable import AsyncMulticast

/// Counts the live instances of `Tracked`.
private final class Census {
    var live = 0
    var created = 0
}

/// An element with reference semantics whose instances are counted.
private final class Tracked {
    let value: Int
    let census: Census

    init(_ value: Int, census: Census) {
        self.value = value
        self.census = census
        census.live += 1
        census.created += 1
    }

    deinit { self.census.live -= 1 }
}

extension IndexedRing {
    /// The stored elements, oldest first.
    fileprivate var elementsInOrder: [Element] {
        var out: [Element] = []
        self.copy(self.startIndex..<self.endIndex, appendingTo: &out)
        return out
    }

    /// The physical slot of the window's first element.
    fileprivate var head: Int { self.storage?.header.pointee.head ?? 0 }

    /// The storage object, to tell whether two rings share one or a ring kept its own.
    fileprivate var storageIdentity: ObjectIdentifier? { self.storage.map(ObjectIdentifier.init) }

    /// `capacity` is zero or a power of two, and holds `count`.
    fileprivate var capacityIsValid: Bool {
        (self.capacity == 0 || self.capacity.nonzeroBitCount == 1) && self.count <= self.capacity
    }
}

extension IndexedRing<Tracked> {
    fileprivate var values: [Int] { self.elementsInOrder.map(\.value) }
}

@Suite("IndexedRing: the ring under the shared buffer")
struct IndexedRingTests {
    // MARK: - The window

    @Test func anEmptyRingHasNoStorage() {
        let ring = IndexedRing<Int>(startIndex: 7)
        #expect(ring.isEmpty && ring.count == 0 && ring.capacity == 0)
        #expect(ring.startIndex == 7 && ring.endIndex == 7)
        #expect(ring.storage == nil)
        var out = [1]
        ring.copy(7..<7, appendingTo: &out)
        #expect(out == [1])
    }

    @Test func positionsAreAbsoluteAndSurviveTheWindowSliding() {
        var ring = IndexedRing<Int>(startIndex: 100)
        for value in 0..<5 { ring.append(value) }
        #expect(ring.startIndex == 100 && ring.endIndex == 105)
        #expect((100..<105).map { ring[$0] } == [0, 1, 2, 3, 4])
        ring.removeFirst(2)
        #expect(ring.startIndex == 102 && ring.endIndex == 105 && ring.count == 3)
        #expect(ring[102] == 2 && ring[104] == 4)
        ring.append(5)
        #expect(ring[105] == 5 && ring.endIndex == 106)
    }

    @Test func theWindowWrapsAroundTheEndOfTheSlots() {
        var ring = IndexedRing<Int>()
        for value in 0..<6 { ring.append(value) }
        #expect(ring.capacity == 8)
        ring.removeFirst(5)
        #expect(ring.head == 5)
        for value in 6..<12 { ring.append(value) }  // slots 6, 7, then 0...3
        #expect(ring.capacity == 8 && ring.count == 7, "no growth while there is room")
        #expect(ring.head == 5)
        let (first, second) = ring.slots(at: ring.startIndex..<ring.endIndex)
        #expect(first.count == 3 && second.count == 4, "the window is in two pieces")
        #expect(ring.elementsInOrder == Array(5..<12))
        #expect((5..<12).map { ring[$0] } == Array(5..<12))
        // A copy of a run that crosses the end of the slots, appended to what is there.
        var out = [-1]
        ring.copy(6..<10, appendingTo: &out)
        #expect(out == [-1, 6, 7, 8, 9])
        // Removing across the end: the head wraps to the start of the slots.
        ring.removeFirst(4)
        #expect(ring.head == 1 && ring.elementsInOrder == [9, 10, 11])
    }

    // MARK: - Growth

    @Test func growthDoublesAndKeepsTheOrder() {
        var ring = IndexedRing<Int>(startIndex: 3)
        var capacities: [Int] = []
        for value in 0..<100 {
            ring.append(value)
            if capacities.last != ring.capacity { capacities.append(ring.capacity) }
        }
        #expect(capacities == [8, 16, 32, 64, 128])
        #expect(ring.elementsInOrder == Array(0..<100))
        #expect(ring.startIndex == 3 && ring.endIndex == 103)
    }

    @Test func growingAWrappedWindowUnwrapsIt() {
        var ring = IndexedRing<Int>()
        for value in 0..<8 { ring.append(value) }
        ring.removeFirst(6)
        for value in 8..<14 { ring.append(value) }  // full, wrapped: head 6
        #expect(ring.capacity == 8 && ring.count == 8 && ring.head == 6)
        let before = ring.storageIdentity
        ring.append(14)
        #expect(ring.capacity == 16 && ring.head == 0, "moved to a new storage, from slot 0")
        #expect(ring.storageIdentity != before)
        #expect(ring.elementsInOrder == Array(6..<15))
    }

    @Test func makeUniqueWithRoomGrowsOnlyWhenNeeded() {
        var ring = IndexedRing<Int>()
        ring.makeUnique(withRoomFor: 0)
        #expect(ring.capacity == 8 && ring.isEmpty, "the first storage has 8 slots")
        let first = ring.storageIdentity
        ring.makeUnique(withRoomFor: 8)
        #expect(ring.storageIdentity == first, "a unique storage with room is kept")
        ring.makeUnique(withRoomFor: 9)
        #expect(ring.capacity == 16)
        for value in 0..<5 { ring.append(value) }
        ring.makeUnique(withRoomFor: 100)
        #expect(ring.capacity == 128 && ring.elementsInOrder == Array(0..<5))
        let grown = ring.storageIdentity
        for value in 5..<105 { ring.append(value) }
        #expect(ring.storageIdentity == grown, "the room made is used without reallocating")
        #expect(ring.elementsInOrder == Array(0..<105))
    }

    // MARK: - Copy-on-write

    @Test func mutatingACopyLeavesTheOriginalIntact() {
        var original = IndexedRing<Int>(startIndex: 10)
        for value in 0..<6 { original.append(value) }
        original.removeFirst(3)
        for value in 6..<10 { original.append(value) }  // wrapped
        let snapshot = original.elementsInOrder

        var copy = original
        #expect(copy.storageIdentity == original.storageIdentity, "shared until written")
        copy.append(99)
        #expect(copy.storageIdentity != original.storageIdentity)
        #expect(original.elementsInOrder == snapshot && original.endIndex == 20)
        #expect(copy.elementsInOrder == snapshot + [99])

        var trimmed = original
        trimmed.removeFirst(4)
        #expect(original.elementsInOrder == snapshot && original.startIndex == 13)
        #expect(trimmed.elementsInOrder == Array(snapshot.dropFirst(4)) && trimmed.startIndex == 17)

        var emptied = original
        emptied.removeFirst(emptied.count)
        emptied.rebase(to: 1_000)
        emptied.append(-1)
        #expect(original.elementsInOrder == snapshot && original.startIndex == 13)
        #expect(emptied.startIndex == 1_000 && emptied[1_000] == -1)

        var reserved = original
        reserved.makeUnique(withRoomFor: 0)
        #expect(reserved.storageIdentity != original.storageIdentity, "made unique: copied")
        #expect(reserved.capacity == original.capacity && reserved.head == 0)
        #expect(reserved.elementsInOrder == snapshot && original.elementsInOrder == snapshot)
    }

    @Test func mutatingTheOriginalLeavesACopyIntact() {
        var original = IndexedRing<Int>()
        for value in 0..<20 { original.append(value) }
        let copy = original
        original.removeFirst(15)
        for value in 20..<40 { original.append(value) }
        #expect(copy.elementsInOrder == Array(0..<20) && copy.startIndex == 0)
        #expect(original.elementsInOrder == Array(15..<40) && original.startIndex == 15)
    }

    @Test func countsChangedInACopyLeaveTheOriginalIntact() {
        var original = IndexedRing<Int>()
        original.appendZeros(5)
        original.add(3, at: 2)
        var copy = original
        copy.add(4, at: 0)
        copy.appendZeros(2)
        #expect(original.elementsInOrder == [0, 0, 3, 0, 0])
        #expect(copy.elementsInOrder == [4, 0, 3, 0, 0, 0, 0])
        #expect(original.leadingZeroCount() == 2 && copy.leadingZeroCount() == 0)
    }

    // MARK: - Elements with reference semantics

    @Test func everyElementIsReleasedOnceWhateverPathItTook() {
        let census = Census()
        do {
            var ring = IndexedRing<Tracked>()
            for value in 0..<6 { ring.append(Tracked(value, census: census)) }
            ring.removeFirst(4)  // releases 0...3
            #expect(census.live == 2)
            for value in 6..<12 { ring.append(Tracked(value, census: census)) }  // wraps
            ring.append(Tracked(12, census: census))  // grows: moves the 9 elements
            #expect(census.live == 9 && ring.values == Array(4..<13))

            var copy = ring
            copy.removeFirst(5)  // copies all 9, then releases 5 of the copies
            #expect(census.live == 9, "the original still holds all of them")
            copy.append(Tracked(13, census: census))
            #expect(census.live == 10)
            ring = IndexedRing()  // the original's storage goes: 4...8 with it
            #expect(census.live == 5 && copy.values == Array(9..<14))

            var out: [Tracked] = []
            copy.copy(11..<14, appendingTo: &out)
            copy.removeFirst(copy.count)
            #expect(census.live == 3, "the copied-out elements outlive the ring's")
            #expect(out.map(\.value) == [11, 12, 13])
            out.removeAll()
            #expect(census.live == 0)
            copy.rebase(to: 50)
            copy.append(Tracked(50, census: census))
            #expect(census.live == 1)
            // Sliding the window by one releases the element it leaves, wrapping or not.
            for value in 51..<70 { copy.appendRemovingFirst(Tracked(value, census: census)) }
            #expect(census.live == 1 && copy.values == [69] && copy.startIndex == 69)
            for value in 70..<73 { copy.append(Tracked(value, census: census)) }
            var shared = copy
            shared.appendRemovingFirst(Tracked(73, census: census))  // copies first
            #expect(copy.values == [69, 70, 71, 72] && shared.values == [70, 71, 72, 73])
            #expect(census.live == 5)
        }
        #expect(census.live == 0, "\(census.live) of \(census.created) elements leaked")
    }

    // MARK: - Random operations against an array

    /// One ring under test and the array it must equal.
    private struct Copy {
        var ring: IndexedRing<Tracked>
        var model: [Int]
        var start: Int
    }

    @Test("random operations agree with an array", arguments: 0..<4 as Range<UInt64>)
    func randomOperationsAgreeWithAnArray(seed: UInt64) async {
        var random = LCG(seed: seed &+ 0x1D_E8ED)
        let census = Census()
        do {
            var subject = Copy(ring: IndexedRing(startIndex: 0), model: [], start: 0)
            // Copies taken along the way: each must keep its contents while `subject` and the
            // others change. `holders[v]`: how many of them and `subject` hold the element v.
            var copies: [Copy] = []
            var holders: [Int: Int] = [:]
            var nextValue = 0
            // The size the operations drift towards; changed now and then, so that the window
            // wraps around many capacities, grows, and empties.
            var target = 10
            // What the run went through, so that a seed that misses a path shows.
            var wrapped = 0
            var grown = 0
            var copiedOnWrite = 0

            func hold(_ values: some Sequence<Int>, _ delta: Int) {
                for value in values {
                    let count = holders[value, default: 0] + delta
                    holders[value] = count == 0 ? nil : count
                }
            }

            for step in 0..<10_000 {
                // Seconds of work under a sanitizer: let the tests beside it run now and then.
                if step % 100 == 0 { await Task.yield() }
                if step % 400 == 0 { target = [0, 3, 10, 40, 200][Int(random.next() % 5)] }
                let storageBefore = subject.ring.storageIdentity
                let capacityBefore = subject.ring.capacity
                let sharedBefore = copies.contains { $0.ring.storageIdentity == storageBefore }
                let count = subject.model.count
                switch random.next() % 16 {
                case 0...5 where count <= target || random.next() % 4 == 0:
                    let burst = 1 + Int(random.next() % 8)
                    for _ in 0..<burst {
                        subject.ring.append(Tracked(nextValue, census: census))
                        subject.model.append(nextValue)
                        hold([nextValue], 1)
                        nextValue += 1
                    }
                case 6...7 where count > 0:
                    // Bulk trim, more of it when above the target.
                    let k = Swift.min(count, Int(random.next() % UInt64(count > target ? count + 1 : 3)))
                    subject.ring.removeFirst(k)
                    hold(subject.model.prefix(k), -1)
                    subject.model.removeFirst(k)
                    subject.start += k
                case 8 where count > 0:
                    // The window slides by one (a `.bufferingNewest` lane's usual step).
                    subject.ring.appendRemovingFirst(Tracked(nextValue, census: census))
                    hold(subject.model.prefix(1), -1)
                    subject.model.removeFirst()
                    subject.model.append(nextValue)
                    hold([nextValue], 1)
                    nextValue += 1
                    subject.start += 1
                case 9 where count == 0:
                    let position = Int(random.next() % 1_000_000)
                    subject.ring.rebase(to: position)
                    subject.start = position
                case 9:
                    // Everything goes; then the empty window moves, or a new ring (with no
                    // storage, to grow again from 8) takes over.
                    subject.ring.removeFirst(count)
                    hold(subject.model, -1)
                    subject.model.removeAll()
                    subject.start += count
                    switch random.next() % 3 {
                    case 0:
                        subject.start = Int(random.next() % 1_000_000)
                        subject.ring.rebase(to: subject.start)
                    case 1:
                        subject.ring = IndexedRing(startIndex: subject.start)
                    default:
                        break
                    }
                case 10:
                    let lower = Int(random.next() % UInt64(count + 1))
                    let upper = lower + Int(random.next() % UInt64(count - lower + 1))
                    var out = [Tracked(-1, census: census)]
                    subject.ring.copy((subject.start + lower)..<(subject.start + upper), appendingTo: &out)
                    #expect(out.map(\.value) == [-1] + subject.model[lower..<upper], "step \(step)")
                case 11 where count > 0:
                    let offset = Int(random.next() % UInt64(count))
                    #expect(subject.ring[subject.start + offset].value == subject.model[offset], "step \(step)")
                case 12:
                    let extra = Int(random.next() % 40)
                    let wasShared = copies.contains { $0.ring.storageIdentity == subject.ring.storageIdentity }
                    let before = subject.ring.storageIdentity
                    let hadRoom = count + extra <= subject.ring.capacity
                    subject.ring.makeUnique(withRoomFor: extra)
                    #expect(subject.ring.capacity >= count + extra, "step \(step)")
                    #expect(
                        (subject.ring.storageIdentity == before) == (!wasShared && hadRoom && before != nil),
                        "step \(step): reallocated exactly when shared or short of room")
                    #expect(isKnownUniquelyReferenced(&subject.ring.storage), "step \(step)")
                case 13 where copies.count < 3:
                    copies.append(subject)
                    hold(subject.model, 1)
                case 14 where !copies.isEmpty:
                    let copy = copies.remove(at: Int(random.next() % UInt64(copies.count)))
                    #expect(copy.ring.values == copy.model, "step \(step): a copy changed")
                    hold(copy.model, -1)
                case 15 where !copies.isEmpty:
                    // A copy becomes the subject (the old subject is dropped): the storage it
                    // shares is written to next.
                    hold(subject.model, -1)
                    subject = copies.remove(at: Int(random.next() % UInt64(copies.count)))
                default:
                    break
                }

                let ring = subject.ring
                if ring.head + ring.count > ring.capacity { wrapped += 1 }
                if ring.capacity > capacityBefore && capacityBefore > 0 { grown += 1 }
                if storageBefore != nil && sharedBefore && ring.storageIdentity != storageBefore {
                    copiedOnWrite += 1
                }
                #expect(ring.startIndex == subject.start && ring.count == subject.model.count, "step \(step)")
                #expect(ring.endIndex == subject.start + subject.model.count, "step \(step)")
                #expect(ring.capacityIsValid, "step \(step): capacity \(ring.capacity) for \(ring.count)")
                #expect(ring.values == subject.model, "step \(step)")
                #expect(census.live == holders.count, "step \(step): live elements")
                if step % 50 == 0 {
                    for copy in copies {
                        #expect(copy.ring.values == copy.model, "step \(step): a copy changed")
                    }
                }
            }
            #expect(census.created > 1_000 && wrapped > 100 && grown > 50 && copiedOnWrite > 100)
        }
        #expect(census.live == 0, "\(census.live) of \(census.created) elements leaked")
    }

    @Test("random count changes agree with an array", arguments: 0..<2 as Range<UInt64>)
    func randomCountChangesAgreeWithAnArray(seed: UInt64) {
        var random = LCG(seed: seed &+ 0xC0_0A75)
        var ring = IndexedRing<Int>(startIndex: 0)
        var model: [Int] = []
        var start = 0
        for step in 0..<4_000 {
            switch random.next() % 6 {
            case 0:
                let zeros = Int(random.next() % 12)
                ring.appendZeros(zeros)
                model += repeatElement(0, count: zeros)
            case 1:
                let value = Int(random.next() % 3)
                ring.append(value)
                model.append(value)
            case 2...3 where !model.isEmpty:
                let offset = Int(random.next() % UInt64(model.count))
                let delta = Int(random.next() % 5) - 2
                if random.next() % 4 == 0 {
                    // Through a copy that is written to and dropped: the ring is unchanged.
                    var copy = ring
                    copy.add(delta &+ 1, at: start + offset)
                    #expect(copy[start + offset] == model[offset] + delta + 1, "step \(step)")
                } else {
                    ring.add(delta, at: start + offset)
                    model[offset] += delta
                }
            case 4 where !model.isEmpty:
                let k = Int(random.next() % UInt64(Swift.min(model.count, 20) + 1))
                ring.removeFirst(k)
                model.removeFirst(k)
                start += k
            case 5 where model.isEmpty:
                start = Int(random.next() % 10_000)
                ring.rebase(to: start)
            default:
                break
            }
            #expect(ring.startIndex == start && ring.elementsInOrder == model, "step \(step)")
            #expect(ring.leadingZeroCount() == (model.firstIndex { $0 != 0 } ?? model.count), "step \(step)")
            #expect(ring.capacityIsValid, "step \(step)")
        }
    }

    // MARK: - Positions outside the window stop the process

    @Suite("IndexedRing: preconditions")
    struct Preconditions {
        @Test func readingOutsideTheWindow() async {
            await #expect(processExitsWith: .failure) {
                var ring = IndexedRing<Int>(startIndex: 10)
                ring.append(1)
                _ = ring[11]
            }
        }

        @Test func copyingOutsideTheWindow() async {
            await #expect(processExitsWith: .failure) {
                var ring = IndexedRing<Int>(startIndex: 10)
                ring.append(1)
                var out: [Int] = []
                ring.copy(9..<11, appendingTo: &out)
            }
        }

        @Test func removingMoreThanIsStored() async {
            await #expect(processExitsWith: .failure) {
                var ring = IndexedRing<Int>()
                ring.append(1)
                ring.removeFirst(2)
            }
        }

        @Test func rebasingANonEmptyRing() async {
            await #expect(processExitsWith: .failure) {
                var ring = IndexedRing<Int>()
                ring.append(1)
                ring.rebase(to: 5)
            }
        }
    }
}
