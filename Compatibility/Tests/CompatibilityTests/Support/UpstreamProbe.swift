import Synchronization

/// An upstream that can be iterated any number of times, as a shared sequence restarts it:
/// each iteration is a *run*, numbered from 1, that starts by producing `firstElement + run`
/// (its number, by default), then what the test sends to it, and whose start and end the test observes in ``log``.
///
/// A run is an `AsyncStream`, so its end is seen by its `onTermination`: cancelling the
/// task iterating it (what the library does when the last subscriber left) ends it at once.
final class UpstreamProbe: Sendable {
    enum Event: Sendable, Equatable, CustomStringConvertible {
        case started(run: Int)
        case ended(run: Int)

        var description: String {
            switch self {
            case .started(let run): "started(run: \(run))"
            case .ended(let run): "ended(run: \(run))"
            }
        }
    }

    /// The runs that started, and ended, in order.
    let log = EventLog<Event>()

    private struct Runs: Sendable {
        var started = 0
        var continuations: [Int: AsyncStream<Int>.Continuation] = [:]
    }

    private let runs = Mutex(Runs())
    private let firstElement: Int

    /// - Parameter firstElement: added to a run's number to make its first element, so that
    ///   two probes merged into one sequence can be told apart.
    init(firstElement: Int = 0) {
        self.firstElement = firstElement
    }

    /// How many runs started.
    var runCount: Int { self.runs.withLock { $0.started } }

    /// The sequence to share: each `makeAsyncIterator()` starts a run.
    var sequence: Sequence { Sequence(probe: self) }

    /// Sends `element` to run `run`: `true` if that run was still live and took it.
    @discardableResult
    func send(_ element: Int, toRun run: Int) -> Bool {
        guard let continuation = self.runs.withLock({ $0.continuations[run] }) else { return false }
        if case .enqueued = continuation.yield(element) { return true }
        return false
    }

    /// Ends run `run` as a finished upstream does.
    func finish(run: Int) {
        self.runs.withLock { $0.continuations[run] }?.finish()
    }

    fileprivate func startRun() -> AsyncStream<Int>.Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let run = self.runs.withLock { runs -> Int in
            runs.started += 1
            runs.continuations[runs.started] = continuation
            return runs.started
        }
        continuation.onTermination = { [log] _ in log.record(.ended(run: run)) }
        self.log.record(.started(run: run))
        continuation.yield(self.firstElement + run)
        return stream.makeAsyncIterator()
    }

    struct Sequence: AsyncSequence, Sendable {
        typealias Element = Int
        typealias Failure = Never

        let probe: UpstreamProbe

        func makeAsyncIterator() -> AsyncStream<Int>.Iterator {
            self.probe.startRun()
        }
    }
}
