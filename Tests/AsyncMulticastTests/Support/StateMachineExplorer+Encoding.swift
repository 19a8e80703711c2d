// The canonical encoding of a state of the explorer (StateMachineExplorer.swift): the machine
// and the reference model together, as bytes, with subscribers named by what they hold.

import Foundation  // memcmp

@testable import AsyncMulticast

/// An encoding in the visited set: hashed and compared as bytes (a debug build hashes an
/// `[UInt8]` one element at a time, through generic code).
struct StateKey: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        self.bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: StateKey, b: StateKey) -> Bool {
        a.bytes.count == b.bytes.count && Self.compare(a.bytes, b.bytes) == 0
    }

    /// Whether `a` sorts before `b`: shorter first, then bytewise.
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count != b.count ? a.count < b.count : Self.compare(a, b) < 0
    }

    /// `memcmp` of two encodings of the same length.
    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int32 {
        guard !a.isEmpty else { return 0 }
        return a.withUnsafeBytes { a in b.withUnsafeBytes { b in memcmp(a.baseAddress!, b.baseAddress!, a.count) } }
    }
}

/// Bytes that identify a state: small integers, zigzag varint coded.
struct StateEncoding {
    var bytes: [UInt8] = []

    mutating func add(_ value: Int) {
        var zigzag = UInt(bitPattern: (value << 1) ^ (value >> (Int.bitWidth - 1)))
        while zigzag >= 0x80 {
            self.bytes.append(UInt8(truncatingIfNeeded: zigzag) | 0x80)
            zigzag >>= 7
        }
        self.bytes.append(UInt8(zigzag))
    }

    mutating func add(_ flag: Bool) { self.bytes.append(flag ? 1 : 0) }

    /// A list, with its length first.
    mutating func add(_ values: [Int]) {
        self.add(values.count)
        for value in values { self.add(value) }
    }
}

extension ModelRun {
    /// Everything of this run (the machine and the model) that decides what a later step may
    /// do or observe, and what `compare()` checks: two runs with the same encoding behave
    /// alike under every sequence of steps, up to the order of their subscribers.
    ///
    /// Canonical: subscribers are named by their rank among the subscribers' own parts
    /// (sorted), not by the machine's slot numbers, generations and free list (which only say
    /// where a subscriber is kept) nor by the order they joined; epochs are counted back from
    /// the next one; a failure's step number is left out.
    func canonicalEncoding() -> [UInt8] {
        let parts = self.subscribers.indices.map { k in
            var part = StateEncoding()
            self.encodeSubscriber(k, into: &part)
            return part.bytes
        }
        // At most a few: an insertion sort, stable.
        var order = Array(parts.indices)
        for i in order.indices.dropFirst() {
            var j = i
            while j > 0, StateKey.precedes(parts[order[j]], parts[order[j - 1]]) {
                order.swapAt(j, j - 1)
                j -= 1
            }
        }
        var code = StateEncoding()
        code.bytes.reserveCapacity(64 + parts.reduce(0) { $0 + $1.count })
        self.encodeShared(
            into: &code,
            rank: { slot in
                guard let k = self.subscribers.firstIndex(where: { $0.id.slot == slot }) else { return -2 }
                return order.firstIndex(of: k)!
            })
        code.add(parts.count)
        for k in order { code.bytes += parts[k] }
        return code.bytes
    }

    /// An epoch, counted back from the next one the model would start (`-1`: none).
    func epochCode(_ epoch: UInt64?) -> Int {
        epoch.map { Int(self.nextEpoch) - Int($0) } ?? -1
    }

    func encodeUpstream(_ upstream: Machine.Upstream, into code: inout StateEncoding) {
        switch upstream {
        case .idle: code.add(0)
        case .running(let epoch):
            code.add(1)
            code.add(self.epochCode(epoch))
        case .lingering(let epoch):
            code.add(2)
            code.add(self.epochCode(epoch))
        case .terminated(.finished): code.add(3)
        case .terminated(.failed): code.add(4)
        }
    }

    /// What belongs to no subscriber, in the model and the machine; `rank` names the
    /// subscriber in a slot (`-2`: none of the model's).
    func encodeShared(into code: inout StateEncoding, rank: (UInt32) -> Int) {
        self.encodeUpstream(self.upstream, into: &code)
        code.add(self.epochCode(self.staleEpochs.last))
        code.add(self.terminal == nil ? 0 : self.terminal == .success(nil) ? 1 : 2)
        code.add(self.timerRunning)
        code.add(self.value)
        code.add(Array(self.produced.suffix(self.config.replay)))
        var tokens: [UInt64] = []
        for case .parked(_, _, let token) in self.producers { tokens.append(token) }
        tokens.sort()
        code.add(self.producers.count)
        for producer in self.producers {
            switch producer {
            case .free: code.add(0)
            case .mustWait(let value):
                code.add(1)
                code.add(value ?? -1)
            case .parked(_, let value, let token):
                code.add(2)
                code.add(value ?? -1)
                code.add(tokens.firstIndex(of: token)!)
            }
        }

        let machine = self.machine
        code.add(machine.elements.startIndex)
        code.add(machine.elements.endIndex)
        for position in machine.elements.startIndex..<machine.elements.endIndex { code.add(machine.elements[position]) }
        code.add(machine.replayFloor)
        code.add(machine.subscriberCount)
        code.add(machine.replayExpiryPending)
        code.add(machine.deadlineTimerIsRunning)
        self.encodeUpstream(machine.upstream, into: &code)
        code.add(Int(machine.nextEpoch) - Int(self.nextEpoch))
        code.add(machine.lastGreetingSlot.map(rank) ?? -1)
        code.add(machine.waiters.map { rank($0.slot) })
        code.add(machine.parkedProducers.count)
        for parked in machine.parkedProducers { code.add(parked.element ?? -1) }
        code.add(machine.lanes.count)
        for lane in machine.lanes {
            Self.encode(lane.policy, into: &code)
            code.add(lane.members)
            code.add(lane.atTail)
            code.add(lane.waiting)
            code.add(lane.evicted)
            code.add(lane.evictions.count)
            for record in lane.evictions {
                code.add([record.cursors.lowerBound, record.cursors.upperBound, record.heldAt])
                code.add(record.reason == .softLimit)
            }
            code.add(lane.softDeadlines.count)
            Self.encode(lane.counts, into: &code)
            code.add(lane.roomList.map(rank))
            code.add(lane.frozen.count)
            for position in lane.frozen.keys.sorted() {
                code.add(position)
                code.add(lane.frozen[position]!.members)
                code.add(lane.frozen[position]!.elements)
            }
        }
        // What is kept for a slot no subscriber of the model holds is a leak: in the state,
        // so that the invariants see where it leads.
        var kept = 0
        for slot in machine.privateQueues.keys where rank(slot) < 0 { kept += 1 }
        for slot in machine.greetings.keys where rank(slot) < 0 { kept += 1 }
        for slot in machine.missedOnRejoin.keys where rank(slot) < 0 { kept += 1 }
        code.add(kept)
        code.add(machine.evictionWatchers.count)
        code.add(machine.evictionNotices.count)
        code.add(machine.departedEvictions.count)
        code.add(Int(machine.upstreamPriority))
        code.add(Int(self.upstreamPriority))
        self.encodeTime(into: &code)
        self.encodeHost(into: &code)
        code.add(self.countObservers.count)
        code.add(self.countHeard)
        code.add(self.completionObservers.count)
        code.add(machine.countObservers.cells.count)
        code.add(machine.countObservers.reportedCount)
        code.add(machine.completionObservers.count)
    }

    /// The clock and the timer, in the model and the machine, as seconds from the model's
    /// clock (so that runs that differ only by when they happen are one state), the timer
    /// tasks' generations counted back from the latest.
    func encodeTime(into code: inout StateEncoding) {
        func add(_ instant: Duration?) {
            guard let instant else { return code.add(-1_000_000) }
            code.add(Int((instant - self.time).components.seconds))
        }
        code.add(Int(self.time.components.seconds))
        add(self.timerDeadline)
        add(self.timerWakeUp)
        code.add(self.timerTasks.count)
        for task in self.timerTasks {
            code.add(Int(self.timerGeneration) - Int(task.generation))
            code.add(task.started)
            add(task.sleptUntil)
            add(task.sleepingUntil)
            code.add(task.cancelled)
        }
        let timer = self.machine.timer
        code.add(Int(self.timerGeneration) - Int(timer.generation))
        add(timer.deadline)
        add(timer.wakeUp)
        code.add(timer.tasksRunning)
    }

    /// Where the hosted `run()` is, in the model and the machine (the model's place seen in
    /// the machine's words, so that one switch encodes both).
    func encodeHost(into code: inout StateEncoding) {
        self.encode(self.host.inMachineWords, into: &code)
        code.add(self.epochCode(self.hostIteration))
        self.encode(self.machine.host, into: &code)
    }

    func encode(_ host: Machine.Host, into code: inout StateEncoding) {
        let (place, pending): (Int, UInt64?) =
            switch host {
            case .notHosted: (0, nil)
            case .notStarted(let pending): (1, pending)
            case .running(let pending): (2, pending)
            case .waiting: (3, nil)
            case .ended: (4, nil)
            }
        code.add(place)
        code.add(self.epochCode(pending))
    }

    /// A buffering policy, its kind and numbers.
    static func encode(_ policy: SharedBufferingPolicy, into code: inout StateEncoding) {
        switch policy {
        case .bounded(let n):
            code.add(0)
            code.add(n)
        case .bufferingNewest(let n):
            code.add(1)
            code.add(n)
        case .bufferingOldest(let n):
            code.add(2)
            code.add(n)
        case .unbounded:
            code.add(3)
        case .evicting(let n, nil):
            code.add(4)
            code.add(n)
        case .evicting(let n, let soft?):
            code.add(5)
            code.add(n)
            code.add(soft.count)
            code.add(Int(soft.duration.components.seconds))
            code.add(Int(soft.duration.components.attoseconds))
        }
    }

    /// A histogram as it is stored (its invariants are about the layout, not only the counts).
    static func encode(_ histogram: CursorHistogram, into code: inout StateEncoding) {
        code.add(histogram.endIndex)
        code.add(histogram.members)
        code.add(histogram.behind.count)
        for cell in histogram.behind {
            code.add(cell.position)
            code.add(cell.count)
        }
        code.add(histogram.counts.startIndex)
        code.add(histogram.counts.endIndex)
        for position in histogram.counts.startIndex..<histogram.counts.endIndex { code.add(histogram.counts[position]) }
    }

    /// Subscriber `k`'s own part, in the model and the machine.
    func encodeSubscriber(_ k: Int, into code: inout StateEncoding) {
        let sub = self.subscribers[k]
        Self.encode(sub.policy, into: &code)
        code.add(sub.batch)
        code.add(sub.pending)
        code.add(sub.gaps)
        code.add(sub.trailing)
        code.add(sub.carried)
        code.add(sub.greeting)
        code.add(sub.evicted)
        code.add(sub.ending)
        code.add(sub.reportsGaps)
        code.add(sub.waiting != nil ? Int(sub.waitingPriority) : -1)

        let machine = self.machine
        guard Int(sub.id.slot) < machine.slots.count else {
            code.add(-1)
            return
        }
        let slot = machine.slots[Int(sub.id.slot)]
        code.add(slot.cursor)
        code.add(Int(slot.lane))
        code.add(Int(slot.waiterIndex))
        code.add(slot.highWaterMark)
        code.add(Int(slot.generation &- sub.id.generation))
        code.add(slot.isLive)
        code.add(slot.readsPrivateQueue)
        code.add(slot.connectsOnDemand)
        code.add(machine.missedOnRejoin[sub.id.slot] ?? -1)
        if let greeting = machine.greetings[sub.id.slot] {
            code.add(greeting.start)
            code.add(greeting.next)
            code.add(greeting.elements)
        } else {
            code.add(-1)
        }
        if let queue = machine.privateQueues[sub.id.slot] {
            code.add(queue.remaining)
            code.add(queue.roomIndex)
            code.add(queue.nextPosition)
            code.add(queue.greeting - queue.popped)
            code.add(queue.endsWhenEmpty)
            code.add(queue.eviction.map { [$0.reason == .softLimit ? 1 : 0, $0.backlog, $0.highWaterMark] } ?? [-1])
            code.add(queue.gaps.count)
            for gap in queue.gaps {
                code.add(gap.index - queue.popped)
                code.add(gap.missed)
            }
        } else {
            code.add(-1)
        }
    }
}
