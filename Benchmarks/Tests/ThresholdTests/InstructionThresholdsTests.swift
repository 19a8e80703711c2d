// The instruction gate's file (Thresholds/instructions.txt): what CI fails on, and what
// `--write-thresholds` writes.

import Foundation
import MulticastScenarios
import Testing

@Suite("Instruction thresholds")
struct InstructionThresholdsTests {
    static let file = """
        # a comment, kept
        mode quick
        tolerance-percent 5
        share N=1 845
        subject N=64 49

        """

    @Test("a file parses into its mode, tolerance and thresholds, and is written back the same")
    func roundTrip() throws {
        let thresholds = try InstructionThresholds.parse(Self.file).get()
        #expect(thresholds.mode == "quick")
        #expect(thresholds.tolerancePercent == 5)
        #expect(thresholds.comments == ["# a comment, kept"])
        #expect(
            thresholds.values == [
                .init(key: "share N=1", instructions: 845), .init(key: "subject N=64", instructions: 49),
            ])
        #expect(thresholds.text == Self.file)
    }

    @Test("a count within the tolerance passes; one above it fails; one not measured fails")
    func check() throws {
        let thresholds = try InstructionThresholds.parse(Self.file).get()
        let within = thresholds.check(["share N=1": 887, "subject N=64": 49])  // +4.97 %, +0 %
        #expect(within.problems.isEmpty)
        #expect(within.report.allSatisfy { $0.hasPrefix("ok") })
        let above = thresholds.check(["share N=1": 888, "subject N=64": 40])  // +5.09 %
        #expect(above.problems.count == 1)
        #expect(above.problems.first?.hasPrefix("share N=1: 888 Ir/delivery, threshold 845") == true)
        let missing = thresholds.check(["share N=1": 800])
        #expect(missing.problems == ["subject N=64: not measured (threshold 49)"])
    }

    @Test("a join-and-leave count is reported per subscriber, under the key its cell names")
    func joinLeave() throws {
        let thresholds = try InstructionThresholds.parse(
            "mode quick\ntolerance-percent 5\njoin-leave idle 2100\njoin-leave churn 11800\n"
        ).get()
        #expect(
            Scenarios.JoinLeaveCell.allCases.map(\.key) == ["join-leave idle", "join-leave churn", "join-leave resume"])
        let above = thresholds.check(["join-leave idle": 2300, "join-leave churn": 11800])
        #expect(above.problems.count == 1)
        #expect(above.problems.first?.hasPrefix("join-leave idle: 2300 Ir/subscriber, threshold 2100") == true)
        #expect(above.report.last == "ok     join-leave churn: 11800 Ir/subscriber, threshold 11800 (+0%, allowed +5%)")
    }

    @Test("a lossy send's count is reported per element sent; the lockstep cell's per delivery")
    func perElementSent() throws {
        let thresholds = try InstructionThresholds.parse(
            "mode quick\ntolerance-percent 5\nlossy-send N=64 600\nlockstep N=64 4700\n"
        ).get()
        let report = thresholds.check(["lossy-send N=64": 600, "lockstep N=64": 4700]).report
        #expect(report.first == "ok     lossy-send N=64: 600 Ir/element sent, threshold 600 (+0%, allowed +5%)")
        #expect(report.last == "ok     lockstep N=64: 4700 Ir/delivery, threshold 4700 (+0%, allowed +5%)")
    }

    @Test("writing keeps the comments and the order, rounds up, and appends new keys")
    func updated() throws {
        let thresholds = try InstructionThresholds.parse(Self.file).get()
        let new = thresholds.updated(
            with: ["subject N=64": 51.2, "share N=1": 840, "share N=64": 140.5],
            order: ["share N=1", "share N=64", "subject N=64"])
        #expect(
            new.text == """
                # a comment, kept
                mode quick
                tolerance-percent 5
                share N=1 840
                subject N=64 52
                share N=64 141

                """)
    }

    @Test("a line's note (# why) is kept on its line when the file is written, the notes aligned")
    func notes() throws {
        let file = """
            # the gate
            mode quick           # compare's mode
            tolerance-percent 5
            share N=1 845        # 01fa0c8's count
            subject N=64 49      # a # in a note is kept

            """
        let thresholds = try InstructionThresholds.parse(file).get()
        #expect(thresholds.comments == ["# the gate"])
        #expect(thresholds.mode == "quick")
        #expect(
            thresholds.values == [
                .init(key: "share N=1", instructions: 845), .init(key: "subject N=64", instructions: 49),
            ])
        #expect(
            thresholds.notes == [
                "mode": "compare's mode", "share N=1": "01fa0c8's count", "subject N=64": "a # in a note is kept",
            ])
        let new = thresholds.updated(with: ["share N=1": 850, "subject N=64": 49], order: [])
        #expect(
            new.text == """
                # the gate
                mode quick       # compare's mode
                tolerance-percent 5
                share N=1 850    # 01fa0c8's count
                subject N=64 49  # a # in a note is kept

                """)
    }

    @Test("the checked-in thresholds file parses, and --write-thresholds would write it back unchanged")
    func checkedInFile() throws {
        let benchmarks = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(
            contentsOf: benchmarks.appendingPathComponent("Thresholds/instructions.txt"), encoding: .utf8)
        let thresholds = try InstructionThresholds.parse(text).get()
        #expect(thresholds.mode == "quick")
        #expect(thresholds.tolerancePercent == 5)
        #expect(thresholds.values.allSatisfy { thresholds.notes[$0.key] != nil }, "every number says why")
        #expect(thresholds.text == text)
    }

    @Test("every count in the checked-in file is one the gate measures and holds (--quick: N = 1 and 64, --impls ours)")
    func checkedInFileHoldsTheGatesCells() throws {
        let benchmarks = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(
            contentsOf: benchmarks.appendingPathComponent("Thresholds/instructions.txt"), encoding: .utf8)
        let thresholds = try InstructionThresholds.parse(text).get()
        let held = [1, 64].flatMap { subscribers in
            Scenarios.DeliveryCell.allCases.filter {
                $0.implementation == .ours && $0.runs(subscribers: subscribers)
                    && $0.isHeldByGate(subscribers: subscribers)
            }.map { InstructionThresholds.key($0, subscribers: subscribers) }
        }
        let measured = Set(held + Scenarios.JoinLeaveCell.allCases.map(\.key))
        #expect(Set(thresholds.values.map(\.key)).subtracting(measured).isEmpty)
        // share() at N = 1 is held with the catch-up spin off, whose count no clock decides.
        #expect(thresholds.values.contains { $0.key == "share-nospin N=1" })
        #expect(!measured.contains("share N=1") && !measured.contains("share-nospin N=64"))
    }

    @Test(
        "a malformed line is refused with its number",
        arguments: ["share N=1", "share N=1 many", "mode", "share N=1 0", "share N=1 # 845"])
    func malformed(line: String) {
        let text = "mode quick\ntolerance-percent 5\n\(line)\n"
        #expect(throws: ThresholdFileError(line: 3, text: line)) { try InstructionThresholds.parse(text).get() }
    }

    @Test("a file without a mode, a tolerance or a threshold is refused")
    func incomplete() {
        #expect(throws: ThresholdFileError.self) {
            try InstructionThresholds.parse("mode quick\nshare N=1 845\n").get()
        }
        #expect(throws: ThresholdFileError.self) { try InstructionThresholds.parse("tolerance-percent 5\n").get() }
    }
}
