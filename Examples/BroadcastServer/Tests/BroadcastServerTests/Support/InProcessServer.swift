import ServiceLifecycle

/// Where a server reports the port it listens on (its `onServerRunning`), for
/// ``withServerRunning(_:reportingTo:_:)`` to wait for.
struct ListeningPort: Sendable {
    let ports: AsyncStream<Int>
    private let continuation: AsyncStream<Int>.Continuation

    init() {
        (self.ports, self.continuation) = AsyncStream.makeStream(of: Int.self)
    }

    /// The server's `onServerRunning`.
    var report: @Sendable (Int) async -> Void {
        { [continuation] port in continuation.yield(port) }
    }
}

/// Runs a server's `ServiceGroup` (built without signals) in this process, runs `body` with
/// the port the server reports to `port`, then triggers the group's graceful shutdown and
/// waits for it to return.
func withServerRunning<Result: Sendable>(
    _ services: ServiceGroup, reportingTo port: ListeningPort, _ body: (Int) async throws -> Result
) async throws -> Result {
    let ports = port.ports
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await services.run() }
        do {
            let port = try await withTimeout(.seconds(10), "the server to start") {
                await ports.first { _ in true }
            }
            guard let port else { throw TimedOut(what: "the server's port") }
            let result = try await body(port)
            await services.triggerGracefulShutdown()
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                throw TimedOut(what: "the server to shut down")
            }
            try await group.next()  // the server ended (or the hang guard fired)
            group.cancelAll()
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}
