import ChatRooms
import Foundation

let configuration: ChatConfiguration
do {
    configuration = try ChatConfiguration(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    guard let message = error.message else {
        print(ChatConfiguration.usage)
        exit(0)
    }
    FileHandle.standardError.write(Data("chat-rooms: \(message)\n\n\(ChatConfiguration.usage)\n".utf8))
    exit(2)
}

// The HTTP server and the rooms, in one ServiceGroup; SIGINT or SIGTERM shuts it down gracefully.
let services = ChatServer(configuration: configuration).serviceGroup { port in
    FileHandle.standardOutput.write(Data("chat-rooms listening on http://127.0.0.1:\(port)\n".utf8))
}
try await services.run()
