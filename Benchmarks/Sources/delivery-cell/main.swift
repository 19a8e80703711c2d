// delivery-cell: runs exactly one cost-per-delivery cell and exits, for counting its
// instructions under valgrind (`compare --instructions` runs it twice per cell, with
// two element counts, so that start-up and tear-down cancel out).
//
//     .build/release/delivery-cell share|share-nospin|subject|opencombine|base|… N M   (usage lists them all)
//     .build/release/delivery-cell idle|churn COUNT        (joining and leaving, COUNT subscribers)
//     .build/release/delivery-cell topics-keyed|topics-subjects|topics-filtered KEYS PER_KEY M
//                                                         (fan-out by key: the topics scenario's cells)
//     strip --strip-debug -o /tmp/cell .build/release/delivery-cell   # valgrind 3.19 cannot read DWARF 5
//     valgrind --tool=callgrind /tmp/cell share 64 2000
//
// `main` is synchronous on purpose: the async work runs in a detached task while the
// main thread blocks on a semaphore. (valgrind 3.19 dies of an internal SIGSEGV on a
// program with an async top-level `main`, whose main thread the concurrency runtime parks
// in its drain loop.) Prints one line; exits 1 if a subscriber saw a wrong sequence, 2 on
// bad arguments.

import Dispatch
import MulticastScenarios
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes a line to stderr (the C global `stderr` is not concurrency-safe in Swift 6).
func printError(_ message: String) {
    let line = message + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

func usage() -> Never {
    let cells = Scenarios.DeliveryCell.allCases.map(\.rawValue).joined(separator: "|")
    let joinLeave = Scenarios.JoinLeaveCell.allCases.map(\.rawValue).joined(separator: "|")
    let topics = TopicCells.Way.allCases.map { "topics-\($0.rawValue)" }.joined(separator: "|")
    printError(
        """
        usage: delivery-cell \(cells) SUBSCRIBERS ELEMENTS
               delivery-cell \(joinLeave) COUNT
               delivery-cell \(topics) KEYS PER_KEY ELEMENTS
        """)
    exit(2)
}

/// Runs `body` in a detached task while the main thread waits (see above), and returns its result.
func runDetached<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let outcome = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    // Detached: a task created here would otherwise inherit the main actor, whose thread is
    // about to block.
    Task.detached {
        let value = await body()
        outcome.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return outcome.withLock { $0 }!
}

let arguments = CommandLine.arguments
// delivery-cell topics-keyed|topics-subjects|topics-filtered KEYS PER_KEY ELEMENTS: a cell of
// the "topics" scenario (fan-out by key), for callgrind's instructions per delivery.
if arguments.count == 5, arguments[1].hasPrefix("topics-"),
    let way = TopicCells.Way(rawValue: String(arguments[1].dropFirst("topics-".count)))
{
    guard let keys = Int(arguments[2]), keys > 0, let perKey = Int(arguments[3]), perKey > 0,
        let elements = Int(arguments[4]), elements >= 0
    else { usage() }
    let tally = runDetached { await TopicCells.run(way, keys: keys, perKey: perKey, elements: elements) }
    print(
        "\(arguments[1]) \(keys) keys × \(perKey): \(tally.deliveries) deliveries to \(tally.subscribers) subscribers")
    for failure in tally.failures { printError("delivery-cell: \(failure)") }
    exit(tally.ok && tally.subscribers == keys * perKey ? 0 : 1)
}
if arguments.count == 3, let cell = Scenarios.JoinLeaveCell(rawValue: arguments[1]) {
    guard let count = Int(arguments[2]), count > 0 else { usage() }
    let failures = runDetached { await cell.run(count: count) }
    print("\(cell.rawValue): \(count) subscribers joined and left")
    for failure in failures { printError("delivery-cell: \(failure)") }
    exit(failures.isEmpty ? 0 : 1)
}
guard arguments.count == 4,
    let cell = Scenarios.DeliveryCell(rawValue: arguments[1]),
    let subscribers = Int(arguments[2]), subscribers > 0,
    let elements = Int(arguments[3]), elements >= 0
else { usage() }

let tally = runDetached { await Scenarios.deliveryCell(cell, subscribers: subscribers, elements: elements) }
print(
    "\(cell.rawValue) N=\(subscribers) M=\(elements): \(tally.deliveries) deliveries to \(tally.subscribers) subscribers"
)
guard tally.ok, tally.subscribers == subscribers else {
    for failure in tally.failures { printError("delivery-cell: \(failure)") }
    if tally.subscribers != subscribers {
        printError("delivery-cell: \(tally.subscribers) of \(subscribers) subscribers finished")
    }
    exit(1)
}
