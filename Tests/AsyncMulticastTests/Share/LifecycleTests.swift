// Releasing the sequence, its iterators and their tasks leaves no live objects: the storage,
// the elements (class-typed) and what the base captured are all freed, after the upstream
// ran, after cancellation and after the end.

import Testing

@testable import AsyncMulticast

/// Weak references filled in by a scenario and checked after it released everything; kept
/// under a lock, since the scenario's tasks write them.
private final class WeakRefs: Sendable {
    private struct Refs {
        weak var storage: AnyObject?
        weak var captured: AnyObject?
        weak var element: AnyObject?
    }
    private let refs = Lock(Refs())

    var storage: AnyObject? {
        get { self.refs.withLock { $0.storage } }
        set { self.refs.withLock { $0.storage = newValue } }
    }
    var captured: AnyObject? {
        get { self.refs.withLock { $0.captured } }
        set { self.refs.withLock { $0.captured = newValue } }
    }
    var element: AnyObject? {
        get { self.refs.withLock { $0.element } }
        set { self.refs.withLock { $0.element = newValue } }
    }

    /// Shares `base` (`.bounded(64)`, as `share()`) through a probe that stands for what the
    /// base captured, and watches the probe and the sequence's storage.
    func share<Base: AsyncSequence & Sendable>(
        _ base: Base, buffering policy: SharedBufferingPolicy = .bounded(64)
    ) -> AsyncShareSequence<Base.Element, Base.Failure> where Base.Element: Sendable {
        let probe = Probe()
        let shared = Instrumented(base, probe: probe).share(buffering: policy)
        self.storage = shared.storage
        self.captured = probe
        return shared
    }

    var allReleased: Bool { self.storage == nil && self.captured == nil && self.element == nil }
    var description: String {
        "storage: \(self.storage == nil ? "freed" : "alive"), captured by the base: "
            + "\(self.captured == nil ? "freed" : "alive"), element: \(self.element == nil ? "freed" : "alive")"
    }
}

@Suite("Lifecycle")
struct LifecycleTests {
    @Test func neverIteratedIsFreedAtOnce() {
        let refs = WeakRefs()
        do {
            let shared = refs.share(Counter())
            let iterator = shared.makeAsyncIterator()
            _ = iterator
        }
        #expect(refs.allReleased, "\(refs.description)")
    }

    @Test func freedAfterTheUpstreamRanAndSubscribersWereCancelled() async throws {
        let refs = WeakRefs()
        try await withTimeout {
            do {
                let (stream, upstream) = AsyncStream.makeStream(of: Payload.self)
                let shared = refs.share(stream)
                let a = SubscriberBox(shared.makeAsyncIterator())
                let b = SubscriberBox(shared.makeAsyncIterator())
                do {
                    let payload = Payload(0)
                    refs.element = payload
                    upstream.yield(payload)
                }
                #expect(await a.next()?.value == 0)  // b still has it buffered
                let aNext = a.startNext()
                let bNext = b.startNext()
                _ = await bNext.value  // b's buffered element
                let bWaiting = try await shared.startWaitingRead(of: b, waiting: 2)
                aNext.cancel()
                bWaiting.cancel()
                #expect(await aNext.value == nil)
                #expect(await bWaiting.value == nil)
                _ = upstream
            }
            // The upstream task ends asynchronously after its cancellation.
            try await waitUntil("everything to be freed: \(refs.description)") { refs.allReleased }
        }
    }

    @Test func freedAfterTheUpstreamRanAndIteratorsWereReleased() async throws {
        let refs = WeakRefs()
        try await withTimeout {
            do {
                let (stream, upstream) = AsyncStream.makeStream(of: Payload.self)
                let shared = refs.share(stream, buffering: .bufferingOldest(2))
                let reader = SubscriberBox(shared.makeAsyncIterator())
                var holder: SharedIterator? = shared.makeAsyncIterator()  // its buffer is frozen below
                for i in 0..<4 {
                    let payload = Payload(i)
                    if i == 0 { refs.element = payload }
                    let pending = try await shared.startWaitingRead(of: reader, waiting: 1)
                    upstream.yield(payload)
                    #expect(await pending.value?.value == i)
                }
                #expect(refs.element != nil, "the holder still has 0 and 1")
                holder = nil
                reader.release()
                _ = (upstream, holder)
            }
            try await waitUntil("everything to be freed: \(refs.description)") { refs.allReleased }
        }
    }

    @Test func freedAfterTheEnd() async throws {
        let refs = WeakRefs()
        try await withTimeout {
            do {
                let payloads = (0..<10).map(Payload.init)
                refs.element = payloads[0]
                let shared = refs.share(payloads.async, buffering: .bounded(3))
                let counts = await shared.iterateTogether(3) { iterator in
                    var count = 0
                    while await iterator.next() != nil { count += 1 }
                    return count
                }
                for count in counts { #expect(count == 10) }
            }
            try await waitUntil("everything to be freed: \(refs.description)") { refs.allReleased }
        }
    }

    @Test func bufferedElementsAreReleasedWhenTheirLastReaderLeaves() async throws {
        let refs = WeakRefs()
        try await withTimeout {
            let (stream, upstream) = AsyncStream.makeStream(of: Payload.self)
            let shared = stream.share(buffering: .unbounded)
            let reader = SubscriberBox(shared.makeAsyncIterator())
            var holder: SharedIterator? = shared.makeAsyncIterator()
            do {
                let payload = Payload(0)
                refs.element = payload
                upstream.yield(payload)
            }
            #expect(await reader.next()?.value == 0)
            #expect(refs.element != nil, "the holder has it buffered")
            holder = nil
            // The sequence and the upstream are still alive; only the buffer let go of it.
            try await waitUntil("the element to be freed") { refs.element == nil }
            #expect(shared.subscriberCount == 1)
            _ = holder
        }
    }
}
