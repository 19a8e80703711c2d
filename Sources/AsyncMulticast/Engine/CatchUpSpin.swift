import Synchronization

/// Lets a subscriber that has caught up with a busy producer wait a few microseconds for
/// the next elements instead of suspending at once.
///
/// Why: a suspended subscriber is resumed through its executor (for a nonisolated task,
/// the global one), which wakes a sleeping thread — a futex call of microseconds, paid by
/// the producer on its critical path. Over a fast upstream a subscriber on another core
/// catches up every ~10 elements, and those wake-ups cost more than producing the elements
/// (Benchmarks/README.md, "What bounds N = 1"). A subscriber that waits briefly while the
/// producer is visibly producing takes the next elements as one batch, and nobody has to
/// be woken.
///
/// Kept from ever becoming a busy wait:
/// - never on an actor's executor (the main actor must not busy-wait for a producer): only
///   a nonisolated subscriber waits (`MulticastStorage.refill`);
/// - only a sequence's sole subscriber on a lossless policy waits
///   (`MulticastStateMachine.catchUpBatch(for:)`), and the token below makes that at most
///   one thread per storage even in a race;
/// - after a wait that saw no offer, the next catch-ups do not wait (exponential backoff);
/// - it stops as soon as the batch it waits for has arrived, when the producer has been
///   quiet for ``quietLimit`` (a slow or bursty source costs one such wait per catch-up),
///   when its task is cancelled, and after ``maxSpin`` in any case.
///
/// The price: the wait occupies the thread the subscriber runs on for up to ``maxSpin``,
/// and while it waits for a batch the first
/// element of that batch is not returned yet, so it can reach the subscriber up to
/// ``maxSpin`` later than a wake-up would have delivered it.
///
/// What the subscriber receives does not change: the wait only happens on lossless lanes,
/// where an element is kept for a subscriber whether or not it is suspended; afterwards it
/// reads under the lock and, if there is still nothing, suspends exactly as it would have.
@usableFromInline
struct CatchUpSpin: ~Copyable, Sendable {
    /// Offers made so far (wrapping). A hint read without the lock, so relaxed ordering is
    /// enough: the subscriber reads the elements themselves under the lock.
    @usableFromInline
    let offers = Atomic<UInt32>(0)
    /// The token of the one subscriber allowed to spin.
    @usableFromInline
    let isTaken = Atomic<Bool>(false)
    /// Catch-ups to let go by without waiting: the wait has not paid off lately. Written
    /// by the token holder; a stale read only shifts one decision.
    @usableFromInline
    let skips = Atomic<Int>(0)
    /// How many catch-ups the last fruitless wait made the subscriber skip: doubled by each
    /// fruitless wait (up to ``longestBackoff``), zero after a wait that saw an offer.
    @usableFromInline
    let backoff = Atomic<Int>(0)

    @inlinable
    init() {}

    /// Set only by a benchmark, through `CatchUpSpinSwitch` (SPI): no subscriber of this
    /// process waits, so that the sole subscriber's path can be counted without the wait,
    /// whose instruction count moves with the machine's load. Relaxed: it is set before the
    /// subscribers start.
    @usableFromInline
    static let isOff = Atomic<Bool>(false)

    /// The most elements to wait for before reading them: large enough that the
    /// subscriber's lock acquisitions stay rare (tuned on the N = 1 benchmark: 16 to 48 all
    /// help, 48 most). A lane whose read takes fewer waits for fewer.
    @inlinable
    static var batch: Int { 48 }

    /// Stop once no offer arrived for this long: the producer is waiting for its source, or
    /// is not running. A busy producer offers an element every 0.1–0.5 µs.
    @inlinable
    static var quietLimit: Duration { .microseconds(1) }

    /// Stop after this long in any case.
    @inlinable
    static var maxSpin: Duration { .microseconds(20) }

    /// The most catch-ups skipped after fruitless waits in a row: a slow producer (an
    /// element every 100 µs, say) then costs one 1 µs wait per this many elements.
    @inlinable
    static var longestBackoff: Int { 256 }

    /// Called by a producer after each element it offered.
    @inlinable
    func recordOffer() {
        self.offers.wrappingAdd(1, ordering: .relaxed)
    }

    /// The offers recorded so far (wrapping): a subscriber that compares two readings
    /// learns whether anything was offered in between (`ElementBatch.offersWhenCaughtUp`).
    /// 32 bits, so that the remembered count and its "not set" (0) take 4 bytes of an
    /// iterator: a reading taken exactly 2³² offers later looks unchanged, which costs that
    /// subscriber one `wait` that reads, nothing more.
    @inlinable
    var offerCount: UInt32 { self.offers.load(ordering: .relaxed) }

    /// Waits while the producer keeps offering, until `batch` offers arrived (see the
    /// type's rules). Returns `true` if anything was offered meanwhile (read again before
    /// suspending), `false` if not, or at once if another subscriber holds the token.
    ///
    /// `eachRound` runs once per round of reads (a test seam: it lets a test offer
    /// during the wait from the waiting thread itself; the storage passes nothing).
    ///
    /// It learns from its own history: a wait that saw no offer makes the next catch-ups
    /// suspend at once (1, 2, 4, … up to ``longestBackoff`` of them) before it tries again,
    /// so a producer that is not busy is not waited for over and over.
    @inlinable
    func waitForOffers(upTo batch: Int, eachRound: () -> Void = {}) -> Bool {
        if Self.isOff.load(ordering: .relaxed) { return false }
        let skips = self.skips.load(ordering: .relaxed)
        if skips > 0 {
            self.skips.store(skips - 1, ordering: .relaxed)
            return false
        }
        guard self.isTaken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            return false
        }
        defer { self.isTaken.store(false, ordering: .releasing) }
        let sawOffers = self.spin(upTo: batch, eachRound: eachRound)
        if sawOffers {
            self.backoff.store(0, ordering: .relaxed)
        } else {
            let next = Swift.min(Swift.max(1, self.backoff.load(ordering: .relaxed) * 2), Self.longestBackoff)
            self.backoff.store(next, ordering: .relaxed)
            self.skips.store(next, ordering: .relaxed)
        }
        return sawOffers
    }

    /// The wait itself, with the token held; see `waitForOffers(upTo:eachRound:)`.
    @inlinable
    func spin(upTo batch: Int, eachRound: () -> Void) -> Bool {
        let clock = ContinuousClock()
        let first = self.offers.load(ordering: .relaxed)
        let start = clock.now
        var seen = first
        var lastOffer = start
        while true {
            eachRound()
            // Reading a cached line is a nanosecond; check the clock only every 32 reads.
            var moved = false
            for _ in 0..<32 {
                let current = self.offers.load(ordering: .relaxed)
                if current != seen {
                    seen = current
                    moved = true
                }
            }
            if Int(seen &- first) >= batch { return true }
            if Task.isCancelled { return seen != first }
            let now = clock.now
            if moved {
                lastOffer = now
            } else if now - lastOffer >= Self.quietLimit {
                return seen != first
            }
            if now - start >= Self.maxSpin { return seen != first }
        }
    }
}
