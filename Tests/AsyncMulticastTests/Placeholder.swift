import Testing
@testable import AsyncMulticast

@Test func smokeTwoSubscribers() async throws {
    let (stream, cont) = AsyncStream.makeStream(of: Int.self)
    let shared = stream.share()
    var a = shared.makeAsyncIterator()
    var b = shared.makeAsyncIterator()
    #expect(shared.subscriberCount == 2)
    for i in 0..<5 { cont.yield(i) }
    cont.finish()
    var ra: [Int] = []
    while let x = await a.next() { ra.append(x) }
    var rb: [Int] = []
    while let x = await b.next() { rb.append(x) }
    #expect(ra == [0,1,2,3,4])
    #expect(rb == [0,1,2,3,4])
    #expect(shared.subscriberCount == 0)
}

@Test func smokeFanOut() async throws {
    let shared = (0..<10_000).async.share()
    await withTaskGroup(of: [Int].self) { group in
        for _ in 0..<16 {
            var it = shared.makeAsyncIterator()
            group.addTask {
                var r: [Int] = []
                while let x = await it.next() { r.append(x) }
                return r
            }
        }
        for await r in group { #expect(r == Array(0..<10_000)) }
    }
}

@Test func smokeCancelTermination() async throws {
    let terminated = AsyncStream.makeStream(of: String.self)
    let (stream, cont) = AsyncStream.makeStream(of: Int.self)
    cont.onTermination = { t in terminated.continuation.yield("\(t)") }
    let shared = stream.share()
    let started = AsyncStream.makeStream(of: Void.self)
    let task = Task {
        var it = shared.makeAsyncIterator()
        started.continuation.yield()
        return await it.next()
    }
    var s = started.stream.makeAsyncIterator(); await s.next()
    try await Task.sleep(for: .milliseconds(20))
    task.cancel()
    #expect(await task.value == nil)
    var t = terminated.stream.makeAsyncIterator()
    #expect(await t.next() == "cancelled")
}

struct AsyncSeqOf<S: Sequence & Sendable>: AsyncSequence, Sendable where S.Element: Sendable {
    typealias Element = S.Element
    let base: S
    struct AsyncIterator: AsyncIteratorProtocol { var it: S.Iterator; mutating func next() async -> S.Element? { it.next() } }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(it: base.makeIterator()) }
}
extension Sequence where Self: Sendable, Element: Sendable { var async: AsyncSeqOf<Self> { AsyncSeqOf(base: self) } }
