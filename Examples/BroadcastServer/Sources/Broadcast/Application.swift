import Foundation
import Hummingbird
import Logging
import NIOCore

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
    /// The routes: `GET /events`, `POST /messages`, `GET /stats`.
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
        return router
    }

    /// The server on 127.0.0.1 and the configuration's port. `onServerRunning` receives the
    /// port actually bound (useful with port 0).
    public func application(
        logger: Logger? = nil,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: self.router(),
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
