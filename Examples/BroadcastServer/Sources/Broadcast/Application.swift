import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// The request context: Hummingbird's basics, plus the connection, which the event stream
/// closes when its client is evicted while it is not writable (the client is not reading),
/// or when a write to it stays pending for the write timeout.
public struct BroadcastRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }

    /// JSON with its keys sorted, for people reading `curl` output.
    public var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension Stats: ResponseEncodable {}

extension BroadcastHub {
    /// The routes: `GET /events`, `POST /messages`, `GET /stats`, `GET /metrics` (Prometheus).
    public func router() -> Router<BroadcastRequestContext> {
        let router = Router(context: BroadcastRequestContext.self)

        router.get("events") { request, context -> Response in
            let channel = context.channel
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/event-stream",
                    .cacheControl: "no-cache",
                ],
                body: ResponseBody { writer in
                    try await self.stream(request, to: &writer, channel: channel)
                }
            )
        }

        router.post("messages") { request, context -> Response in
            let body = try await request.body.collect(upTo: context.maxUploadSize)
            let message = self.post(String(buffer: body))
            let reply = "{\"id\":\(message.id),\"subscribers\":\(self.messages.subscriberCount)}\n"
            return Response(
                status: .accepted,
                headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: reply))
            )
        }

        router.get("stats") { _, _ -> Stats in
            self.stats
        }

        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: self.renderMetrics()))
            )
        }
        return router
    }

    /// The server on 127.0.0.1 and the configuration's port. `onServerRunning` receives the
    /// port actually bound (useful with port 0). Run it in
    /// ``serviceGroup(logger:gracefulShutdownSignals:onServerRunning:)``, next to the feeds'
    /// services: without them, the ticks never start.
    func application(
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: self.router(),
            // `GET /ws` upgrades to the chat room's WebSocket (ChatSocket.swift).
            server: .http1WebSocketUpgrade { request, channel, _ in
                try await self.webSocketUpgrade(request, channel: channel)
            },
            configuration: .init(
                address: .hostname("127.0.0.1", port: self.configuration.port),
                serverName: "BroadcastServer"
            ),
            onServerRunning: { channel in
                await onServerRunning(channel.localAddress?.port ?? self.configuration.port)
            },
            logger: logger
        )
    }
}

extension BroadcastHub {
    /// The server and its feeds, as one `ServiceGroup`: run it, and it serves until one of
    /// `gracefulShutdownSignals` arrives (or `triggerGracefulShutdown()` is called), then
    /// shuts down gracefully and returns.
    ///
    /// A group starts its services in order and shuts them down in reverse, each once the
    /// previous one has returned. The feeds come after the HTTP server, so that they end
    /// first:
    ///
    /// 1. the ticks' sharing (``SharingService``): its `run()` is cancelled, the upstream
    ///    stops, and every client receives the ticks buffered for it, then the feed's end;
    ///    the service returns once every client has read it (or at the shutdown deadline);
    /// 2. the messages (``DrainingService``): the subject is finished, and every client
    ///    receives the messages buffered for it, then the feed's end; the service returns
    ///    once every client has read it (or at the deadline). Each event stream, once both
    ///    feeds ended, gets `event: shutdown` and the end of its response; each WebSocket a
    ///    close frame (1000) behind its last message;
    /// 3. the HTTP server: it stops listening, waits for the responses still being written
    ///    (closing the connections of clients that are not reading them), and closes the
    ///    connections (hummingbird-websocket closes the WebSockets still open at once). Then
    ///    `run()` returns.
    /// 4. the subscriber gauges of `GET /metrics` (``MetricsService``), first in the group so
    ///    that they follow the counts to the end.
    ///
    /// Not through `Application(services:)`: the application runs those before its server,
    /// and stops them after it. The other way round, the server would stop first and would have to cut the streams
    /// itself, before the feeds had ended: the last ticks and messages buffered for a client
    /// would be lost, and the sharing would end with nobody left to tell.
    ///
    /// If the ticks' upstream ends by itself (a ``TickSource`` that finishes), the group
    /// shuts down gracefully as well.
    public func serviceGroup(
        logger: Logger = Logger(label: "BroadcastServer"),
        gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ServiceGroup {
        let deadline = self.configuration.shutdownDeadline
        return ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: MetricsService(hub: self)),
                    .init(service: self.application(logger: logger, onServerRunning: onServerRunning)),
                    .init(service: DrainingService(subject: self.messages, drainDeadline: deadline)),
                    .init(
                        service: SharingService(shared: self.ticks, drainDeadline: deadline),
                        successTerminationBehavior: .gracefullyShutdownGroup),
                ],
                gracefulShutdownSignals: gracefulShutdownSignals,
                logger: logger
            ))
    }
}
