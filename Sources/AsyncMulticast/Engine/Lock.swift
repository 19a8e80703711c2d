// The only file in the library that imports a platform module.
//
// Why two implementations: ThreadSanitizer on Linux does not model `Synchronization.Mutex`
// as synchronization (the standard library is not instrumented) and reports "Swift access
// race" on correctly locked code, in our tests and in the tests of every program that uses
// the library. So on Glibc/Musl the lock is our own: an atomic word, compiled into this
// module where the sanitizer sees its acquire and release, with a pthread mutex and
// condition variable (which the sanitizer also understands) to sleep on when it is
// contended. It is also cheaper than a pthread mutex when it is not contended: one
// compare-and-swap to lock and one exchange to unlock, where `pthread_mutex_lock` and
// `pthread_mutex_unlock` cost about 70 instructions per critical section. Elsewhere (Apple
// platforms) we use `Mutex`. Define ASYNC_MULTICAST_USE_MUTEX to compile the `Mutex` path
// on Linux too.

import Synchronization

#if canImport(Glibc) && !ASYNC_MULTICAST_USE_MUTEX
    import Glibc
#elseif canImport(Musl) && !ASYNC_MULTICAST_USE_MUTEX
    import Musl
#endif

#if (canImport(Glibc) || canImport(Musl)) && !ASYNC_MULTICAST_USE_MUTEX

    /// A mutual-exclusion lock that owns the state it protects.
    ///
    /// `State` is only reachable inside `withLock`, so every access is serialized by the lock.
    ///
    /// The lock word follows the classic three-state futex lock (U. Drepper, "Futexes Are
    /// Tricky", mutex #2): 0 unlocked, 1 locked, 2 locked and a thread may be asleep. The
    /// kernel's futex is not reachable from Swift (the `syscall` function is variadic), so a
    /// sleeping thread waits on `condition` instead, under `parking`; waking takes `parking`,
    /// so a wake-up cannot fall between a sleeper's last look at the word and its sleep.
    @usableFromInline
    final class Lock<State>: @unchecked Sendable {  // @unchecked: `state` is only touched while `word` is held.
        @usableFromInline let word = Atomic<UInt32>(0)
        /// Out of line rather than a stored `var`: the lock already guarantees exclusive
        /// access, and a class property would pay for a dynamic exclusivity check per access.
        @usableFromInline let state: UnsafeMutablePointer<State>
        /// Only for sleeping and waking: the lock is `word`.
        @usableFromInline let parking: UnsafeMutablePointer<pthread_mutex_t>
        @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>

        @usableFromInline
        init(_ initialState: State) {
            self.state = UnsafeMutablePointer<State>.allocate(capacity: 1)
            self.state.initialize(to: initialState)
            self.parking = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            self.parking.initialize(to: pthread_mutex_t())
            self.condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            self.condition.initialize(to: pthread_cond_t())
            let mutexResult = pthread_mutex_init(self.parking, nil)
            precondition(mutexResult == 0, "pthread_mutex_init failed with \(mutexResult)")
            let conditionResult = pthread_cond_init(self.condition, nil)
            precondition(conditionResult == 0, "pthread_cond_init failed with \(conditionResult)")
        }

        deinit {
            pthread_cond_destroy(self.condition)
            pthread_mutex_destroy(self.parking)
            self.condition.deinitialize(count: 1)
            self.condition.deallocate()
            self.parking.deinitialize(count: 1)
            self.parking.deallocate()
            self.state.deinitialize(count: 1)
            self.state.deallocate()
        }

        @inlinable
        func withLock<Result, Failure: Error>(
            _ body: (inout State) throws(Failure) -> Result
        ) throws(Failure) -> Result {
            if !self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
                self.lockContended()
            }
            defer {
                #if ASYNC_MULTICAST_INVARIANTS
                    (self.state.pointee as? any InvariantChecking)?.checkInvariants()
                #endif
                if self.word.exchange(0, ordering: .releasing) == 2 {
                    self.wakeOne()
                }
            }
            return try body(&self.state.pointee)
        }

        /// How many times a contended `withLock` looks at the word before it sleeps: the
        /// critical sections are a few hundred instructions, so the holder is usually about
        /// to release it, and sleeping costs a system call on each side.
        @inlinable
        static var spinsBeforeSleeping: Int { 100 }

        /// The lock was held: spin briefly, then sleep until it is released.
        @usableFromInline
        func lockContended() {
            for _ in 0..<Self.spinsBeforeSleeping {
                if self.word.load(ordering: .relaxed) == 0,
                    self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
                {
                    return
                }
            }
            pthread_mutex_lock(self.parking)
            // Marking the word 2 tells the holder to wake a sleeper when it unlocks. Taking
            // the lock this way leaves it marked even if nobody else sleeps: the unlock then
            // wakes nobody, harmlessly.
            while self.word.exchange(2, ordering: .acquiring) != 0 {
                pthread_cond_wait(self.condition, self.parking)
            }
            pthread_mutex_unlock(self.parking)
        }

        /// The word was marked by a sleeper: wake one (it marks the word again if others
        /// still sleep).
        @usableFromInline
        func wakeOne() {
            pthread_mutex_lock(self.parking)
            pthread_cond_signal(self.condition)
            pthread_mutex_unlock(self.parking)
        }
    }

#else

    /// A mutual-exclusion lock that owns the state it protects.
    ///
    /// `State: Sendable` here (not in the pthread branch): `Mutex.withLock` hands out
    /// `inout sending State`, and region-based isolation rejects passing it to a caller's
    /// non-`sending` closure unless the state is `Sendable`. Every state we lock is.
    @usableFromInline
    final class Lock<State: Sendable>: @unchecked Sendable {  // @unchecked: `State` is only reachable through `mutex`.
        @usableFromInline let mutex: Mutex<State>

        @usableFromInline
        init(_ initialState: sending State) {
            self.mutex = Mutex(initialState)
        }

        @inlinable
        func withLock<Result, Failure: Error>(
            _ body: (inout State) throws(Failure) -> Result
        ) throws(Failure) -> Result {
            try self.mutex.withLock { (state: inout sending State) throws(Failure) -> Result in
                #if ASYNC_MULTICAST_INVARIANTS
                    defer { (state as? any InvariantChecking)?.checkInvariants() }
                #endif
                return try body(&state)
            }
        }
    }

#endif
