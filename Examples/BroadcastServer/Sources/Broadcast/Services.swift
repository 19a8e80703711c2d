import AsyncMulticast
import ServiceLifecycle

/// Hosts a shared service's upstream in a `ServiceGroup`: `run()` runs it until the group
/// shuts down gracefully, then waits, at most `drainDeadline`, until every client has read
/// the feed's end. Graceful shutdown is a request, not a cancellation, and the library does
/// not depend on swift-service-lifecycle to hear it: `cancelWhenGracefulShutdown` turns it
/// into the cancellation that `AsyncSharedService.run()` ends on. Its subscribers then
/// receive what was buffered for them, then the end; `run()` returns once the upstream has
/// stopped, and `waitUntilDrained(within:)` once they have read it all (or at the deadline).
/// If the group is cancelled instead (a forced shutdown), the wait ends at once.
///
/// The snippet `Guides/Share.md` shows ("Structured sharing"), compiled here.
struct SharingService<Element: Sendable, Failure: Error>: Service {
    let shared: AsyncSharedService<Element, Failure>
    let drainDeadline: Duration

    func run() async throws {
        try await cancelWhenGracefulShutdown { try await shared.run() }
        await shared.waitUntilDrained(within: drainDeadline)  // every client read the end
    }
}

/// Finishes a subject when the group shuts down gracefully, and waits, at most
/// `drainDeadline`, until every subscriber has read what was sent to it and the end. If the
/// group is cancelled first, the subject is finished and the wait ends at once.
///
/// The snippet `Guides/ServingClients.md` shows ("Shutting down"), compiled here.
struct DrainingService<Subject: AsyncSubject>: Service {
    let subject: Subject
    let drainDeadline: Duration

    func run() async {
        try? await gracefulShutdown()  // returns at graceful shutdown; throws if cancelled first
        await subject.finish(drainingWithin: drainDeadline)
    }
}

/// Keeps the feeds' subscriber gauges current (`broadcast_subscribers{feed=…}`) until the
/// group shuts down.
struct MetricsService: Service {
    let hub: BroadcastHub

    func run() async {
        // Each tracking ends when cancelled: at graceful shutdown, or when the group is.
        await cancelWhenGracefulShutdown {
            async let ticks: Void = hub.metrics.ticks.trackSubscribers(of: hub.ticks)
            async let messages: Void = hub.metrics.messages.trackSubscribers(of: hub.messages)
            _ = await (ticks, messages)
        }
    }
}
