// What an exit test of a precondition checks once the child process stopped: its message.

import Testing

/// Checks that the stopped process printed `expected`. The precondition message is only
/// printed in debug builds (`-Onone`); in release builds a precondition failure traps
/// without it, so only the exit (checked by the `#expect(processExitsWith:)` that returned
/// `result`) is checked there.
func expectMessage(
    _ result: ExitTest.Result?, contains expected: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let result else { return }  // the exit test itself already failed
    #if DEBUG
        let output = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(output.contains(expected), "stderr: \(output)", sourceLocation: sourceLocation)
    #endif
}
