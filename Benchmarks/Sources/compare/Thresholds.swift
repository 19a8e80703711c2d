// The instruction gate's file, read and written for `compare --instructions`
// (`--check-thresholds`, `--write-thresholds`); its format and checks are
// `InstructionThresholds`, in MulticastScenarios.

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    /// Writes `text` to `path`, replacing it; whether it worked.
    func writeFile(_ path: String, _ text: String) -> Bool {
        guard let file = fopen(path, "w") else { return false }
        defer { fclose(file) }
        let bytes = Array(text.utf8)
        return fwrite(bytes, 1, bytes.count, file) == bytes.count
    }

    /// After an instructions run: checks the medians against `options.checkThresholds`
    /// (a failure recorded for each count above its threshold), and writes them into
    /// `options.writeThresholds`.
    @MainActor
    func applyThresholds(_ options: Options, medians: [String: Double], order: [String]) {
        func load(_ path: String) -> InstructionThresholds? {
            guard let text = readFile(path) else { return nil }
            switch InstructionThresholds.parse(text) {
            case .success(let thresholds): return thresholds
            case .failure(let error): fail("compare: \(path): \(error)")
            }
        }
        if let path = options.checkThresholds {
            guard let thresholds = load(path) else { fail("compare: cannot read the thresholds file \(path)") }
            guard thresholds.mode == options.mode.rawValue else {
                fail("compare: \(path) holds --\(thresholds.mode) counts; run with --\(thresholds.mode)")
            }
            let (report, problems) = thresholds.check(medians)
            stamp(
                "\nInstruction gate (\(path); the medians above against its thresholds):\n"
                    + report.joined(separator: "\n"))
            record("instruction gate", problems)
            if !problems.isEmpty {
                stamp(
                    """
                    A count rose above its threshold. If the change is meant to cost that, write the new counts:
                      swift run -c release compare --instructions --\(options.mode.rawValue) --impls ours --write-thresholds \(path)
                    then update that count's note (# why) in the file and say why in the commit.
                    """)
            }
        }
        if let path = options.writeThresholds {
            let old =
                load(path) ?? InstructionThresholds(mode: options.mode.rawValue, tolerancePercent: 5, values: [])
            var new = old.updated(with: medians, order: order)
            new.mode = options.mode.rawValue
            guard writeFile(path, new.text) else { fail("compare: cannot write \(path)") }
            stamp("\nWrote the measured medians to \(path).")
        }
    }
#endif
