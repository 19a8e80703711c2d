// How an upstream iteration feeds the storage: the sink it produces into, and the body that
// pulls a base sequence through it.

extension MulticastStorage {
    /// Where one upstream iteration (identified by `epoch`) delivers what it produces.
    @usableFromInline
    struct UpstreamSink: Sendable {
        @usableFromInline
        let storage: MulticastStorage
        @usableFromInline
        let epoch: UInt64

        @inlinable
        init(storage: MulticastStorage, epoch: UInt64) {
            self.storage = storage
            self.epoch = epoch
        }

        /// Delivers an element: `.proceed` to pull the next one, `.stop` when the iteration
        /// must stop, `.park` when a bounded subscriber is full (then call ``waitForRoom()``).
        ///
        /// Synchronous on purpose: the common case is one lock acquisition, and the upstream
        /// loop pays no async frame or executor check per element; only parking suspends.
        @inlinable
        @inline(__always)
        func yield(_ element: Element) -> Machine.ProduceOutcome {
            self.storage.offer(element, epoch: self.epoch, respectingBounds: true)
        }

        /// Waits after ``yield(_:)`` answered `.park`: `true` once there is room again,
        /// `false` when the iteration must stop.
        @inlinable
        func waitForRoom() async -> Bool {
            await self.storage.waitForRoom(epoch: self.epoch)
        }

        /// Ends the iteration: `nil` when the upstream finished, else its error.
        @inlinable
        func finish(failure: Failure?) {
            self.storage.finish(epoch: self.epoch, failure: failure)
        }
    }

    /// The upstream body that iterates `base`: one `makeAsyncIterator()` per iteration,
    /// pulled for as long as the policies allow, stopped by cancellation.
    @inlinable
    static func pulling<Base: AsyncSequence & Sendable>(_ base: Base) -> UpstreamBody
    where Base.Element == Element, Base.Failure == Failure {
        { sink in
            var iterator = base.makeAsyncIterator()
            do throws(Failure) {
                while let element = try await iterator.next(isolation: nil) {
                    switch sink.yield(element) {
                    case .proceed:
                        continue
                    case .stop:
                        // Stopped (the last subscriber left, or the connection was
                        // cancelled). If this task was already cancelled, the `next()` that
                        // just returned ran after the cancellation: the base has seen it,
                        // and a base that ignores it would only make the next iteration
                        // wait for one more element. Otherwise it has not seen it yet.
                        if Task.isCancelled { return }
                    case .park:
                        if await sink.waitForRoom() { continue }
                    // Stopped while parked by back-pressure: the base has not seen
                    // the cancellation, it was not asked for anything meanwhile.
                    }
                    // One more `next()` in this cancelled task lets the base observe the
                    // cancellation (an `AsyncStream` fires its `onTermination(.cancelled)`);
                    // whatever it returns is discarded.
                    _ = try? await iterator.next(isolation: nil)
                    return
                }
                sink.finish(failure: nil)
            } catch {
                sink.finish(failure: error)
            }
        }
    }
}
