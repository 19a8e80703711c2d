// The instruction gate's file: instructions per delivery that CI holds the engine to
// (`compare --instructions --check-thresholds FILE`), rewritten on purpose with
// `--write-thresholds FILE` when a change is meant to move the counts, as swift-nio keeps
// `Benchmarks/Thresholds/`. Wall-clock figures stay out of it: only callgrind's counts are
// repeatable on a shared machine. Parsing and checking live here, in the library, so that
// the package's tests check them; `compare` reads and writes the file.

/// The thresholds file: `#` comment lines (kept when the file is rewritten), then
/// `key value` lines: `mode quick` (the `compare` mode the values were measured in: a check
/// in another mode is refused), `tolerance-percent 5`, and one line per cell and subscriber
/// count, such as `share N=64 143` (instructions per delivery, rounded up). A `key value`
/// line may end with `# why` (its note), which a rewrite keeps on that line, the notes
/// aligned one column after the longest `key value` that has one.
public struct InstructionThresholds: Equatable, Sendable {
    /// The `#` lines, kept as they are.
    public var comments: [String]
    /// The note ending each `key value` line that has one, by key (`mode`,
    /// `tolerance-percent`, `share N=64`), without its `#`.
    public var notes: [String: String]
    /// The `compare` mode the values were measured in (`quick`, `full`, `smoke`).
    public var mode: String
    /// How far above its threshold a measured count may be, in percent.
    public var tolerancePercent: Double
    /// `(key, instructions per delivery)`, in the order of the file.
    public var values: [Entry]

    public struct Entry: Equatable, Sendable {
        public var key: String
        public var instructions: Int

        public init(key: String, instructions: Int) {
            self.key = key
            self.instructions = instructions
        }
    }

    public init(
        comments: [String] = [], notes: [String: String] = [:], mode: String, tolerancePercent: Double,
        values: [Entry]
    ) {
        self.comments = comments
        self.notes = notes
        self.mode = mode
        self.tolerancePercent = tolerancePercent
        self.values = values
    }

    /// The key of a cell's threshold: `share N=64`.
    public static func key(_ cell: Scenarios.DeliveryCell, subscribers: Int) -> String {
        "\(cell.rawValue) N=\(subscribers)"
    }

    /// What a key's count is per: a join-and-leave cell's (`Scenarios.JoinLeaveCell.key`)
    /// is per subscriber, a lossy send's per element sent, every other per delivery.
    public static func unit(of key: String) -> String {
        if Scenarios.JoinLeaveCell.allCases.contains(where: { $0.key == key }) { return "Ir/subscriber" }
        let perElementSent = Scenarios.DeliveryCell.allCases.contains {
            $0.countsPerElementSent && key.hasPrefix($0.rawValue + " ")
        }
        return perElementSent ? "Ir/element sent" : "Ir/delivery"
    }

    /// Parses a file's text; the first malformed line otherwise.
    public static func parse(_ text: String) -> Result<InstructionThresholds, ThresholdFileError> {
        var thresholds = InstructionThresholds(mode: "", tolerancePercent: -1, values: [])
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard let first = raw.split(separator: " ", omittingEmptySubsequences: true).first else { continue }
            if first.hasPrefix("#") {
                thresholds.comments.append(String(raw))
                continue
            }
            let malformed = ThresholdFileError(line: index + 1, text: String(raw))
            // `key value # note`: the words before the first `#`, and the note after it.
            let (words, note) = splitNote(raw)
            guard words.count >= 2, let last = words.last else { return .failure(malformed) }
            let key: String
            switch words[0] {
            case "mode" where words.count == 2:
                key = "mode"
                thresholds.mode = last
            case "tolerance-percent" where words.count == 2:
                guard let value = Double(last), value >= 0 else { return .failure(malformed) }
                key = "tolerance-percent"
                thresholds.tolerancePercent = value
            default:
                guard let value = Int(last), value > 0 else { return .failure(malformed) }
                key = words.dropLast().joined(separator: " ")
                thresholds.values.append(Entry(key: key, instructions: value))
            }
            if let note, !note.isEmpty { thresholds.notes[key] = note }
        }
        guard !thresholds.mode.isEmpty, thresholds.tolerancePercent >= 0, !thresholds.values.isEmpty else {
            return .failure(ThresholdFileError(line: 0, text: "needs a mode, a tolerance-percent and a threshold"))
        }
        return .success(thresholds)
    }

    /// The file's text: the comments, then the settings and the thresholds, each with its note.
    public var text: String {
        let tolerance = "tolerance-percent \(percentText(self.tolerancePercent))"
        let settings: [(key: String, line: String)] =
            [("mode", "mode \(self.mode)"), ("tolerance-percent", tolerance)]
            + self.values.map { ($0.key, "\($0.key) \($0.instructions)") }
        let column = settings.filter { self.notes[$0.key] != nil }.map(\.line.count).max().map { $0 + 2 } ?? 0
        var lines = self.comments
        for (key, line) in settings {
            guard let note = self.notes[key] else {
                lines.append(line)
                continue
            }
            lines.append(line + String(repeating: " ", count: column - line.count) + "# " + note)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A line per threshold (`ok` or `ABOVE`), and the problems: a measured count more than
    /// the tolerance above its threshold, or a threshold that was not measured.
    public func check(_ measured: [String: Double]) -> (report: [String], problems: [String]) {
        var report: [String] = []
        var problems: [String] = []
        for entry in self.values {
            guard let value = measured[entry.key] else {
                problems.append("\(entry.key): not measured (threshold \(entry.instructions))")
                continue
            }
            let change = (value / Double(entry.instructions) - 1) * 100
            let line =
                "\(entry.key): \(Int(value.rounded())) \(Self.unit(of: entry.key)), threshold \(entry.instructions) "
                + "(\(change >= 0 ? "+" : "")\(percentText(change))%, allowed +\(percentText(self.tolerancePercent))%)"
            if change > self.tolerancePercent {
                report.append("ABOVE  " + line)
                problems.append(line)
            } else {
                report.append("ok     " + line)
            }
        }
        return (report, problems)
    }

    /// These thresholds with the measured counts, rounded up, in place of the old values;
    /// measured keys the file did not have yet are appended in `order`.
    public func updated(with measured: [String: Double], order: [String]) -> InstructionThresholds {
        var copy = self
        copy.values = self.values.map { entry in
            Entry(key: entry.key, instructions: measured[entry.key].map { Int($0.rounded(.up)) } ?? entry.instructions)
        }
        for key in order where !copy.values.contains(where: { $0.key == key }) {
            if let value = measured[key] { copy.values.append(Entry(key: key, instructions: Int(value.rounded(.up)))) }
        }
        return copy
    }
}

/// A thresholds file that does not parse: the line (1-based; 0 for the whole file).
public struct ThresholdFileError: Error, Equatable, CustomStringConvertible {
    public let line: Int
    public let text: String

    public init(line: Int, text: String) {
        self.line = line
        self.text = text
    }

    public var description: String { self.line > 0 ? "line \(self.line): \(self.text)" : self.text }
}

/// A `key value # note` line's words before the `#`, and the note after it (its spaces trimmed).
func splitNote(_ line: Substring) -> (words: [String], note: String?) {
    guard let hash = line.firstIndex(of: "#") else {
        return (line.split(separator: " ", omittingEmptySubsequences: true).map(String.init), nil)
    }
    let words = line[..<hash].split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    let note = line[line.index(after: hash)...].drop(while: { $0 == " " })
    return (words, String(note.reversed().drop(while: { $0 == " " }).reversed()))
}

/// `value` with one decimal, or none when it is whole (`5`, `-2.5`).
func percentText(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    let sign = tenths < 0 ? "-" : ""
    let magnitude = abs(tenths)
    return magnitude % 10 == 0 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
}
