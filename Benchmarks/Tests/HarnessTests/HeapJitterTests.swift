// compare's `--heap-jitter N` (Benchmarks/Tools/against.py passes a new N every round): one N is
// one layout, and different N give different layouts.

import MulticastScenarios
import Testing

@Suite("Heap jitter")
struct HeapJitterTests {
    @Test("a seed gives 1 to 16 blocks of 16 to 512 bytes, each a multiple of 16, mostly small ones")
    func sizesStayInRange() {
        var small = 0
        var all = 0
        for seed in UInt64(0)..<200 {
            let sizes = HeapJitter.blockSizes(seed: seed)
            #expect((1...16).contains(sizes.count), "seed \(seed): \(sizes.count) blocks")
            for size in sizes {
                #expect((16...512).contains(size) && size % 16 == 0, "seed \(seed): a block of \(size) bytes")
            }
            small += sizes.filter { $0 <= 128 }.count
            all += sizes.count
        }
        // Three in four are drawn from 16...128 bytes, and some of the others land there too.
        #expect(Double(small) / Double(all) > 0.7, "\(small) of \(all) blocks of 128 bytes or less")
    }

    @Test("one seed gives one layout; different seeds give different ones")
    func seedsAreRepeatableAndVaried() {
        #expect(HeapJitter.blockSizes(seed: 42) == HeapJitter.blockSizes(seed: 42))
        let layouts = Set((UInt64(0)..<50).map { HeapJitter.blockSizes(seed: $0) })
        // 50 seeds over 16 counts and 8 or 32 sizes per block: nearly all differ.
        #expect(layouts.count >= 45, "only \(layouts.count) different layouts from 50 seeds")
        let counts = Set((UInt64(0)..<50).map { HeapJitter.blockSizes(seed: $0).count })
        #expect(counts.count >= 10, "block counts seen: \(counts.sorted())")
    }

    @Test("the blocks are allocated with the sizes the seed gives, and freed")
    func allocatesTheBlocks() {
        let blocks = HeapJitter.allocate(seed: 7)
        #expect(blocks.count == HeapJitter.blockSizes(seed: 7).count)
        #expect(Set(blocks).count == blocks.count, "every block is a separate allocation")
        HeapJitter.free(blocks)
    }
}
