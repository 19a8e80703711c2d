/// Carries a value that is not `Sendable` into a `@Sendable` closure or another task.
///
/// OpenCombine predates Swift Concurrency: its publishers, subscribers and cancellables
/// declare no `Sendable` conformance although Combine's contract lets them be used from any
/// thread (a publisher may be subscribed to, and a subscriber called, from whichever thread
/// the upstream runs on, one call at a time). The bridges in this module rely on that
/// contract and on nothing more, and say so where they use this box.
struct UncheckedSendable<Value>: @unchecked Sendable {
    var value: Value

    init(_ value: Value) {
        self.value = value
    }
}
