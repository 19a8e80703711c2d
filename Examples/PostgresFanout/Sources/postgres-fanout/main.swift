// One server instance. Run several, on different ports, against the same database:
//
//     POSTGRES_HOST=127.0.0.1 POSTGRES_PORT=5432 POSTGRES_USER=fanout POSTGRES_DB=fanout \
//         swift run postgres-fanout --name a --port 8081
//
// Options: --name NAME (default "a"), --port PORT (default 8080), --channel CHANNEL
// (default "fanout": the one PostgreSQL channel that carries every room), --heartbeat
// SECONDS (default 15), and each client's limits: --hard-limit N (default 4096) unread
// events evict a client at once, more than --soft-limit N (default 256, below the hard
// limit) for --soft-limit-duration SECONDS (default 10) evict it too; --recent N (default
// 256) of each live room's latest messages are kept in memory for reconnecting clients.
// Ctrl-C or SIGTERM stops it.
import Foundation
import Hummingbird
import Logging
import PostgresFanout
import ServiceLifecycle

let usage = """
    usage: postgres-fanout [--name NAME] [--port PORT] [--channel CHANNEL] [--heartbeat SECONDS]
                           [--hard-limit N] [--soft-limit N] [--soft-limit-duration SECONDS]
                           [--recent N]

    """
func usageError(_ message: String? = nil) -> Never {
    FileHandle.standardError.write(Data(((message.map { "postgres-fanout: \($0)\n" } ?? "") + usage).utf8))
    exit(2)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard flag.hasPrefix("--"), let value = arguments.popFirst() else { usageError() }
    options[String(flag.dropFirst(2))] = value
}

guard let postgres = PostgresSettings.fromEnvironment() else {
    FileHandle.standardError.write(
        Data("postgres-fanout: set POSTGRES_HOST (and POSTGRES_PORT, POSTGRES_USER, POSTGRES_DB)\n".utf8))
    exit(2)
}

let hardLimit = Int(options["hard-limit"] ?? "") ?? 4096
let softLimit = Int(options["soft-limit"] ?? "") ?? 256
guard hardLimit >= 1, (0..<hardLimit).contains(softLimit) else {
    usageError("--soft-limit (\(softLimit)) must be from 0 to below --hard-limit (\(hardLimit))")
}
let recent = Int(options["recent"] ?? "") ?? 256
guard recent >= 0 else { usageError("--recent (\(recent)) must be at least 0") }

let logger = Logger(label: "postgres-fanout")
let configuration = FanoutConfiguration(
    instanceName: options["name"] ?? "a",
    channel: options["channel"] ?? "fanout",
    postgres: postgres,
    hardLimit: hardLimit,
    softLimit: softLimit,
    softLimitDuration: .seconds(Int(options["soft-limit-duration"] ?? "") ?? 10),
    heartbeat: .seconds(Int(options["heartbeat"] ?? "") ?? 15),
    recentMessagesPerRoom: recent)
let server = FanoutServer(configuration: configuration, logger: logger)
// The table of messages that reconnecting clients read (created if it is not there yet).
try await server.prepareDatabase()
let port = Int(options["port"] ?? "") ?? 8080
let application = server.application(port: port) { port in
    logger.info(
        "instance \(configuration.instanceName) serving http://127.0.0.1:\(port) (GET /rooms/ROOM/events, POST /rooms/ROOM/messages, GET /rooms/ROOM, GET /stats)"
    )
}
// Cancelling on a signal, rather than a graceful shutdown: an SSE stream never ends on its own,
// so a graceful shutdown would wait for the clients to leave.
let services = ServiceGroup(
    configuration: .init(services: [application], cancellationSignals: [.sigint, .sigterm], logger: logger))
try await services.run()
