// BlockingGate (Support/BlockingGate.swift): the one way a test may block a thread. It lets a
// wait through once per open, gives up after its hang guard, and reports a second thread
// blocked while another gate blocks one. The blocked threads here are Dispatch's, never the
// cooperative pool's, so these tests block nothing that other tests need. They count blocked
// threads process-wide, so they run with the other blocking tests, serialized.

import Dispatch
import Testing

@testable import AsyncMulticast

extension HeavyAndTimingSensitive {
    @Suite("Hang guards: BlockingGate", .timeLimit(.minutes(3)))
    struct BlockingGateTests {
        /// Calls `gate.wait()` on a Dispatch thread; the signal carries what it returned.
        private func waitOnDispatchThread(_ gate: BlockingGate) -> Signal<Bool> {
            let returned = Signal<Bool>()
            DispatchQueue.global().async { returned.send(gate.wait("the Dispatch thread's wait")) }
            return returned
        }

        @Test("an open before or after the wait lets exactly one wait through")
        func opensLetWaitsThrough() async throws {
            let gate = BlockingGate()
            gate.open()
            #expect(gate.wait(), "opened before: returns at once")
            let returned = self.waitOnDispatchThread(gate)
            try await waitUntil("the thread to block") { BlockingGate.blockedThreads == 1 }
            gate.open()
            #expect(await returned.next("the wait") == true)
            #expect(BlockingGate.blockedThreads == 0)
        }

        @Test("a wait that is never opened gives up after its hang guard, with an issue")
        func hangGuardFires() {
            let gate = BlockingGate(hangGuard: .milliseconds(10))
            withKnownIssue("the hang guard fires") {
                #expect(gate.wait("never opened") == false)
            }
            #expect(BlockingGate.blockedThreads == 0)
        }

        @Test("a second thread blocked while another gate blocks one is reported at once")
        func secondBlockedThreadIsReported() async throws {
            let first = BlockingGate()
            let returned = self.waitOnDispatchThread(first)
            try await waitUntil("the first thread to block") { BlockingGate.blockedThreads == 1 }
            let second = BlockingGate()
            second.open()  // so that this wait reports, then returns without blocking
            withKnownIssue("two blocked threads") {
                #expect(second.wait("the second gate"))
            }
            first.open()
            #expect(await returned.next("the first wait") == true)
        }
    }
}
