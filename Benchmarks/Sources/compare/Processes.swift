// Process helpers for `compare --instructions`: finding and spawning valgrind, reading its
// output files.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Process helpers (Linux)

func fail(_ message: String) -> Never {
    let line = message + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }  // stderr (the C global is not concurrency-safe)
    exit(2)
}

/// `1234567` as `1,234,567`.
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (index, digit) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { out += "," }
        out.append(digit)
    }
    return value < 0 ? "-" + out : out
}

#if os(Linux)
    /// The first executable `name` in `$PATH`.
    func findOnPath(_ name: String) -> String? {
        guard let path = getenv("PATH").map({ String(cString: $0) }) else { return nil }
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// `name` in the folder of this executable (/proc/self/exe).
    func siblingExecutable(_ name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let me =
            length > 0
            ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : CommandLine.arguments[0]
        guard let slash = me.lastIndex(of: "/") else { return name }
        return String(me[..<slash]) + "/" + name
    }

    func makeTemporaryFolder() -> String? {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/compare-instructions.XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
    }

    /// Runs `arguments` (an absolute path first) with stdout and stderr into the file `output`;
    /// its exit status, or nil if it could not be started or was killed by a signal.
    func spawnAndWait(_ arguments: [String], output: String) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        guard posix_spawn(&pid, arguments[0], &actions, nil, argv, environ) == 0 else { return nil }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return nil }
        }
        // WIFEXITED / WEXITSTATUS (macros Swift does not import).
        guard status & 0x7f == 0 else { return nil }
        return (status >> 8) & 0xff
    }

    func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What the program itself printed (lines not starting with valgrind's `==PID==`), or
    /// the end of the log if that is nothing.
    func logExcerpt(_ path: String) -> String {
        guard let text = readFile(path) else { return "(no log)" }
        let own = text.split(separator: "\n").filter { !$0.hasPrefix("==") && !$0.hasPrefix("--") }
        let excerpt = own.isEmpty ? text.suffix(1_500).split(separator: "\n") : own.suffix(10)
        return excerpt.map { "    " + $0 }.joined(separator: "\n")
    }

    /// The total instruction count (the first event, Ir) from a callgrind output file:
    /// its `totals:` line, or `summary:` in older formats.
    func readCallgrindTotal(_ path: String) -> Int? {
        guard let text = readFile(path) else { return nil }
        var summary: Int?
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            for prefix in ["totals:", "summary:"] where line.hasPrefix(prefix) {
                let value = line.dropFirst(prefix.count).split(separator: " ").first.flatMap { Int($0) }
                if prefix == "totals:", let value { return value }
                summary = summary ?? value
            }
        }
        return summary
    }
#endif
