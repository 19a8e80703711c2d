// Checks the doc-comment examples of Sources/AsyncMulticast/Topics/AsyncSubjectTopics.swift
// and AsyncSubjectTopics+Lifetime.swift: each test contains one verbatim, with its own lines
// marked `// (test only)`, and checks the output the example states (DocCommentStubs.swift
// describes the conventions).

import AsyncMulticast
import Testing

@Suite("Doc comments: AsyncSubjectTopics", .timeLimit(.minutes(3)))
struct AsyncSubjectTopicsDocTests {
    enum FeedError: Error { case upstreamLost }  // (test only)

    // AsyncSubjectTopics
    @Test func theType() async {
        let (printed, print) = PrintedLines.recorder()  // (test only)

        let rooms = AsyncSubjectTopics<String, String, Never>()
        let alice = rooms.subscribe(to: "swift")
        let bob = rooms.subscribe(to: "rust")
        rooms.send("actors are great", to: "swift")
        rooms.send("so is ownership", to: "rust")
        rooms.finish()
        for await message in alice { print("alice:", message) }  // alice: actors are great
        for await message in bob { print("bob:", message) }  // bob: so is ownership

        #expect(printed.lines == ["alice: actors are great", "bob: so is ownership"])
    }

    // init(buffering:keepAlive:clock:)
    @Test func passthroughInit() async {
        let notifications = AsyncSubjectTopics<Int, String, Never>(buffering: .evicting(256))
        let inbox = notifications.subscribe(to: 42)  // user 42
        notifications.send("you have mail", to: 42)

        notifications.finish()  // (test only)
        #expect(await inbox.reduce(into: []) { $0.append($1) } == ["you have mail"])  // (test only)
    }

    // init(replay:buffering:keepAlive:clock:)
    @Test func replayInit() async {
        let prices = AsyncSubjectTopics<String, Double, Never>(replay: 1, keepAlive: .seconds(60))
        prices.send(231.5, to: "AAPL")
        let screen = prices.subscribe(to: "AAPL")  // first gets 231.5

        prices.finish()  // (test only)
        #expect(await screen.reduce(into: []) { $0.append($1) } == [231.5])  // (test only)
    }

    // subscribe(to:buffering:), send(_:to:), subscriberCount(of:), keyCount, isLive(_:),
    // waitUntilFreed(_:) and finish(), one room's life
    @Test func aRoomsLife() async throws {
        let (printed, print) = PrintedLines.recorder()  // (test only)
        let rooms = AsyncSubjectTopics<String, String, Never>()  // (test only)

        let client = rooms.subscribe(to: "swift", buffering: .evicting(4096))
        Task { for await message in client { print(message) } }

        print(rooms.subscriberCount(of: "swift"))  // presence in the room
        print("open rooms:", rooms.keyCount)
        rooms.send("hello", to: "swift")  // only the subscribers of "swift" get it
        await printed.wait(for: "hello")  // [test gate]
        #expect(printed.lines == ["1", "open rooms: 1", "hello"])  // (test only)

        rooms.finish()  // the server shuts down: every client's stream ends

        try await rooms.waitUntilFreed("swift")
        print(rooms.isLive("swift"))  // false, unless someone joined since
        if !rooms.isLive("swift") { print("nobody in the room") }

        #expect(printed.lines == ["1", "open rooms: 1", "hello", "false", "nobody in the room"])
    }

    // fail(_:)
    @Test func fail() async {
        let feeds = AsyncSubjectTopics<String, Int, FeedError>()  // (test only)
        let reader = feeds.subscribe(to: "a")  // (test only)

        feeds.fail(FeedError.upstreamLost)

        await #expect(throws: FeedError.self) { for try await _ in reader {} }  // (test only)
    }
}
