import AsyncMulticast
import ServiceLifecycle

/// Hosts a shared service's upstream in a `ServiceGroup`: `run()` runs it until the group
/// shuts down. Graceful shutdown is a request, not a cancellation, and the library does not
/// depend on swift-service-lifecycle to hear it: `cancelWhenGracefulShutdown` turns it into
/// the cancellation that `AsyncSharedService.run()` ends on. Its subscribers then receive
/// what was buffered for them, then the end; `run()` returns once the upstream has stopped.
///
/// The snippet `Guides/Share.md` shows ("Structured sharing"), compiled here.
struct SharingService<Element: Sendable, Failure: Error>: Service {
    let shared: AsyncSharedService<Element, Failure>
    func run() async throws { try await cancelWhenGracefulShutdown { try await shared.run() } }
}

/// Finishes a subject when the group shuts down gracefully (or is cancelled): its
/// subscribers receive what was buffered for them, then the end.
struct FinishingService<Subject: AsyncSubject>: Service {
    let subject: Subject

    func run() async {
        try? await gracefulShutdown()  // returns at graceful shutdown; throws if cancelled first
        self.subject.finish()
    }
}
