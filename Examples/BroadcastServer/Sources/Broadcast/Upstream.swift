import AsyncMulticast

/// Counts 1, 2, 3, … one count per `interval`, afresh for every iteration. The first count
/// comes at once. It stops when the iterating task is cancelled, which is how a shared
/// service stops its upstream: when the last subscriber leaves (`.whileSubscribed()`), and
/// when its `run()` is cancelled (graceful shutdown).
public struct Ticker: AsyncSequence, Sendable {
    public let interval: Duration

    public init(interval: Duration) {
        self.interval = interval
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(interval: self.interval)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let interval: Duration
        var count = 0

        public mutating func next() async -> Int? {
            if self.count > 0 {
                do {
                    try await Task.sleep(for: self.interval)
                } catch {
                    return nil  // cancelled: the last subscriber left, or the server shuts down
                }
            }
            if Task.isCancelled { return nil }
            self.count += 1
            return self.count
        }
    }
}

/// What the upstream did so far: how many iterations started, and whether one runs now.
public struct UpstreamState: Sendable, Hashable, Codable {
    public var starts: Int
    public var running: Bool

    public init(starts: Int = 0, running: Bool = false) {
        self.starts = starts
        self.running = running
    }
}

/// Makes an upstream observable: every `makeAsyncIterator()` is a start, and the iteration's
/// end (its `nil`, or its iterator being released) is a stop. `states` holds the current
/// ``UpstreamState`` and broadcasts each change.
public struct MonitoredUpstream<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Sendable {
    public typealias Element = Base.Element
    public typealias Failure = Base.Failure

    let base: Base
    let states: AsyncCurrentValueSubject<UpstreamState, Never>

    public func makeAsyncIterator() -> Iterator {
        self.states.update { UpstreamState(starts: $0.starts + 1, running: true) }
        return Iterator(base: self.base.makeAsyncIterator(), run: Run(states: self.states))
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let run: Run

        public mutating func next(
            isolation actor: isolated (any Actor)? = #isolation
        ) async throws(Base.Failure) -> Element? {
            guard let element = try await self.base.next(isolation: actor) else {
                self.run.stop()
                return nil
            }
            return element
        }
    }

    /// One iteration: it stops once, at its end or when its iterator is released.
    final class Run: Sendable {
        let states: AsyncCurrentValueSubject<UpstreamState, Never>
        let stopped = Flag()

        init(states: AsyncCurrentValueSubject<UpstreamState, Never>) {
            self.states = states
        }

        func stop() {
            guard self.stopped.set() else { return }
            self.states.update { UpstreamState(starts: $0.starts, running: false) }
        }

        deinit {
            self.stop()
        }
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// This sequence, reporting its starts and stops to `states`.
    public func monitored(by states: AsyncCurrentValueSubject<UpstreamState, Never>) -> MonitoredUpstream<Self> {
        MonitoredUpstream(base: self, states: states)
    }
}
