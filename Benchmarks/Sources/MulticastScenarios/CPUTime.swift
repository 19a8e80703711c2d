// Process CPU time (user + system, every thread) for the cost-per-delivery scenario.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// CPU time the whole process has used so far, user plus system, over all its threads
/// (`getrusage(RUSAGE_SELF)`), in seconds. A thread spinning while it waits counts;
/// one asleep in the kernel does not.
public func processCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
        let who = __rusage_who_t(RUSAGE_SELF.rawValue)  // glibc: an enum constant, an Int32 parameter
    #else
        let who = RUSAGE_SELF
    #endif
    guard getrusage(who, &usage) == 0 else { return .nan }
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// `body`'s process CPU time (`processCPUSeconds()` before and after) and wall time, in seconds.
public func measureCPUSeconds<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> T
) async rethrows -> (result: T, cpu: Double, wall: Double) {
    let cpuStart = processCPUSeconds()
    let start = monotonicNanos()
    let result = try await body()
    let wall = Double(monotonicNanos() - start) / 1e9
    return (result, processCPUSeconds() - cpuStart, wall)
}
