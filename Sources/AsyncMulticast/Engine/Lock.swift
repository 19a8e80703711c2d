// The only file in the library that imports a platform module.
//
// Why two implementations: ThreadSanitizer on Linux does not model `Synchronization.Mutex`
// as synchronization and reports "Swift access race" on correctly locked code. A
// pthread-mutex-backed lock is understood by TSan, so on Glibc/Musl we use that and the
// sanitizer run checks the rest of the library for real. Elsewhere (Apple platforms) we use
// `Mutex`. Define ASYNC_MULTICAST_USE_MUTEX to compile the `Mutex` path on Linux too.

#if canImport(Glibc) && !ASYNC_MULTICAST_USE_MUTEX
    import Glibc
#elseif canImport(Musl) && !ASYNC_MULTICAST_USE_MUTEX
    import Musl
#else
    import Synchronization
#endif

#if (canImport(Glibc) || canImport(Musl)) && !ASYNC_MULTICAST_USE_MUTEX

    /// A mutual-exclusion lock that owns the state it protects.
    ///
    /// `State` is only reachable inside `withLock`, so every access is serialized by the mutex.
    @usableFromInline
    final class Lock<State>: @unchecked Sendable {  // @unchecked: `state` is only touched under `mutex`.
        @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
        /// Out of line rather than a stored `var`: the mutex already guarantees exclusive
        /// access, and a class property would pay for a dynamic exclusivity check per access.
        @usableFromInline let state: UnsafeMutablePointer<State>

        @usableFromInline
        init(_ initialState: State) {
            self.state = UnsafeMutablePointer<State>.allocate(capacity: 1)
            self.state.initialize(to: initialState)
            self.mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            self.mutex.initialize(to: pthread_mutex_t())
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            #if canImport(Glibc)
                // Critical sections here are a few dozen instructions: spinning briefly before
                // sleeping in the kernel avoids a futex round trip per element under contention.
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
            #endif
            let result = pthread_mutex_init(self.mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
            precondition(result == 0, "pthread_mutex_init failed with \(result)")
        }

        deinit {
            let result = pthread_mutex_destroy(self.mutex)
            assert(result == 0, "pthread_mutex_destroy failed with \(result)")
            self.mutex.deinitialize(count: 1)
            self.mutex.deallocate()
            self.state.deinitialize(count: 1)
            self.state.deallocate()
        }

        @inlinable
        func withLock<Result, Failure: Error>(
            _ body: (inout State) throws(Failure) -> Result
        ) throws(Failure) -> Result {
            let lockResult = pthread_mutex_lock(self.mutex)
            assert(lockResult == 0, "pthread_mutex_lock failed with \(lockResult)")
            defer {
                #if ASYNC_MULTICAST_INVARIANTS
                    (self.state.pointee as? any InvariantChecking)?.checkInvariants()
                #endif
                let unlockResult = pthread_mutex_unlock(self.mutex)
                assert(unlockResult == 0, "pthread_mutex_unlock failed with \(unlockResult)")
            }
            return try body(&self.state.pointee)
        }
    }

#else

    /// A mutual-exclusion lock that owns the state it protects.
    ///
    /// `State: Sendable` here (not in the pthread branch): `Mutex.withLock` hands out
    /// `inout sending State`, and region-based isolation rejects passing it to a caller's
    /// non-`sending` closure unless the state is `Sendable`. Every state we lock is.
    @usableFromInline
    final class Lock<State: Sendable>: Sendable {
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
