// Invalid policies stop the process with a message naming the parameter and the value.
// Exit tests run their body in a child process; the body cannot capture anything.

import Testing

@testable import AsyncMulticast

@Suite("Preconditions")
struct PreconditionTests {
    @Test func boundedZero() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(buffering: .bounded(0))
        }
        expectMessage(result, contains: "buffering: .bounded(0) needs a limit of at least 1")
    }

    @Test func boundedNegative() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(buffering: .bounded(-5))
        }
        expectMessage(result, contains: "buffering: .bounded(-5)")
    }

    @Test func bufferingNewestNegative() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(buffering: .bufferingNewest(-1))
        }
        expectMessage(result, contains: "buffering: .bufferingNewest(-1) needs a limit of at least 0")
    }

    @Test func negativeKeepAlive() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(keepAlive: .milliseconds(-1))
        }
        expectMessage(result, contains: "keepAlive must not be negative, got -0.001 seconds")
    }

    @Test func negativeMulticastReplay() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.multicast(replay: -2)
        }
        expectMessage(result, contains: "multicast(replay:buffering:): replay must be at least 0, got -2")
    }

    @Test func invalidSubscriptionPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncPassthroughSubject<Int, Never>().subscribe(buffering: .evicting(0))
        }
        expectMessage(result, contains: "subscribe(buffering:): .evicting(0)")
    }

    @Test func invalidViewPolicy() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = AsyncPassthroughSubject<Int, Never>().buffering(.bounded(0))
        }
        expectMessage(result, contains: "buffering(_:): .bounded(0) needs a limit of at least 1")
    }

    @Test func bufferingOldestNegative() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.share(buffering: .bufferingOldest(-1))
        }
        expectMessage(result, contains: "buffering: .bufferingOldest(-1) needs a limit of at least 0")
    }

    @Test func negativeDrainTimeout() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = await AsyncPassthroughSubject<Int, Never>().finish(drainingWithin: .seconds(-1))
        }
        expectMessage(result, contains: "finish(drainingWithin:): timeout must not be negative, got -1.0 seconds")
    }

    @Test func negativeStopTimeout() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.sharedService(started: .whileSubscribed(keepAlive: .seconds(-1)))
        }
        expectMessage(result, contains: "keepAlive must not be negative, got -1.0 seconds")
    }

    @Test func negativeSharedServiceReplay() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = [1, 2, 3].async.sharedService(replay: -2)
        }
        expectMessage(result, contains: "sharedService(replay:): replay must be at least 0, got -2")
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
