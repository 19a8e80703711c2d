import AsyncMulticast
import OpenCombine
import Synchronization

/// A shared sequence seen as an OpenCombine publisher: each Combine subscriber is one
/// subscriber of the shared sequence, joined when it subscribes (as a `sink` has subscribed
/// when it returns) and leaving when it cancels, so the last `AnyCancellable` cancelled stops
/// a `share()`'s upstream as the last `for await` loop leaving does.
///
/// Values are delivered in a task of the subscription's own, never more than the subscriber
/// demanded: without demand the shared subscriber holds one value and stops reading, and its
/// buffering policy decides what waits for it. A completion needs no demand.
///
/// ```swift
/// let cancellable = sharedPrices.publisher().sink { price in ticker.show(price) }
/// ```
public struct SharedSequencePublisher<Base: AsyncSubscribableSequence>: Publisher {
    public typealias Output = Base.Element
    public typealias Failure = Base.Failure

    let base: Base

    public func receive<Downstream: Subscriber>(subscriber: Downstream)
    where Downstream.Input == Output, Downstream.Failure == Failure {
        let subscription = Inner(base: self.base, downstream: AnySubscriber(subscriber))
        subscriber.receive(subscription: subscription)
    }
}

extension AsyncSubscribableSequence {
    /// This shared sequence as an OpenCombine publisher; see ``SharedSequencePublisher``.
    public func publisher() -> SharedSequencePublisher<Self> {
        SharedSequencePublisher(base: self)
    }
}

extension SharedSequencePublisher {
    /// One Combine subscriber's subscription: owns the shared iterator (the library's
    /// subscriber) in a task that reads one value ahead of the demand.
    ///
    /// It holds the subscriber erased (`AnySubscriber`): a generic subscriber type would be
    /// captured by the task, and its metatype is not `Sendable`.
    final class Inner: Subscription, Sendable {
        typealias Downstream = AnySubscriber<Output, Failure>

        private struct State {
            var demand = Subscribers.Demand.none
            var cancelled = false
            /// The reading task, waiting for demand.
            var waiter: CheckedContinuation<Bool, Never>?
        }

        // `Subscribers.Demand` predates `Sendable`; it is a plain value.
        private let state = Mutex(UncheckedSendable(State()))
        private let task = Mutex<Task<Void, Never>?>(nil)

        /// Joins `base` now, so that the Combine subscriber receives what is produced from the
        /// moment it subscribed, although the reading task starts later.
        init(base: Base, downstream: Downstream) {
            let iterator = base.makeAsyncIterator()
            // The task calls the subscriber, one call at a time, from whatever thread it runs
            // on, as Combine allows (see `UncheckedSendable`).
            let downstream = UncheckedSendable(downstream)
            let reading = Task {
                var iterator = iterator
                await self.deliver(from: &iterator, to: downstream.value)
            }
            self.task.withLock { $0 = reading }
        }

        func request(_ demand: Subscribers.Demand) {
            self.add(demand)
        }

        /// Ends the Combine subscription: the reading task is cancelled, so the shared
        /// subscriber leaves at once, and nothing more reaches the Combine subscriber.
        func cancel() {
            let waiter = self.state.withLock { box -> CheckedContinuation<Bool, Never>? in
                box.value.cancelled = true
                defer { box.value.waiter = nil }
                return box.value.waiter
            }
            waiter?.resume(returning: false)
            self.task.withLock { $0 }?.cancel()
        }

        private func add(_ demand: Subscribers.Demand) {
            let waiter = self.state.withLock { box -> CheckedContinuation<Bool, Never>? in
                guard !box.value.cancelled else { return nil }
                box.value.demand += demand
                guard box.value.demand > .none, let waiter = box.value.waiter else { return nil }
                box.value.demand -= 1
                box.value.waiter = nil
                return waiter
            }
            waiter?.resume(returning: true)
        }

        /// Takes one unit of demand, waiting for it: `false` once cancelled.
        private func takeDemand() async -> Bool {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let now = self.state.withLock { box -> Bool? in
                        if box.value.cancelled { return false }
                        guard box.value.demand > .none else {
                            box.value.waiter = continuation
                            return nil
                        }
                        box.value.demand -= 1
                        return true
                    }
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                self.cancel()
            }
        }

        private var isCancelled: Bool { self.state.withLock { $0.value.cancelled } }

        /// Reads one value ahead of the demand, not more: Combine delivers a completion
        /// without demand, so the end must be seen while the subscriber asks for nothing.
        private func deliver(from iterator: inout SharedIterator<Output, Failure>, to downstream: Downstream) async {
            do throws(Failure) {
                while true {
                    // `nil` after a cancel is the shared subscriber leaving, not the end.
                    guard let element = try await iterator.next(isolation: nil) else {
                        if !self.isCancelled { downstream.receive(completion: .finished) }
                        return
                    }
                    guard await self.takeDemand(), !self.isCancelled else { return }
                    self.add(downstream.receive(element))
                }
            } catch {
                if !self.isCancelled { downstream.receive(completion: .failure(error)) }
            }
        }
    }
}
