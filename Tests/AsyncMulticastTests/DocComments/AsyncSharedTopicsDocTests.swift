// Checks the doc-comment examples of Sources/AsyncMulticast/Topics/AsyncSharedTopics.swift:
// each test contains one verbatim, with its own lines marked `// (test only)`, and checks the
// output the example states (DocCommentStubs.swift describes the conventions).

import AsyncMulticast
import Testing

private struct Message: Sendable {  // (test only)
    let room: String  // (test only)
    let text: String  // (test only)
}  // (test only)

private struct Tick: Sendable {  // (test only)
    let symbol: String  // (test only)
    let price: Double  // (test only)
}  // (test only)

@Suite("Doc comments: AsyncSharedTopics", .timeLimit(.minutes(3)))
struct AsyncSharedTopicsDocTests {
    // AsyncSharedTopics
    @Test func theType() async {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)

        let (feed, chat) = AsyncStream.makeStream(of: Message.self)
        let messages = feed.share(by: \.room)
        let alice = messages.subscribe(to: "swift")
        let bob = messages.subscribe(to: "rust")
        chat.yield(Message(room: "swift", text: "actors are great"))
        chat.yield(Message(room: "rust", text: "so is ownership"))
        chat.finish()
        for await message in alice { print("alice:", message.text) }  // alice: actors are great
        for await message in bob { print("bob:", message.text) }  // bob: so is ownership

        #expect(printed.lines == ["alice: actors are great", "bob: so is ownership"])
    }

    // share(by:replay:buffering:keepAlive:clock:), with a key path and with a closure
    @Test func shareBy() async {
        let (chatFeed, chat) = AsyncStream.makeStream(of: Message.self)  // (test only)
        let (prices, ticker) = AsyncStream.makeStream(of: Tick.self)  // (test only)

        let messages = chatFeed.share(by: \.room)
        let ticks = prices.share(by: { $0.symbol }, replay: 1, buffering: .bufferingNewest(16))

        let room = messages.subscribe(to: "swift")  // (test only)
        let screen = ticks.subscribe(to: "AAPL")  // (test only)
        chat.yield(Message(room: "rust", text: "elsewhere"))  // (test only)
        chat.yield(Message(room: "swift", text: "here"))  // (test only)
        chat.finish()  // (test only)
        ticker.yield(Tick(symbol: "MSFT", price: 1))  // (test only)
        ticker.yield(Tick(symbol: "AAPL", price: 231.5))  // (test only)
        ticker.finish()  // (test only)
        #expect(await room.reduce(into: []) { $0.append($1.text) } == ["here"])  // (test only)
        #expect(await screen.reduce(into: []) { $0.append($1.price) } == [231.5])  // (test only)
    }

    // subscribe(to:buffering:), subscriberCount(of:), isLive(_:), keyCount, waitUntilFreed(_:)
    @Test func aRoomsLife() async throws {
        let printed = PrintedLines()  // (test only)
        @Sendable func print(_ items: Any...) { printed.record(items) }  // (test only)
        let (feed, chat) = AsyncStream.makeStream(of: Message.self)  // (test only)
        let messages = feed.share(by: \.room)  // (test only)

        let client = messages.subscribe(to: "swift", buffering: .evicting(4096))
        Task { for await message in client { print(message.text) } }

        print(messages.subscriberCount(of: "swift"))  // presence in the room
        print("open rooms:", messages.keyCount)
        chat.yield(Message(room: "swift", text: "hello"))  // (test only)
        chat.finish()  // (test only)
        try await messages.waitUntilFreed("swift")
        print(messages.isLive("swift"))  // false, unless someone joined since
        if !messages.isLive("swift") { print("nobody in the room") }

        #expect(printed.lines.contains("hello"))  // (test only)
        let shown = printed.lines.filter { $0 != "hello" }  // (test only)
        #expect(shown == ["1", "open rooms: 1", "false", "nobody in the room"])  // (test only)
    }
}
