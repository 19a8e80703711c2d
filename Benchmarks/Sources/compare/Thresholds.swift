// The instruction gate: a checked-in file of instructions per delivery that CI holds the
// engine to (`compare --instructions --check-thresholds FILE`), rewritten on purpose with
// `--write-thresholds FILE` when a change is meant to move the counts, as swift-nio keeps
// `Benchmarks/Thresholds/`. Wall-clock figures stay out of it: only callgrind's counts are
// repeatable on a shared machine.

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#endif

/// The file: `#` comment lines (kept when the file is rewritten), then `key value` lines:
/// `mode quick` (the `compare` mode the values were measured in: a check in another mode is
/// refused), `tolerance-percent 4`, and one line per cell and subscriber count, such as
/// `share N=64 141` (instructions per delivery, the median of the run that wrote it).
struct InstructionThresholds: Equatable {
    var comments: [String] = []
    var mode: String
    var tolerancePercent: Double
    /// By `key(cell, subscribers)`, in the order written.
    var values: [(key: String, instructions: Int)]

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.comments == rhs.comments && lhs.mode == rhs.mode && lhs.tolerancePercent == rhs.tolerancePercent
            && lhs.values.map(\.key) == rhs.values.map(\.key)
            && lhs.values.map(\.instructions) == rhs.values.map(\.instructions)
    }

    static func key(_ cell: DeliveryCell, subscribers: Int) -> String { "\(cell.rawValue) N=\(subscribers)" }

    /// Parses the file's text; a description of the first malformed line otherwise.
    static func parse(_ text: String) -> Result<InstructionThresholds, ThresholdFileError> {
        var thresholds = InstructionThresholds(mode: "", tolerancePercent: -1, values: [])
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters()
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                thresholds.comments.append(String(raw))
                continue
            }
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            func malformed() -> ThresholdFileError { ThresholdFileError(line: number + 1, text: String(raw)) }
            guard let last = words.last, words.count >= 2 else { return .failure(malformed()) }
            switch words[0] {
            case "mode" where words.count == 2:
                thresholds.mode = last
            case "tolerance-percent" where words.count == 2:
                guard let value = Double(last), value >= 0 else { return .failure(malformed()) }
                thresholds.tolerancePercent = value
            default:
                guard let value = Int(last), value > 0 else { return .failure(malformed()) }
                thresholds.values.append((words.dropLast().joined(separator: " "), value))
            }
        }
        guard !thresholds.mode.isEmpty, thresholds.tolerancePercent >= 0, !thresholds.values.isEmpty else {
            return .failure(ThresholdFileError(line: 0, text: "needs a mode, a tolerance-percent and a threshold"))
        }
        return .success(thresholds)
    }

    /// The file's text: the comments, then the settings and the thresholds.
    var text: String {
        var lines = self.comments
        lines.append("mode \(self.mode)")
        lines.append("tolerance-percent \(fmt(self.tolerancePercent, 0))")
        for (key, instructions) in self.values { lines.append("\(key) \(instructions)") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// One line per threshold (`ok` or `ABOVE`), and the problems: a measured median more
    /// than the tolerance above its threshold, or a threshold that was not measured.
    func check(_ measured: [String: Double]) -> (report: [String], problems: [String]) {
        var report: [String] = []
        var problems: [String] = []
        for (key, threshold) in self.values {
            guard let value = measured[key] else {
                problems.append("\(key): not measured (threshold \(threshold))")
                continue
            }
            let limit = Double(threshold) * (1 + self.tolerancePercent / 100)
            let change = (value / Double(threshold) - 1) * 100
            let line =
                "\(key): \(fmt(value, 0)) Ir/delivery, threshold \(threshold) "
                + "(\(change >= 0 ? "+" : "")\(fmt(change, 1))%, allowed +\(fmt(self.tolerancePercent, 0))%)"
            if value > limit {
                report.append("ABOVE  " + line)
                problems.append(line)
            } else {
                report.append("ok     " + line)
            }
        }
        return (report, problems)
    }

    /// These thresholds with the measured medians, rounded up, in place of the old values
    /// (and every measured key the file did not have yet, appended).
    func updated(with measured: [String: Double], order: [String]) -> InstructionThresholds {
        var copy = self
        copy.values = self.values.map { entry in
            (entry.key, measured[entry.key].map { Int($0.rounded(.up)) } ?? entry.instructions)
        }
        for key in order where !copy.values.contains(where: { $0.key == key }) {
            if let value = measured[key] { copy.values.append((key, Int(value.rounded(.up)))) }
        }
        return copy
    }
}

struct ThresholdFileError: Error, CustomStringConvertible {
    let line: Int
    let text: String
    var description: String { self.line > 0 ? "line \(self.line): \(self.text)" : self.text }
}

#if os(Linux)
    /// Writes `text` to `path` (replacing it); whether it worked.
    func writeFile(_ path: String, _ text: String) -> Bool {
        guard let file = fopen(path, "w") else { return false }
        defer { fclose(file) }
        let bytes = Array(text.utf8)
        return fwrite(bytes, 1, bytes.count, file) == bytes.count
    }

    /// After an instructions run: checks the medians against the file `options.checkThresholds`
    /// (recording a failure for each one above), and rewrites `options.writeThresholds`.
    @MainActor
    func applyThresholds(_ options: Options, medians: [String: Double], order: [String]) {
        func load(_ path: String) -> InstructionThresholds {
            guard let text = readFile(path) else { fail("compare: cannot read the thresholds file \(path)") }
            switch InstructionThresholds.parse(text) {
            case .success(let thresholds): return thresholds
            case .failure(let error): fail("compare: \(path): \(error)")
            }
        }
        if let path = options.checkThresholds {
            let thresholds = load(path)
            guard thresholds.mode == options.mode.rawValue else {
                fail("compare: \(path) holds --\(thresholds.mode) counts; run with --\(thresholds.mode)")
            }
            let (report, problems) = thresholds.check(medians)
            stamp("\nInstruction gate (\(path), medians against thresholds):\n" + report.joined(separator: "\n"))
            record("instruction gate", problems)
            if !problems.isEmpty {
                stamp(
                    """
                    A count rose above its threshold. If the change is meant to cost that, rewrite the file:
                      swift run -c release compare --instructions --\(options.mode.rawValue) --impls ours --write-thresholds \(path)
                    and say why in the commit.
                    """)
            }
        }
        if let path = options.writeThresholds {
            let old =
                readFile(path).flatMap { try? InstructionThresholds.parse($0).get() }
                ?? InstructionThresholds(mode: options.mode.rawValue, tolerancePercent: 4, values: [])
            var new = old.updated(with: medians, order: order)
            new.mode = options.mode.rawValue
            guard writeFile(path, new.text) else { fail("compare: cannot write \(path)") }
            stamp("\nWrote the measured medians to \(path).")
        }
    }
#endif
