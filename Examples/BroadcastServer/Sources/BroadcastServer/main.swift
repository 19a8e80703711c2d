import Broadcast
import Foundation

let configuration: BroadcastConfiguration
do {
    configuration = try BroadcastConfiguration(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    if let message = error.message {
        FileHandle.standardError.write(Data("BroadcastServer: \(message)\n\n\(BroadcastConfiguration.usage)\n".utf8))
        exit(2)
    }
    print(BroadcastConfiguration.usage)
    exit(0)
}

let hub = BroadcastHub(configuration: configuration)
// The HTTP server and the feeds it serves, in one ServiceGroup.
let services = hub.serviceGroup { port in
    // Unbuffered, so that a script reading the port sees it at once.
    FileHandle.standardOutput.write(Data("BroadcastServer listening on http://127.0.0.1:\(port)\n".utf8))
}
// Runs until SIGINT or SIGTERM, then shuts down gracefully: the feeds end, every open event
// stream gets `event: shutdown` and ends, the server stops, and the process exits with 0.
try await services.run()
