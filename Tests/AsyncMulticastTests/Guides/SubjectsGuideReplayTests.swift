// Checks the sections of Guides/Subjects.md on AsyncReplaySubject and send(contentsOf:): each
// example verbatim, with a test-local `print` that records its lines (the per-example way of
// PrintedLines.swift), and the output the guide shows.

import AsyncMulticast
import Testing

// Guides/Subjects.md: AsyncReplaySubject
@Test("Guides/Subjects.md: AsyncReplaySubject", .timeLimit(.minutes(3)))
func subjectsGuideAsyncReplaySubject() async {
    let (printed, print) = PrintedLines.recorder()

    let chat = AsyncReplaySubject<String, Never>(replay: 2)
    chat.send("alice: hi")
    chat.send("bob: hello")
    chat.send("alice: how are you?")
    var newcomer = chat.makeAsyncIterator()  // joins after three messages
    chat.send("bob: fine")
    chat.finish()
    while let message = await newcomer.next() { print(message) }
    print(chat.replayCache)

    #expect(
        printed.lines == [
            "bob: hello",
            "alice: how are you?",
            "bob: fine",
            #"["alice: how are you?", "bob: fine"]"#,
        ])
}

// Guides/Subjects.md: Feeding a sequence into a subject: send(contentsOf:)
@Test("Guides/Subjects.md: Feeding a sequence into a subject: send(contentsOf:)", .timeLimit(.minutes(3)))
func subjectsGuideSendContentsOf() async {
    let (printed, print) = PrintedLines.recorder()

    let log = AsyncPassthroughSubject<String, Never>()
    var reader = log.makeAsyncIterator()
    let (lines, input) = AsyncStream.makeStream(of: String.self)
    input.yield("one")
    input.yield("two")
    input.finish()
    await log.send(contentsOf: lines)  // returns when `lines` ends; `log` stays open
    log.send("three")
    log.finish()
    while let line = await reader.next() { print(line) }

    #expect(printed.lines == ["one", "two", "three"])
}
