// Invalid policies stop the process with a message naming the parameter and the value.
// Exit tests run their body in a child process; the body captures only Codable values
// (`BadInput`), named in its capture list.

import Testing

@testable import AsyncMulticast

@Suite("Preconditions")
struct PreconditionTests {
    /// One bad input to one face, and what its precondition message must say. Codable, so
    /// that an exit test can capture it.
    enum BadInput: String, Codable, Sendable, CaseIterable, CustomTestStringConvertible {
        case boundedZero
        case boundedNegative
        case bufferingNewestNegative
        case negativeKeepAlive
        case negativeMulticastReplay
        case invalidSubscriptionPolicy
        case invalidViewPolicy
        case bufferingOldestNegative
        case negativeDrainTimeout
        case negativeStopTimeout
        case negativeSharedServiceReplay

        var testDescription: String { self.rawValue }

        /// Passes the bad input to its face (in the exit test's child process).
        func pass() async {
            switch self {
            case .boundedZero: _ = [1, 2, 3].async.share(buffering: .bounded(0))
            case .boundedNegative: _ = [1, 2, 3].async.share(buffering: .bounded(-5))
            case .bufferingNewestNegative: _ = [1, 2, 3].async.share(buffering: .bufferingNewest(-1))
            case .negativeKeepAlive: _ = [1, 2, 3].async.share(keepAlive: .milliseconds(-1))
            case .negativeMulticastReplay: _ = [1, 2, 3].async.multicast(replay: -2)
            case .invalidSubscriptionPolicy:
                _ = AsyncPassthroughSubject<Int, Never>().subscribe(buffering: .evicting(0))
            case .invalidViewPolicy: _ = AsyncPassthroughSubject<Int, Never>().buffering(.bounded(0))
            case .bufferingOldestNegative: _ = [1, 2, 3].async.share(buffering: .bufferingOldest(-1))
            case .negativeDrainTimeout:
                _ = await AsyncPassthroughSubject<Int, Never>().finish(drainingWithin: .seconds(-1))
            case .negativeStopTimeout:
                _ = [1, 2, 3].async.sharedService(started: .whileSubscribed(keepAlive: .seconds(-1)))
            case .negativeSharedServiceReplay: _ = [1, 2, 3].async.sharedService(replay: -2)
            }
        }

        /// What the precondition message names: the parameter and the value.
        var message: String {
            switch self {
            case .boundedZero: "buffering: .bounded(0) needs a limit of at least 1"
            case .boundedNegative: "buffering: .bounded(-5)"
            case .bufferingNewestNegative: "buffering: .bufferingNewest(-1) needs a limit of at least 0"
            case .negativeKeepAlive: "keepAlive must not be negative, got -0.001 seconds"
            case .negativeMulticastReplay: "multicast(replay:buffering:): replay must be at least 0, got -2"
            case .invalidSubscriptionPolicy: "subscribe(buffering:): .evicting(0)"
            case .invalidViewPolicy: "buffering(_:): .bounded(0) needs a limit of at least 1"
            case .bufferingOldestNegative: "buffering: .bufferingOldest(-1) needs a limit of at least 0"
            case .negativeDrainTimeout: "finish(drainingWithin:): timeout must not be negative, got -1.0 seconds"
            case .negativeStopTimeout: "keepAlive must not be negative, got -1.0 seconds"
            case .negativeSharedServiceReplay: "sharedService(replay:): replay must be at least 0, got -2"
            }
        }
    }

    @Test(
        "a bad input stops the process with a message naming the parameter and the value", arguments: BadInput.allCases)
    func badInputStopsWithItsMessage(_ input: BadInput) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [input] in
            await input.pass()
        }
        expectMessage(result, contains: input.message)
    }

    @Test func sharedServiceRunTwiceAtOnce() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (stream, _) = AsyncStream.makeStream(of: Int.self)
            let service = stream.sharedService(started: .eagerly)
            let first = Task { await service.run() }
            while service.storage.state.withLock({ if case .notStarted = $0.machine.host { true } else { false } }) {
                await Task.yield()
            }
            await service.run()
            first.cancel()
        }
        expectMessage(result, contains: "run(): this shared service is already running in another task")
    }

    /// The limits that are allowed do not stop anything.
    @Test(arguments: [
        SharedBufferingPolicy.bounded(1), .bufferingNewest(0), .bufferingOldest(0), .unbounded,
    ])
    func smallestValidLimitsAreAccepted(policy: SharedBufferingPolicy) async throws {
        try await withTimeout {
            let shared = [1, 2, 3].async.share(buffering: policy)
            var iterator = shared.makeAsyncIterator()
            #expect(await iterator.next() != nil || policy.dropLimit == 0)
        }
    }
}
