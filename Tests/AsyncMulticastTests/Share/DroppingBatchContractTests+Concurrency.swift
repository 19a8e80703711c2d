// The dropping-batch contract under concurrency (DroppingBatchContractTests.swift): senders,
// readers that send, parked senders and a `share()` upstream race the tail the iterators check
// their batches against, so these rounds check what holds in every interleaving.

import Testing

@testable import AsyncMulticast

extension DroppingBatchContractTests {
    /// A reader of a concurrent round: a positioned subscriber (`.bufferingNewest(n)`, or the
    /// lossless ones that tell which element each position holds), a lag-reporting one, or a
    /// plain iterator.
    enum Kind: Sendable, CustomStringConvertible {
        case positioned(SharedBufferingPolicy)
        case events(SharedBufferingPolicy)
        case plain(SharedBufferingPolicy)

        var description: String {
            switch self {
            case .positioned(let policy): return "subscribe(after: nil, \(policy))"
            case .events(let policy): return "events(\(policy))"
            case .plain(let policy): return "plain(\(policy))"
            }
        }
    }

    /// What a reader of a concurrent round received: each element with its position (a
    /// positioned reader's) or `nil`, and each gap's bounds or count.
    struct Received: Sendable {
        var elements: [(value: Int, position: Int?)] = []
        var gaps: [(after: Int?, before: Int?, count: Int)] = []
        /// Events in order: `true` an element, `false` a gap.
        var order: [Bool] = []
    }

    static let readers: [Kind] = [
        .positioned(.unbounded), .positioned(.bounded(2)),
        .positioned(.bufferingNewest(2)), .positioned(.bufferingNewest(3)), .positioned(.bufferingNewest(4)),
        .positioned(.bufferingNewest(9)), .positioned(.bufferingNewest(130)),
        .events(.bufferingNewest(2)), .events(.bufferingNewest(5)), .plain(.bufferingNewest(3)),
        .plain(.bufferingNewest(8)),
    ]

    /// Three tasks send concurrently, half the rounds with `send(waitingForRoom:)` (parked on
    /// the `.bounded(2)` subscriber and let in by its reads); every reader also sends a few of
    /// its own between its first reads. In every interleaving: each position is received or
    /// inside exactly one gap, each received element is the one the lossless subscriber got at
    /// that position, so no element is duplicated, reordered or received after being counted
    /// missed; plain and lag-reporting readers get an ordered subsequence, and elements plus
    /// missed add up to everything sent.
    @Test(
        "concurrent senders and readers: every position received once or bounded by a gap, the same element everywhere")
    func concurrentRoundsKeepTheContract() async throws {
        try await withProgressWatchdog("concurrent rounds") { progress in
            for round in 0..<16 {
                await Self.concurrentRound(waitingForRoom: round % 2 == 1, perSender: 150 + 37 * round)
                progress.tick()
            }
        }
    }

    static func concurrentRound(waitingForRoom: Bool, perSender: Int) async {
        let subject = AsyncPassthroughSubject<Int, Never>(buffering: .unbounded)
        let (joined, ownSendsDone, start) = (Tally(), Tally(), Latch())
        let ownSends = 12
        var tasks: [Task<Received, Never>] = []
        for (k, kind) in Self.readers.enumerated() {
            tasks.append(
                Task {
                    await Self.readAll(kind, of: subject, joined: joined, start: start) { own in
                        guard own < ownSends else { return false }
                        subject.send((10 + k) * senderStride + own)
                        if own == ownSends - 1 { ownSendsDone.add() }
                        return true
                    }
                })
        }
        await joined.wait(for: Self.readers.count, "readers joined")
        start.release()
        await sendConcurrently(senders: 3, perSender: perSender, waitingForRoom: waitingForRoom) { value, waits in
            if waits { await subject.send(waitingForRoom: value) } else { subject.send(value) }
        }
        await ownSendsDone.wait(for: Self.readers.count, "readers' own sends")
        subject.finish()
        var results: [Received] = []
        for task in tasks { results.append(await task.value) }
        let total = 3 * perSender + ownSends * Self.readers.count
        let context = "waitingForRoom \(waitingForRoom), \(total) sent"

        // The lossless subscribers: every element, at its position.
        let truth = results[0].elements.map(\.value)
        #expect(truth.count == total, "\(context): the .unbounded subscriber")
        #expect(results[0].elements.map(\.position) == Array(0..<truth.count).map { Optional($0) })
        #expect(results[1].elements.map(\.value) == truth, "\(context): the .bounded(2) subscriber")
        var positionOf: [Int: Int] = [:]
        for (position, value) in truth.enumerated() { positionOf[value] = position }
        #expect(positionOf.count == total, "\(context): values are unique")

        for (k, kind) in Self.readers.enumerated().dropFirst(2) {
            Self.expectContract(results[k], kind, positionOf: positionOf, total: total, context)
        }
    }

    /// Joins `sequence` as `kind` says, then, once `start` is released, reads until the end.
    /// `sendOwn(i)` is called before the first read and after each event, with the count of
    /// the sends it made so far, and says whether it sent one: the reader's own sends between
    /// its reads. Its own element is its newest, so a read after one never waits.
    static func readAll(
        _ kind: Kind, of sequence: some AsyncSubscribableSequence<Int, Never>, joined: Tally, start: Latch,
        sendOwn: (Int) -> Bool = { _ in false }
    ) async -> Received {
        var received = Received()
        var own = 0
        func sendOwnNow() { if sendOwn(own) { own += 1 } }
        switch kind {
        case .positioned(let policy):
            var iterator = sequence.subscribe(after: nil, buffering: policy).makeAsyncIterator()
            joined.add()
            await start.wait()  // all joined at position 0
            sendOwnNow()
            while let event = await iterator.next() {
                switch event {
                case .element(let value, let position):
                    received.elements.append((value, position))
                    received.order.append(true)
                case .gap(let after, let before):
                    received.gaps.append((after, before, before - after - 1))
                    received.order.append(false)
                case .evicted: break
                }
                sendOwnNow()
            }
        case .events(let policy):
            var iterator = sequence.events(buffering: policy).makeAsyncIterator()
            joined.add()
            await start.wait()
            sendOwnNow()
            while let event = await iterator.next() {
                switch event {
                case .element(let value):
                    received.elements.append((value, nil))
                    received.order.append(true)
                case .missed(let count):
                    received.gaps.append((nil, nil, count))
                    received.order.append(false)
                case .evicted: break
                }
                sendOwnNow()
            }
        case .plain(let policy):
            var iterator = sequence.buffering(policy).makeAsyncIterator()
            joined.add()
            await start.wait()
            sendOwnNow()
            while let value = await iterator.next() {
                received.elements.append((value, nil))
                received.order.append(true)
                sendOwnNow()
            }
        }
        return received
    }

    /// `share()` over an upstream that produces as fast as it is pulled: the upstream task
    /// appends while the lossy subscribers hold batches, which no subscriber's task orders.
    @Test("share(): an upstream producing while readers hold batches keeps the contract")
    func sharedUpstreamKeepsTheContract() async throws {
        try await withProgressWatchdog("shared rounds") { progress in
            for round in 0..<8 {
                let total = 400 + 150 * round
                let (stream, input) = AsyncStream.makeStream(of: Int.self)
                for value in 0..<total { input.yield(value) }
                input.finish()
                let shared = stream.share(buffering: .unbounded)
                let (joined, start) = (Tally(), Latch())
                let kinds: [Kind] = [.positioned(.unbounded)] + Self.readers.dropFirst(2)
                var tasks: [Task<Received, Never>] = []
                for kind in kinds {
                    tasks.append(Task { await Self.readAll(kind, of: shared, joined: joined, start: start) })
                }
                await joined.wait(for: kinds.count, "readers joined")
                start.release()
                var results: [Received] = []
                for task in tasks { results.append(await task.value) }
                #expect(results[0].elements.map(\.value) == Array(0..<total), "the .unbounded subscriber")
                let positionOf = Dictionary(uniqueKeysWithValues: (0..<total).map { ($0, $0) })
                for (k, kind) in kinds.enumerated().dropFirst() {
                    Self.expectContract(
                        results[k], kind, positionOf: positionOf, total: total, "share(), \(total) produced")
                }
                progress.tick()
            }
        }
    }

    /// What a lossy reader of a concurrent round must have received, `positionOf` telling
    /// where each element was produced (from a lossless subscriber), `total` of them.
    static func expectContract(
        _ got: Received, _ kind: Kind, positionOf: [Int: Int], total: Int, _ context: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let missed = got.gaps.reduce(0) { $0 + $1.count }
        if case .plain = kind {
            #expect(got.gaps.isEmpty && got.elements.count <= total, "\(context), \(kind)")
        } else {
            #expect(got.elements.count + missed == total, "\(context), \(kind): elements + missed")
        }
        // An ordered subsequence of what the lossless subscriber received: no duplicate,
        // nothing reordered.
        let positions = got.elements.map { positionOf[$0.value] ?? -1 }
        #expect(!positions.contains(-1), "\(context), \(kind): an element never sent")
        #expect(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 }, "\(context), \(kind): order")
        guard case .positioned = kind else { return }
        // Exact bounds: walking the events, each continues where the previous one ended.
        var next = 0
        var (e, g) = (0, 0)
        for isElement in got.order {
            if isElement {
                let (value, position) = got.elements[e]
                e += 1
                #expect(
                    position == next && positions[e - 1] == next,
                    "\(context), \(kind): \(value) at \(String(describing: position)), expected position \(next)")
                next += 1
            } else {
                let gap = got.gaps[g]
                g += 1
                #expect(
                    gap.after == next - 1 && gap.count > 0, "\(context), \(kind): gap \(gap) after position \(next - 1)"
                )
                next = (gap.before ?? next)
            }
        }
        #expect(next == total, "\(context), \(kind): positions covered")
    }
}
