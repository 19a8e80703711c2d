// The join-and-leave part of `--instructions`: what one subscriber costs to join and leave
// (delivery-cell `idle COUNT` and `churn COUNT`, `Scenarios.JoinLeaveCell`), counted like the
// deliveries, so that the instruction gate holds the subscriber lifecycle too.

import MulticastScenarios

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    /// Where delivery-cell runs under callgrind: the tool, the cell binary and the folder for
    /// its outputs (kept when `keep`, for `--profiles`).
    struct CallgrindRunner {
        var valgrind: String
        var cellBinary: String
        var folder: String
        var keep: Bool

        /// One run of delivery-cell with `arguments`: the process's instruction total and the
        /// seconds it took; `nil` total (and a failure recorded under `label`) if it failed.
        @MainActor
        func total(_ arguments: [String], name: String, label: String) -> (total: Int?, seconds: Double) {
            let output = "\(self.folder)/\(name).out"
            let log = "\(self.folder)/\(name).log"
            let started = monotonicNanos()
            let status = spawnAndWait(
                [self.valgrind, "--tool=callgrind", "--callgrind-out-file=\(output)", self.cellBinary] + arguments,
                output: log)
            let seconds = Double(monotonicNanos() - started) / 1e9
            let total = readCallgrindTotal(output)
            guard let total, status == 0 else {
                record(
                    label,
                    [
                        "valgrind exited with status \(status.map(String.init) ?? "n/a") (log: \(log))\n"
                            + logExcerpt(log)
                    ])
                return (nil, seconds)
            }
            if !self.keep {
                unlink(output)
                unlink(log)
            }
            return (total, seconds)
        }

        /// `total` at each of `sizes` in turn (`arguments`, `name` and `label` of the size): every
        /// total, or `nil` once a run failed; and the seconds the runs took.
        @MainActor
        func pair(
            _ sizes: [Int], _ arguments: (Int) -> [String], name: (Int) -> String, label: (Int) -> String
        ) -> (totals: [Int]?, seconds: Double) {
            var totals: [Int] = []
            var seconds = 0.0
            for size in sizes {
                let run = self.total(arguments(size), name: name(size), label: label(size))
                seconds += run.seconds
                guard let total = run.total else { return (nil, seconds) }
                totals.append(total)
            }
            return (totals, seconds)
        }
    }

    extension Options {
        /// The two subscriber counts of each join-and-leave cell: instructions per subscriber =
        /// (Ir(larger) − Ir(smaller)) / (larger − smaller).
        func joinLeaveSizes(_ cell: Scenarios.JoinLeaveCell) -> (smaller: Int, larger: Int) {
            switch (cell, mode) {
            case (.idle, .smoke): (1_000, 2_000)
            case (.idle, .quick): (10_000, 50_000)
            case (.idle, .full): (20_000, 100_000)
            case (.churn, .smoke): (100, 200)
            case (.churn, .quick): (1_000, 5_000)
            case (.churn, .full): (2_000, 10_000)
            case (.resume, .smoke): (100, 200)
            case (.resume, .quick): (1_000, 5_000)
            case (.resume, .full): (2_000, 10_000)
            }
        }
    }

    /// Counts each join-and-leave cell `options.instructionRepetitions` times, prints them and
    /// records them as figures; returns the median per thresholds key.
    @MainActor
    func countJoinLeave(_ options: Options, runner: CallgrindRunner) -> [(key: String, median: Double?)] {
        stamp(
            """

            Joining and leaving: valgrind --tool=callgrind delivery-cell idle|churn|resume COUNT, twice per pair.
            idle: COUNT subscribers of share(buffering: .bounded(64)) join and leave without reading (as in memory);
            churn: COUNT short subscribers join, take 3 elements and leave, 4 at a time, beside a long-lived
            reader (as in churn); resume: COUNT subscribers, one after another, resume into a full history of
            10,000 (subscribe(after:) a position in its second half), read one element and leave.
            Ir/subscriber = (Ir(COUNT2) - Ir(COUNT1)) / (COUNT2 - COUNT1).
            """)
        var medians: [(key: String, median: Double?)] = []
        for cell in Scenarios.JoinLeaveCell.allCases {
            let sizes = options.joinLeaveSizes(cell)
            var values: [Double] = []
            for repetition in 0..<options.instructionRepetitions {
                let (totals, seconds) = runner.pair(
                    [sizes.smaller, sizes.larger], { [cell.rawValue, "\($0)"] },
                    name: { "callgrind.join-leave.\(cell.rawValue).\($0).\(repetition + 1)" },
                    label: { "instructions \(cell.key) COUNT=\($0)" })
                guard let counts = totals else { continue }
                let value = Double(counts[1] - counts[0]) / Double(sizes.larger - sizes.smaller)
                values.append(value)
                stamp(
                    "  \(cell.key): COUNT=\(sizes.smaller) \(grouped(counts[0])) Ir, COUNT=\(sizes.larger) "
                        + "\(grouped(counts[1])) Ir: \(fmt(value, 0)) Ir/subscriber (\(fmt(seconds, 1)) s)")
            }
            figure(
                "instructions", "ir-join-leave", unit: "instructions/subscriber", implementation: cell.rawValue,
                labels: [("count1", "\(sizes.smaller)"), ("count2", "\(sizes.larger)")], samples: values)
            medians.append((cell.key, median(values)))
        }
        return medians
    }
#endif
