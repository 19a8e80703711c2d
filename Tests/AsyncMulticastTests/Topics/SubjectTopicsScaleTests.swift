// AsyncSubjectTopics with many keys: 100,000 live keys with one subscriber each are created,
// each reached by its own element only, and all freed; and what one key costs in memory,
// measured as the growth of the process's resident memory and printed (the figure the guide
// quotes: about 1.5 KB per idle key in a debug build, of which the subject's engine is about
// 0.9 KB, the listener of its count 0.26 KB, its table entry 0.15 KB).
// Serialized with the heavy tests: it allocates a few hundred megabytes in a debug build.

import Testing

@testable import AsyncMulticast

#if canImport(Glibc)
    import Glibc
#endif

extension HeavyAndTimingSensitive {
    @Suite("AsyncSubjectTopics at scale")
    struct SubjectTopicsScaleTests {
        static let keys = 100_000

        @Test("100,000 keys with one subscriber each: each gets its own element; all are freed")
        func hundredThousandKeys() async throws {
            let topics = AsyncSubjectTopics<Int, Int, Never>()
            var subscriptions: [SharedSubscription<Int, Never>] = []
            subscriptions.reserveCapacity(Self.keys)
            for key in 0..<Self.keys {
                subscriptions.append(topics.subscribe(to: key))
                if key % 4096 == 0 { await Task.yield() }
            }
            #expect(topics.keyCount == Self.keys)
            // Every shard holds some: the keys are spread.
            #expect(topics.shards.allSatisfy { $0.withLock { $0.entries.count } > Self.keys / 32 })
            for key in 0..<Self.keys { topics.send(key, to: key) }
            var misrouted = 0
            for (key, subscription) in subscriptions.enumerated() where subscription.backlog?.count != 1 {
                misrouted += 1
                _ = key
            }
            #expect(misrouted == 0, "each key's subscriber holds exactly its own element")
            var first = subscriptions[77].makeAsyncIterator()
            #expect(await first.next() == 77)
            _ = consume first
            subscriptions.removeAll()
            #expect(topics.keyCount == 0, "every subscriber left: every key is freed")
        }

        #if canImport(Glibc)
            /// The process's resident memory, in bytes (`/proc/self/statm`): pages the
            /// allocator took from the system, which grow with what is allocated.
            static func allocatedBytes() -> Int {
                guard let file = fopen("/proc/self/statm", "r") else { return 0 }
                defer { fclose(file) }
                var size = 0
                var resident = 0
                guard readStatm(file, &size, &resident) else { return 0 }
                return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
            }

            static func readStatm(_ file: UnsafeMutablePointer<FILE>, _ size: inout Int, _ resident: inout Int) -> Bool
            {
                var buffer = [CChar](repeating: 0, count: 256)
                guard fgets(&buffer, 256, file) != nil else { return false }
                let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                let fields = line.split(separator: " ").compactMap { Int($0) }
                guard fields.count >= 2 else { return false }
                (size, resident) = (fields[0], fields[1])
                return true
            }

            /// Measures the resident growth per key and prints it as `live idle`. Run in a
            /// child process of its own (an exit test), whose heap holds nothing freed by
            /// other tests that the keys could reuse without the process growing.
            static func measureMemoryPerKey() {
                let count = 30_000
                let live = AsyncSubjectTopics<Int, Int, Never>()
                let idle = AsyncSubjectTopics<Int, Int, Never>(keepAlive: .seconds(Int64.max))
                var subscriptions: [SharedSubscription<Int, Never>] = []
                subscriptions.reserveCapacity(count)
                // The array is allocated first; the shards' tables grow during the
                // measurement, as they do in a server.
                let beforeLive = Self.allocatedBytes()
                for key in 0..<count { subscriptions.append(live.subscribe(to: key)) }
                let perLiveKey = (Self.allocatedBytes() - beforeLive) / count
                let beforeIdle = Self.allocatedBytes()
                for key in 0..<count { _ = idle.subscribe(to: key) }  // released at once: idle
                let perIdleKey = (Self.allocatedBytes() - beforeIdle) / count
                guard live.keyCount == count, idle.keyCount == count else { exit(2) }
                Swift.print("\(perLiveKey) \(perIdleKey)")
                fflush(nil)
                exit(0)
            }

            @Test("memory per key: with one subscriber, and idle (kept with no subscriber)")
            func memoryPerKey() async throws {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    SubjectTopicsScaleTests.measureMemoryPerKey()
                }
                let output = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                let figures = output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
                try #require(figures.count == 2, "output: \(output)")
                let (perLiveKey, perIdleKey) = (figures[0], figures[1])
                Swift.print(
                    "AsyncSubjectTopics memory: \(perLiveKey) bytes per key with one subscriber, "
                        + "\(perIdleKey) bytes per idle key")
                // Generous bounds (a sanitizer's shadow memory counts too): a regression that
                // multiplies the cost fails, noise does not.
                #expect(perIdleKey > 0 && perIdleKey < 16_384)
                #expect(perLiveKey >= perIdleKey && perLiveKey < 32_768)
            }
        #endif
    }
}
