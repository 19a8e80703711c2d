// Seeded randomness, so that every randomized run can be reproduced from its seed, and the
// two shapes a randomized test checks what a subscriber received against.

/// A 64-bit linear congruential generator (Knuth's MMIX constants): reproducible runs.
struct LCG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

    mutating func next() -> UInt64 {
        self.state = self.state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return self.state ^ (self.state >> 29)
    }
}

// MARK: - What a random run may receive

/// Whether `values` are consecutive integers: an in-order run, nothing missed, nothing repeated.
func isConsecutive(_ values: [Int]) -> Bool {
    zip(values, values.dropFirst()).allSatisfy { $1 == $0 + 1 }
}

/// Whether `values` strictly increase.
func isStrictlyIncreasing(_ values: [Int]) -> Bool {
    zip(values, values.dropFirst()).allSatisfy { $1 > $0 }
}
