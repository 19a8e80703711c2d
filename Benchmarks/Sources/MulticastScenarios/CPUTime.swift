// Process CPU time (user + system, every thread) for the cost-per-delivery scenario.

/// CPU time the whole process has used so far, user plus system, over all its threads
/// (`getrusage(RUSAGE_SELF)`, read by `ProcessUsage`), in seconds. A thread spinning while
/// it waits counts; one asleep in the kernel does not.
public func processCPUSeconds() -> Double {
    Double(ProcessUsage.now().cpuNanos) / 1e9
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
