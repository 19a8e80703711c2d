// `compare --json FILE`: every value the printed tables are computed from, as JSON, for
// `Tools/figures.sh` (which merges several runs into Results/figures.json and renders the READMEs'
// tables and the chart from it). The tables stay what compare prints; this is the raw data.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One measured cell: a metric of one implementation (or variant) in one scenario, with
/// every sample (one per repetition), or a single value where compare keeps only a summary
/// (percentiles of latency samples).
struct FigureRecord {
    var scenario: String
    var metric: String
    var unit: String
    var implementation: String
    var subscribers: Int?
    var elements: Int?
    var labels: [(String, String)]
    var samples: [Double]
}

@MainActor
var figureRecords: [FigureRecord] = []

/// Facts about the run (scheduling class in effect, sizes) that belong to no single cell.
@MainActor
var figureNotes: [(String, String)] = []

/// Records one cell for `--json` (a no-op for the printed tables).
@MainActor
func figure(
    _ scenario: String, _ metric: String, unit: String, implementation: String,
    subscribers: Int? = nil, elements: Int? = nil, labels: [(String, String)] = [], samples: [Double]
) {
    figureRecords.append(
        FigureRecord(
            scenario: scenario, metric: metric, unit: unit, implementation: implementation,
            subscribers: subscribers, elements: elements, labels: labels, samples: samples))
}

@MainActor
func figureNote(_ key: String, _ value: String) {
    figureNotes.removeAll { $0.0 == key }
    figureNotes.append((key, value))
}

// MARK: - JSON

func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// A number as JSON: integers without a fraction, others rounded (more decimals the smaller
/// they are) without trailing zeros; NaN and infinities (never measured) as null.
func jsonNumber(_ value: Double) -> String {
    guard value.isFinite else { return "null" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
    let magnitude = abs(value)
    let decimals = magnitude >= 1000 ? 1 : magnitude >= 1 ? 4 : magnitude >= 0.001 ? 7 : 10
    var text = fmt(value, decimals)
    while text.hasSuffix("0") { text.removeLast() }
    if text.hasSuffix(".") { text.removeLast() }
    return text
}

@MainActor
func figuresJSON(mode: String, scenarios: [String], seconds: Double, failures: [String]) -> String {
    var lines: [String] = []
    lines.append("{")
    lines.append("  \"tool\": \"compare\",")
    lines.append("  \"mode\": \(jsonString(mode)),")
    lines.append("  \"scenarios\": [\(scenarios.map(jsonString).joined(separator: ", "))],")
    lines.append("  \"seconds\": \(jsonNumber(seconds)),")
    lines.append("  \"failures\": [\(failures.map(jsonString).joined(separator: ", "))],")
    let notes = figureNotes.map { "\(jsonString($0.0)): \(jsonString($0.1))" }
    lines.append("  \"notes\": {\(notes.joined(separator: ", "))},")
    lines.append("  \"records\": [")
    for (index, record) in figureRecords.enumerated() {
        var fields = [
            "\"scenario\": \(jsonString(record.scenario))",
            "\"metric\": \(jsonString(record.metric))",
            "\"unit\": \(jsonString(record.unit))",
            "\"impl\": \(jsonString(record.implementation))",
        ]
        if let n = record.subscribers { fields.append("\"n\": \(n)") }
        if let m = record.elements { fields.append("\"m\": \(m)") }
        for (key, value) in record.labels { fields.append("\(jsonString(key)): \(jsonString(value))") }
        fields.append("\"samples\": [\(record.samples.map(jsonNumber).joined(separator: ", "))]")
        let comma = index == figureRecords.count - 1 ? "" : ","
        lines.append("    {\(fields.joined(separator: ", "))}\(comma)")
    }
    lines.append("  ]")
    lines.append("}")
    return lines.joined(separator: "\n") + "\n"
}

/// Writes the JSON to `path`; exits 2 if it cannot.
@MainActor
func writeFigures(to path: String, mode: String, scenarios: [String], seconds: Double, failures: [String]) {
    let text = figuresJSON(mode: mode, scenarios: scenarios, seconds: seconds, failures: failures)
    guard let file = fopen(path, "w") else { fail("compare: cannot write \(path) (--json)") }
    let written = text.withCString { fputs($0, file) }
    fclose(file)
    if written < 0 { fail("compare: cannot write \(path) (--json)") }
    stamp("compare: wrote the measured values to \(path)")
}
