// Overload check with BOTH AsyncAlgorithms and AsyncMulticast imported, as an
// app using both would have them:
//   x.share()                          -> AsyncMulticast (checked statically)
//   x.share(buffering: .unbounded)     -> AsyncMulticast (checked statically)
//   x.share(bufferingPolicy: .unbounded) still compiles -> swift-async-algorithms
// If AsyncMulticast's share() became ambiguous with SAA's share(bufferingPolicy:)
// (whose argument has a default), this file stops compiling.

import AsyncAlgorithms
import AsyncMulticast
import Testing

/// Compiles only if `value` has exactly the type `type`.
func expectType<T>(_ value: T, _ type: T.Type) {}

/// A Sendable AsyncSequence of our own, with `Failure == Never`.
struct Numbers: AsyncSequence, Sendable {
    typealias Element = Int
    typealias Failure = Never

    struct AsyncIterator: AsyncIteratorProtocol {
        var current = 0
        mutating func next() async -> Int? {
            defer { current += 1 }
            return current < 3 ? current : nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator() }
}

@Test func shareWithoutArgumentsPicksAsyncMulticast() {
    let numbers = Numbers()
    let shared = numbers.share()
    expectType(shared, AsyncMulticast.AsyncShareSequence<Int, Never>.self)

    let stream = AsyncStream<Int> { $0.finish() }
    let sharedStream = stream.share()
    expectType(sharedStream, AsyncMulticast.AsyncShareSequence<Int, Never>.self)

    // An AsyncAlgorithms sequence shared with the bare call is still ours.
    let synced = [1, 2, 3].async
    let sharedSynced = synced.share()
    expectType(sharedSynced, AsyncMulticast.AsyncShareSequence<Int, Never>.self)
}

@Test func shareBufferingPicksAsyncMulticast() {
    let numbers = Numbers()
    let unbounded = numbers.share(buffering: .unbounded)
    expectType(unbounded, AsyncMulticast.AsyncShareSequence<Int, Never>.self)
    let bounded = numbers.share(buffering: .bounded(8))
    expectType(bounded, AsyncMulticast.AsyncShareSequence<Int, Never>.self)
    let newest = numbers.share(buffering: .bufferingNewest(8))
    expectType(newest, AsyncMulticast.AsyncShareSequence<Int, Never>.self)
}

@Test func shareBufferingPolicyPicksAsyncAlgorithms() {
    let numbers = Numbers()
    let saa = numbers.share(bufferingPolicy: .unbounded)
    // SAA returns `some AsyncSequence<Element, Failure> & Sendable`, backed by its
    // internal AsyncAlgorithms.AsyncShareSequence: the type cannot be named, so
    // check the dynamic type's module.
    let typeName = String(reflecting: type(of: saa))
    #expect(typeName.hasPrefix("AsyncAlgorithms."), "\(typeName)")
    #expect(!typeName.hasPrefix("AsyncMulticast."), "\(typeName)")

    let saaBounded = numbers.share(bufferingPolicy: .bounded(4))
    #expect(String(reflecting: type(of: saaBounded)).hasPrefix("AsyncAlgorithms."))
}

@Test func bothSharesDeliver() async {
    let ours = Numbers().share()
    var oursIterator = ours.makeAsyncIterator()
    var oursValues: [Int] = []
    while let value = await oursIterator.next() { oursValues.append(value) }
    #expect(oursValues == [0, 1, 2])

    let saa = Numbers().share(bufferingPolicy: .unbounded)
    var saaIterator = saa.makeAsyncIterator()
    var saaValues: [Int] = []
    while let value = await saaIterator.next(isolation: #isolation) { saaValues.append(value) }
    #expect(saaValues == [0, 1, 2])
}

/// Like `Numbers`, but not `Sendable` (a struct of this module would otherwise be `Sendable`
/// implicitly): AsyncMulticast's operators do not apply to it.
struct NonSendableNumbers: AsyncSequence {
    typealias Element = Int
    typealias Failure = Never
    var limit = 3

    struct AsyncIterator: AsyncIteratorProtocol {
        var current = 0
        let limit: Int
        mutating func next() async -> Int? {
            defer { current += 1 }
            return current < limit ? current : nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(limit: limit) }
}

@available(*, unavailable)
extension NonSendableNumbers: Sendable {}

/// The trap the Share guide describes ("A base that is not `Sendable` gets
/// swift-async-algorithms' `share()`, silently"), and the way out it gives.
@Test func nonSendableBaseSilentlyPicksAsyncAlgorithms() {
    let shared = NonSendableNumbers().share()
    let typeName = String(reflecting: type(of: shared))
    #expect(typeName.hasPrefix("AsyncAlgorithms."), "\(typeName)")

    // Naming the type makes the compiler pick AsyncMulticast's (or fail, for a base that is
    // not Sendable: `let wrong: AsyncShareSequence = NonSendableNumbers().share()` does not
    // compile).
    let named: AsyncShareSequence = Numbers().share()
    expectType(named, AsyncMulticast.AsyncShareSequence<Int, Never>.self)
}
