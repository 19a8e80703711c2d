// Every deprecated spelling of AsyncMulticast, used as 0.1.0 code used it. Each line that
// uses one ends with `// deprecated: NEW`, NEW being the name its warning must give as the
// replacement (`renamed to 'NEW'`, which is what Xcode's fix-it writes); .ci/deprecation-check.sh
// checks that those lines, and only those, warn, and that the program then prints "ok".
import AsyncMulticast

// The protocol AsyncSharedSequence, renamed AsyncSubscribableSequence: as an existential, an
// opaque type, a generic constraint (both spellings), a where clause and an extension.
struct Dashboard {
    let prices: any AsyncSharedSequence<Int, Never>  // deprecated: AsyncSubscribableSequence
}

func count(of feed: some AsyncSharedSequence<Int, Never>) -> Int {  // deprecated: AsyncSubscribableSequence
    feed.subscriberCount
}

func countAll<Feed: AsyncSharedSequence>(_ feeds: [Feed]) -> Int {  // deprecated: AsyncSubscribableSequence
    feeds.reduce(0) { $0 + $1.subscriberCount }
}

func latest<Feed>(of feed: Feed) -> Feed.Element? where Feed: AsyncSharedSequence & AsyncReplayingSequence {  // deprecated: AsyncSubscribableSequence
    feed.replayCache.last
}

extension AsyncSharedSequence {  // deprecated: AsyncSubscribableSequence
    var isWatched: Bool { subscriberCount > 0 }
}

@main
struct DeprecatedSpellings {
    static func main() async {
        var failures: [String] = []
        func check(_ condition: Bool, _ what: String) {
            if !condition { failures.append(what) }
        }

        // AsyncReplaySubject(bufferSize:…), renamed init(replay:buffering:clock:).
        let messages = AsyncReplaySubject<Int, Never>(bufferSize: 2)  // deprecated: init(replay:buffering:clock:)
        let bounded = AsyncReplaySubject<Int, Never>(bufferSize: 1, buffering: .bounded(4))  // deprecated: init(replay:buffering:clock:)
        let clocked = AsyncReplaySubject<Int, Never>(bufferSize: 3, buffering: .unbounded, clock: ContinuousClock())  // deprecated: init(replay:buffering:clock:)
        for value in 1...3 {
            messages.send(value)
            bounded.send(value)
            clocked.send(value)
        }
        check(messages.replayCache == [2, 3], "AsyncReplaySubject(bufferSize: 2) replays the latest 2")
        check(bounded.replayCache == [3], "AsyncReplaySubject(bufferSize: 1, buffering:) replays the latest 1")
        check(clocked.replayCache == [1, 2, 3], "AsyncReplaySubject(bufferSize: 3, buffering:, clock:) replays 3")

        // SharingStarted.whileSubscribed(stopTimeout:…), renamed whileSubscribed(keepAlive:replayExpiration:).
        let window = SharingStarted.whileSubscribed(stopTimeout: .seconds(5))  // deprecated: whileSubscribed(keepAlive:replayExpiration:)
        let both = SharingStarted.whileSubscribed(stopTimeout: .seconds(1), replayExpiration: .seconds(2))  // deprecated: whileSubscribed(keepAlive:replayExpiration:)
        check(window == .whileSubscribed(keepAlive: .seconds(5)), "whileSubscribed(stopTimeout:) is whileSubscribed(keepAlive:)")
        check(
            both == .whileSubscribed(keepAlive: .seconds(1), replayExpiration: .seconds(2)),
            "whileSubscribed(stopTimeout:replayExpiration:) is whileSubscribed(keepAlive:replayExpiration:)")
        let service = AsyncStream<Int> { $0.finish() }.sharedService(replay: 1, started: window)
        check(service.started == window, "a service takes the deprecated strategy")

        // The protocol's old name, through the declarations above.
        let dashboard = Dashboard(prices: messages)
        var reader = messages.makeAsyncIterator()
        check(count(of: messages) == 1, "some AsyncSharedSequence<Int, Never>")
        check(dashboard.prices.subscriberCount == 1, "any AsyncSharedSequence<Int, Never>")
        check(countAll([messages, clocked]) == 1, "<Feed: AsyncSharedSequence>")
        check(latest(of: messages) == 3, "where Feed: AsyncSharedSequence")
        check(messages.isWatched && !clocked.isWatched, "extension AsyncSharedSequence")
        messages.finish()
        var read: [Int] = []
        while let value = await reader.next() { read.append(value) }
        check(read == [2, 3], "a subscriber of AsyncReplaySubject(bufferSize: 2) reads the latest 2, then the end")

        if failures.isEmpty {
            print("ok: every deprecated spelling behaves as its new name")
        } else {
            for failure in failures { print("FAILED: \(failure)") }
        }
    }
}
