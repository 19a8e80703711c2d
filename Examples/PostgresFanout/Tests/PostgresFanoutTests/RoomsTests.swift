import AsyncMulticast
import Synchronization
import Testing

@testable import PostgresFanout

/// Rooms without PostgreSQL: how a room travels in a payload, and the names the session sends
/// the status to.
struct RoomsTests {
    @Test func aPayloadCarriesItsRoomAndItsIDBeforeTheMessage() throws {
        let payload = RoomPayload.encode(room: "red", id: 42, message: "a\ttab and\nlines")
        #expect(payload == "red\t42\ta\ttab and\nlines")
        let decoded = try #require(RoomPayload.decode(payload))
        #expect(decoded.room == "red" && decoded.id == 42 && decoded.message == "a\ttab and\nlines")
        let empty = try #require(RoomPayload.decode("red\t7\t"))
        #expect(empty.room == "red" && empty.id == 7 && empty.message == "")
        // Not from this example: no tab, no valid room before it, or no id from 1 after it.
        for payload in [
            "no tab at all", "\tno room", "not a room\t1\tmessage", "red\tmessage", "red\t\tmessage",
            "red\t0\tmessage", "red\t-1\tmessage", "red\t1x\tmessage",
        ] {
            #expect(RoomPayload.decode(payload) == nil, "\(payload)")
        }
    }

    @Test func aRoomIsAShortNameSafeInAPath() {
        for room in ["red", "room-1", "a.b_c", "Z9", String(repeating: "r", count: 64)] {
            #expect(RoomPayload.isValidRoom(room), "\(room)")
        }
        for room in ["", "with space", "tab\there", "slash/", "ünï", "%41", String(repeating: "r", count: 65)] {
            #expect(!RoomPayload.isValidRoom(room), "\(room)")
        }
        // The room, the longest id (Int64.max: 19 digits) and two tabs.
        #expect(RoomPayload.maximumMessageBytes(room: "red") == 7999 - 3 - 19 - 2)
    }

    @Test func roomNamesForgetTheRoomsThatAreNoLongerLive() {
        let live = Mutex<Set<String>>(["red", "blue"])
        let names = RoomNames()
        names.track { room in live.withLock { $0.contains(room) } }
        names.insert("red")
        names.insert("blue")
        names.insert("red")
        #expect(Set(names.live()) == ["red", "blue"])

        // blue's last subscriber left: the next read forgets it.
        _ = live.withLock { $0.remove("blue") }
        #expect(names.live() == ["red"])
        #expect(names.count == 1)

        // Joined again (the subscriber first, then the name): sent to again.
        _ = live.withLock { $0.insert("blue") }
        names.insert("blue")
        #expect(Set(names.live()) == ["red", "blue"])
    }

    @Test func roomNamesFollowTheTopicsOfOneUpstream() async throws {
        let (upstream, feed) = AsyncStream.makeStream(of: RoomEvent.self)
        defer { feed.finish() }
        let topics = upstream.share(by: \.room, buffering: .evicting(16))
        let names = RoomNames()
        names.track { topics.isLive($0) }

        var subscription: SharedSubscription<RoomEvent, Never>? = topics.subscribe(to: "red")
        names.insert("red")
        #expect(names.live() == ["red"])
        #expect(subscription != nil)

        subscription = nil  // the client left
        try await topics.waitUntilFreed("red")
        #expect(names.live() == [])
        #expect(names.count == 0)
    }
}
