// `compare --heap-jitter N`: the heap laid out differently for each N.
//
// Where the shared storage, its lock and its buffers land among the other allocations
// decides which of them share a cache line, and under contention that moved the fan-out
// figures more than some library changes did: `delivery-cell share 16 400000` took
// anywhere from 0.155 s to 0.177 s with the same binary, depending only on a few small
// allocations made before it started, and one 128-byte allocation more inside the library
// shrank a 13-14% difference against an earlier commit to 0-3%. A comparison that runs each
// side in one heap layout measures that layout. `Benchmarks/against.py` therefore passes a
// new number every round, the same to both sides, so that each side's median is taken over
// many layouts (Mytkowicz et al., "Producing wrong data without doing anything obviously
// wrong!", ASPLOS 2009, for the same effect from the environment and link order).

public enum HeapJitter {
    /// The sizes of the blocks `allocate(seed:)` makes for `seed`: 1 to 8 of them, each 16
    /// to 512 bytes, a multiple of 16; the same for the same seed on every run.
    public static func blockSizes(seed: UInt64) -> [Int] {
        var generator = SplitMix64(state: seed)
        return (0..<(1 + Int(generator.next() % 8))).map { _ in 16 * (1 + Int(generator.next() % 32)) }
    }

    /// Allocates the blocks of `blockSizes(seed:)` before anything is measured. The caller
    /// keeps them until the end (`free(_:)`), so that the allocator cannot reuse their room.
    public static func allocate(seed: UInt64) -> [UnsafeMutableRawPointer] {
        self.blockSizes(seed: seed).map { size in
            let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            block.storeBytes(of: 0, as: UInt8.self)
            return block
        }
    }

    /// Frees the blocks at the end of the run: until then they hold their place.
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
