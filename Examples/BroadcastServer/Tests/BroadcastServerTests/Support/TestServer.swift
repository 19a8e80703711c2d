import Broadcast
import Logging
import ServiceLifecycle

/// A server running in this process, on 127.0.0.1 and a free port.
struct TestServer: Sendable {
    let hub: BroadcastHub
    let port: Int

    /// The settings the tests start from: quick heartbeats, so that a closed connection is
    /// noticed well within a second.
    static let configuration = BroadcastConfiguration(
        port: 0,
        tickInterval: .milliseconds(250),
        heartbeatInterval: .milliseconds(100),
        hardLimit: 256,
        softLimit: 128,
        softLimitDuration: .seconds(10),
        writeTimeout: .seconds(5)
    )

    /// Starts a server, runs `body` with it, and shuts the server down gracefully (which
    /// ends the event streams still open, with `event: shutdown`).
    static func run<Result: Sendable>(
        _ configuration: BroadcastConfiguration = Self.configuration,
        upstream: TickSource? = nil,
        clock: some Clock<Duration> = ContinuousClock(),
        _ body: @escaping @Sendable (TestServer) async throws -> Result
    ) async throws -> Result {
        var configuration = configuration
        configuration.port = 0
        let hub = BroadcastHub(configuration: configuration, upstream: upstream, clock: clock)
        var logger = Logger(label: "BroadcastServerTests")
        logger.logLevel = .warning
        // The server's own service group (the HTTP server, then the feeds), without signals:
        // the test triggers its graceful shutdown.
        let port = ListeningPort()
        let services = hub.serviceGroup(logger: logger, gracefulShutdownSignals: [], onServerRunning: port.report)
        return try await withServerRunning(services, reportingTo: port) {
            try await body(TestServer(hub: hub, port: $0))
        }
    }

    /// Connects `count` event-stream clients and waits until each has read `: connected`,
    /// which the server writes once the client's subscriptions exist.
    func connectClients(_ count: Int) async throws -> [SSEClient] {
        try await connectEventStreams(count, port: self.port)
    }

    /// Waits until the shared ticks and the messages subject both have exactly `count`
    /// subscribers (one per connected client), and returns how long that took; throws
    /// ``TimedOut`` after `limit`.
    func waitForSubscribers(_ count: Int, within limit: Duration) async throws -> Duration {
        let hub = self.hub
        let clock = ContinuousClock()
        let start = clock.now
        let now = "now \(hub.ticks.subscriberCount) and \(hub.messages.subscriberCount)"
        try await withTimeout(limit, "\(count) subscribers (\(now))") {
            for await current in hub.ticks.subscriberCounts where current == count { break }
            for await current in hub.messages.subscriberCounts where current == count { break }
        }
        return clock.now - start
    }

    /// Waits until exactly `count` event-stream handlers run (the hub's presence count),
    /// and returns how long that took; throws ``TimedOut`` after `limit`.
    @discardableResult
    func waitForClients(_ count: Int, within limit: Duration) async throws -> Duration {
        let hub = self.hub
        let clock = ContinuousClock()
        let start = clock.now
        try await withTimeout(limit, "\(count) connected clients (now \(hub.connectedClients.value))") {
            for await current in hub.connectedClients where current == count { break }
        }
        return clock.now - start
    }

    /// Waits until the upstream is in `state`; throws ``TimedOut`` after `limit`.
    func waitForUpstream(_ state: UpstreamState, within limit: Duration) async throws {
        let hub = self.hub
        try await withTimeout(limit, "upstream \(state) (now \(hub.upstreamStates.value))") {
            for await current in hub.upstreamStates where current == state { return }
        }
    }
}
