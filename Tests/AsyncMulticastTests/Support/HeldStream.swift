// The held `AsyncStream` of the `send(contentsOf:)` tests: the test keeps the stream, so its
// `onTermination` reports `.cancelled` only if a cancelled `next()` reached it. It is read
// through a wrapper that counts its pulls (`sequence`, `counted`) or that also tells when a
// pull begins (`idle`, for a sequence that stays idle until the test feeds it).

@testable import AsyncMulticast

/// An `AsyncStream` the test holds (so only a cancelled `next()` can call its `onTermination`
/// with `.cancelled`), prefilled with `values`, its pulls counted by a `Probe`.
final class HeldStream: Sendable {
    let stream: AsyncStream<Int>
    let input: AsyncStream<Int>.Continuation
    let ends = TerminationRecorder()
    let probe = Probe()

    init<S: Sequence<Int>>(prefilled values: S) {
        (self.stream, self.input) = AsyncStream.makeStream(of: Int.self)
        self.ends.attach(to: self.input)
        for value in values { self.input.yield(value) }
    }

    /// A stream with nothing in it yet.
    convenience init() { self.init(prefilled: [Int]()) }

    var sequence: Instrumented<AsyncStream<Int>> { Instrumented(self.stream, probe: self.probe) }

    /// The stream itself, its pulls counted before each `next()` and nothing done after it
    /// returns (unlike `Instrumented`, which records the pull's end inside the same call, so
    /// that a cancellation arriving then reaches the wrapper but not the stream).
    let counter = Lock(0)
    var counted: HookedStream {
        HookedStream(self.stream, willPull: { [counter] in counter.withLock { $0 += 1 } })
    }
    var countedPulls: Int { self.counter.withLock { $0 } }

    /// The stream itself, its iterators counted (`iteratorCount`) and each `next()` it enters
    /// sent on `entered`.
    var idle: HookedStream {
        HookedStream(
            self.stream, willPull: { [entered] in entered.send(()) },
            madeIterator: { [iterators] in iterators.withLock { $0 += 1 } })
    }
    let entered = Signal<Void>()
    private let iterators = Lock(0)
    var iteratorCount: Int { self.iterators.withLock { $0 } }
}

/// An `AsyncStream<Int>` read through hooks: `willPull` as each `next()` begins, `pulled`
/// with each element a `next()` returned (the moment the upstream produced it, for a shared
/// sequence that pulls it), `madeIterator` as each iteration begins.
struct HookedStream: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let base: AsyncStream<Int>
    let willPull: @Sendable () -> Void
    let pulled: @Sendable (Int) -> Void
    let madeIterator: @Sendable () -> Void

    init(
        _ base: AsyncStream<Int>, willPull: @escaping @Sendable () -> Void = {},
        pulled: @escaping @Sendable (Int) -> Void = { _ in }, madeIterator: @escaping @Sendable () -> Void = {}
    ) {
        self.base = base
        self.willPull = willPull
        self.pulled = pulled
        self.madeIterator = madeIterator
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        var base: AsyncStream<Int>.Iterator
        let willPull: @Sendable () -> Void
        let pulled: @Sendable (Int) -> Void

        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            self.willPull()
            let element = await self.base.next(isolation: actor)
            if let element { self.pulled(element) }
            return element
        }
        mutating func next() async -> Int? { await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator {
        self.madeIterator()
        return AsyncIterator(base: self.base.makeAsyncIterator(), willPull: self.willPull, pulled: self.pulled)
    }
}
