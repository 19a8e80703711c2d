import Foundation
import Synchronization

/// The built `BroadcastServer` executable, run as a child process on 127.0.0.1 and a free
/// port, so that a test can send it a real signal.
final class ServerProcess: Sendable {
    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    /// How the process ended.
    struct Exit: Sendable, Equatable {
        /// Its exit status, or the signal that ended it.
        let status: Int32
        /// Whether it exited (rather than being ended by a signal).
        let exited: Bool
    }

    let port: Int
    private let process: Process
    private let output: Output
    private let exits: AsyncStream<Exit>

    /// Starts `BroadcastServer --port 0` with `arguments`, and returns once it printed the
    /// port it listens on. Throws ``TimedOut`` if it has not after `limit`.
    static func start(_ arguments: [String], within limit: Duration) async throws -> ServerProcess {
        let executable = try Self.executable()
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--port", "0"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = Output()
        let (lines, lineContinuation) = AsyncStream.makeStream(of: String.self)
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil  // the end of the output: every writer closed it
                lineContinuation.finish()
            } else {
                for line in output.append(data) { lineContinuation.yield(line) }
            }
        }
        let (exits, exitContinuation) = AsyncStream.makeStream(of: Exit.self)
        process.terminationHandler = { process in
            exitContinuation.yield(Exit(status: process.terminationStatus, exited: process.terminationReason == .exit))
            exitContinuation.finish()
        }
        try process.run()

        let prefix = "BroadcastServer listening on http://127.0.0.1:"
        let port = try await withTimeout(limit, "the server process to listen") {
            for await line in lines where line.hasPrefix(prefix) {
                return Int(line.dropFirst(prefix.count))
            }
            return nil
        }
        let server = ServerProcess(port: port ?? 0, process: process, output: output, exits: exits)
        guard port != nil else {
            server.kill()
            throw Failed(description: "the server process did not report its port; it printed:\n\(output.text)")
        }
        return server
    }

    private init(port: Int, process: Process, output: Output, exits: AsyncStream<Exit>) {
        self.port = port
        self.process = process
        self.output = output
        self.exits = exits
    }

    /// The child's pid.
    var pid: Int32 { self.process.processIdentifier }

    /// Everything it printed so far (standard output and standard error).
    var printed: String { self.output.text }

    /// Sends it SIGTERM, as a process manager asks a server to stop.
    func terminate() {
        Glibc.kill(self.process.processIdentifier, SIGTERM)
    }

    /// Waits until the process ended, and says how; throws ``TimedOut`` after `limit`.
    func waitForExit(within limit: Duration) async throws -> Exit {
        let exits = self.exits
        let exit = try await withTimeout(limit, "the server process to exit") {
            await exits.first { _ in true }
        }
        guard let exit else { throw Failed(description: "no termination status") }
        return exit
    }

    /// Ends it at once if it still runs (a failed test's cleanup).
    func kill() {
        if self.process.isRunning { Glibc.kill(self.process.processIdentifier, SIGKILL) }
    }

    /// `.build/<triple>/debug/BroadcastServer`, next to the test binary, which
    /// `swift build --build-tests` and `swift test` build.
    private static func executable() throws -> URL {
        let testBinary = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let executable = testBinary.deletingLastPathComponent().appendingPathComponent("BroadcastServer")
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw Failed(description: "no executable at \(executable.path): run `swift build` first")
        }
        return executable
    }

    /// What the process printed, and the line being printed.
    private final class Output: Sendable {
        private let state = Mutex((text: "", line: ""))

        var text: String { self.state.withLock { $0.text } }

        /// Appends `data`; returns the lines it completed.
        func append(_ data: Data) -> [String] {
            let chunk = String(decoding: data, as: UTF8.self)
            return self.state.withLock { state in
                state.text += chunk
                state.line += chunk
                var lines = state.line.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                state.line = lines.removeLast()
                return lines
            }
        }
    }
}
