// Test helpers for the issue-3 suites (replay, multicast, keepAlive, subjects, shared source,
// seed scenarios). Every name starts with `I3` so it cannot clash with other test files.
//
// Ordering is established with explicit gates (AsyncStream-based signals, or polling with
// `Task.yield()`); timeouts exist only as hang guards (see HangGuards.swift).

import Testing
@testable import AsyncMulticast

// MARK: - A subscriber driven step by step

/// One subscriber (one `SharedIterator`) owned by its own task and driven by commands, so a
/// test can read it one element at a time under a hang guard, leave it, or cancel its task.
///
/// The iterator is created inside the task; ``join(_:sourceLocation:)`` returns once it is.
final class I3Subscriber<Element: Sendable, Failure: Error>: Sendable {
    private enum Command: Sendable {
        case next
        case leave
    }

    private let commands: AsyncStream<Command>.Continuation
    private let results: Signal<Result<Element?, Failure>>
    let task: Task<Void, Never>

    private init(
        make: @escaping @Sendable () -> SharedIterator<Element, Failure>,
        joined: Signal<Void>
    ) {
        let (commandStream, commands) = AsyncStream.makeStream(of: Command.self)
        let results = Signal<Result<Element?, Failure>>()
        self.commands = commands
        self.results = results
        self.task = Task {
            var iterator: SharedIterator<Element, Failure>? = make()
            joined.send(())
            for await command in commandStream {
                switch command {
                case .next:
                    let result: Result<Element?, Failure>
                    do throws(Failure) {
                        result = .success(try await iterator!.next())
                    } catch {
                        result = .failure(error)
                    }
                    results.send(result)
                case .leave:
                    iterator = nil  // releasing the iterator leaves
                    return
                }
            }
            iterator = nil
        }
    }

    /// Creates the subscriber (calls `make` in its task) and waits until it has joined.
    static func join(
        _ make: @escaping @Sendable () -> SharedIterator<Element, Failure>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> I3Subscriber {
        let joined = Signal<Void>()
        let subscriber = I3Subscriber(make: make, joined: joined)
        _ = await joined.next("subscriber joining", sourceLocation: sourceLocation)
        return subscriber
    }

    /// Asks for the next element without waiting for it (see ``response(sourceLocation:)``).
    func request() {
        self.commands.yield(.next)
    }

    /// The result of the oldest unanswered ``request()``; `nil` on a hang.
    func response(sourceLocation: SourceLocation = #_sourceLocation) async -> Result<Element?, Failure>? {
        await self.results.next("subscriber's next()", sourceLocation: sourceLocation)
    }

    /// `next()`, under a hang guard; an error is recorded as an issue and returned as `nil`.
    func next(sourceLocation: SourceLocation = #_sourceLocation) async -> Element? {
        self.request()
        return await self.answer(sourceLocation: sourceLocation)
    }

    /// The answer to an earlier ``request()`` as an element; an error is recorded.
    func answer(sourceLocation: SourceLocation = #_sourceLocation) async -> Element? {
        switch await self.response(sourceLocation: sourceLocation) {
        case .success(let element)?:
            return element
        case .failure(let error)?:
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
            return nil
        case nil:
            return nil
        }
    }

    /// The next `count` elements (fewer if the sequence ends first).
    func take(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> [Element] {
        var elements: [Element] = []
        while elements.count < count, let element = await self.next(sourceLocation: sourceLocation) {
            elements.append(element)
        }
        return elements
    }

    /// Reads until the end: the elements, then the error if the sequence failed.
    func drain(sourceLocation: SourceLocation = #_sourceLocation) async -> (elements: [Element], failure: Failure?) {
        var elements: [Element] = []
        while true {
            self.request()
            switch await self.response(sourceLocation: sourceLocation) {
            case .success(let element?)?:
                elements.append(element)
            case .success(nil)?, nil:
                return (elements, nil)
            case .failure(let error)?:
                return (elements, error)
            }
        }
    }

    /// Releases the iterator (leaves) and waits until the task ended.
    func leave(sourceLocation: SourceLocation = #_sourceLocation) async {
        self.commands.yield(.leave)
        await self.waitForTheEnd("subscriber leaving", sourceLocation: sourceLocation)
    }

    /// Cancels the subscriber's task and waits until it ended.
    func cancel(sourceLocation: SourceLocation = #_sourceLocation) async {
        self.task.cancel()
        await self.waitForTheEnd("cancelled subscriber", sourceLocation: sourceLocation)
    }

    /// Waits until the subscriber's task ended; cancels it if that takes a hang guard's time.
    private func waitForTheEnd(_ what: String, sourceLocation: SourceLocation) async {
        let task = self.task
        if await withTimeoutOrNil(what, sourceLocation: sourceLocation, { await task.value }) == nil {
            task.cancel()
        }
    }
}

// MARK: - Base sequences

/// How an iteration of an ``FedSource`` ended, as reported by its `AsyncStream`'s `onTermination`.
extension I3Subscriber where Element == Int {
    /// For the first subscriber of a sequence over `source`: asks for an element (that demand
    /// starts iteration 0), waits for the start, feeds `values` to it and returns the answer
    /// to the demand.
    func startIteration(
        of source: FedSource, yielding values: Int..., sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Int? {
        self.request()
        await source.control.waitForStart(of: 0, sourceLocation: sourceLocation)
        for value in values { source.control.yield(value) }
        return await self.answer(sourceLocation: sourceLocation)
    }
}
