// `compare --heap-jitter N`: each AsyncMulticast cell laid out differently in the heap for
// each N.
//
// Where the shared storage, its lock and its buffers land among the other allocations
// decides which of them share a cache line, and under contention that moved the fan-out
// figures as much as some library changes: with the library at 8249fef,
// `delivery-cell share 16 400000` measured 13-14% slower than 01fa0c8, and 0-3% slower
// with one 128-byte allocation more at the storage's creation. A comparison that runs each
// side in one heap layout measures that layout (Mytkowicz et al., "Producing wrong data
// without doing anything obviously wrong!", ASPLOS 2009, for the same effect from the
// environment and link order). `Benchmarks/Tools/against.py` therefore passes a new number every
// round, the same to both sides, so that each side's median is taken over many layouts.
//
// The blocks are allocated at the start of each cell (`around(_:)`), or of each sample of the
// cancellation cell, which makes a shared sequence per sample (`aroundSetUp(_:)`), on the
// thread that then creates the shared sequence: glibc gives every thread an arena of its
// own, so blocks allocated on the main thread would not move the library's storage, made on
// a worker thread. Mostly small blocks, so that they also change which freed chunks the
// storage's small allocations reuse, not only where fresh memory starts.

import Synchronization

public enum HeapJitter {
    /// The seed of this run (`compare --heap-jitter`), or `nil`: no jitter.
    static let seed = Mutex<UInt64?>(nil)

    /// Every cell that `around(_:)` runs from now on allocates the blocks of `seed` first.
    public static func use(seed: UInt64) {
        self.seed.withLock { $0 = seed }
    }

    /// Runs `cell` with this run's blocks allocated just before it, on the calling thread
    /// (the one whose arena the cell's shared sequence is then made from), and freed after
    /// it. Without a seed, just runs `cell`.
    static func around<T>(_ cell: () async -> T) async -> T {
        guard let seed = self.seed.withLock({ $0 }) else { return await cell() }
        let blocks = self.allocate(seed: seed)
        defer { self.free(blocks) }
        return await cell()
    }

    /// `around(_:)` for a cell that makes a shared sequence per sample (the cancellation
    /// cell): runs the sample's synchronous set-up, on the thread that makes its shared
    /// sequence, with this run's blocks allocated, and frees them once it returns, so that
    /// what the sample allocates after it lands elsewhere too. Without a seed, just runs
    /// `setUp`.
    static func aroundSetUp<T>(_ setUp: () -> T) -> T {
        guard let seed = self.seed.withLock({ $0 }) else { return setUp() }
        let blocks = self.allocate(seed: seed)
        defer { self.free(blocks) }
        return setUp()
    }

    /// The sizes of the blocks `allocate(seed:)` makes for `seed`: 1 to 16 of them, each a
    /// multiple of 16 bytes, three in four of 16 to 128 bytes (the sizes of the storage's
    /// own small allocations, whose free lists they drain differently), the others up to
    /// 512; the same for the same seed on every run.
    public static func blockSizes(seed: UInt64) -> [Int] {
        var generator = SplitMix64(state: seed)
        return (0..<(1 + Int(generator.next() % 16))).map { _ in
            let sixteens: UInt64 = generator.next() % 4 == 0 ? 32 : 8
            return 16 * (1 + Int(generator.next() % sixteens))
        }
    }

    /// Allocates the blocks of `blockSizes(seed:)`, to be kept until `free(_:)`, so that the
    /// allocator cannot reuse their room in between.
    public static func allocate(seed: UInt64) -> [UnsafeMutableRawPointer] {
        self.blockSizes(seed: seed).map { size in
            let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            block.storeBytes(of: 0, as: UInt8.self)
            return block
        }
    }

    /// Frees blocks made by `allocate(seed:)`.
    public static func free(_ blocks: [UnsafeMutableRawPointer]) {
        for block in blocks { block.deallocate() }
    }
}

/// A small seeded generator (SplitMix64), so that one number gives one layout on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
