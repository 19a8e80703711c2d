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
    var counted: Counted { Counted(base: self.stream, counter: self.counter) }
    var countedPulls: Int { self.counter.withLock { $0 } }

    /// The stream itself, its iterators counted (`iteratorCount`) and each `next()` it enters
    /// sent on `entered`.
    var idle: Idle { Idle(held: self) }
    let entered = Signal<Void>()
    fileprivate let iterators = Lock(0)
    var iteratorCount: Int { self.iterators.withLock { $0 } }

    struct Idle: AsyncSequence, Sendable {
        typealias Element = Int
        typealias Failure = Never
        let held: HeldStream

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncStream<Int>.Iterator
            let entered: Signal<Void>

            mutating func next() async -> Int? {
                self.entered.send(())
                return await self.base.next()
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            self.held.iterators.withLock { $0 += 1 }
            return AsyncIterator(base: self.held.stream.makeAsyncIterator(), entered: self.held.entered)
        }
    }
}

struct Counted: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never
    let base: AsyncStream<Int>
    let counter: Lock<Int>

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Element = Int
        typealias Failure = Never
        var base: AsyncStream<Int>.Iterator
        let counter: Lock<Int>
        mutating func next(isolation actor: isolated (any Actor)?) async -> Int? {
            self.counter.withLock { $0 += 1 }
            return await self.base.next(isolation: actor)
        }
        mutating func next() async -> Int? { await self.next(isolation: nil) }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.base.makeAsyncIterator(), counter: self.counter)
    }
}
