import Testing

@testable import PostgresFanout

/// The local history without PostgreSQL: what it keeps, and what makes it forget.
struct RecentMessagesTests {
    @Test func aLiveRoomKeepsItsLatestMessagesInOrder() {
        let recent = RecentMessages(capacity: 4)
        for id in Int64(1)...10 { recent.record(id, "m\(id)", in: "red", isLive: true) }
        #expect(recent.messages(of: "red").map(\.id) == [7, 8, 9, 10])
        #expect(recent.messages(of: "red").map(\.text) == ["m7", "m8", "m9", "m10"])
        #expect(recent.messages(of: "blue").isEmpty)
    }

    @Test func aMessageOfARoomWithoutSubscribersForgetsTheRoom() {
        let recent = RecentMessages(capacity: 4)
        recent.record(1, "m1", in: "red", isLive: true)
        recent.record(2, "m2", in: "blue", isLive: true)
        // Nobody in red when m3 arrived: red's history would have a gap, so it goes.
        recent.record(3, "m3", in: "red", isLive: false)
        #expect(recent.messages(of: "red").isEmpty)
        #expect(recent.messages(of: "blue").map(\.id) == [2])
        // Live again: it starts over from the next message.
        recent.record(4, "m4", in: "red", isLive: true)
        #expect(recent.messages(of: "red").map(\.id) == [4])
        #expect(recent.roomCount == 2)
    }

    @Test func aLostConnectionForgetsEveryRoom() {
        let recent = RecentMessages(capacity: 4)
        recent.record(1, "m1", in: "red", isLive: true)
        recent.record(2, "m2", in: "blue", isLive: true)
        recent.forgetAll()
        #expect(recent.roomCount == 0)
        #expect(recent.messages(of: "red").isEmpty)
    }

    @Test func roomsThatAreNoLongerLiveAreForgottenWhenTheLiveOnesAreRead() {
        let recent = RecentMessages(capacity: 4)
        recent.record(1, "m1", in: "red", isLive: true)
        recent.record(2, "m2", in: "blue", isLive: true)
        // red's last subscriber left, and no message of red came since.
        recent.forgetAll(but: ["blue"])
        #expect(recent.roomCount == 1)
        #expect(recent.messages(of: "red").isEmpty)
        #expect(recent.messages(of: "blue").map(\.id) == [2])
    }

    @Test func aCapacityOfZeroKeepsNothing() {
        let recent = RecentMessages(capacity: 0)
        recent.record(1, "m1", in: "red", isLive: true)
        #expect(recent.messages(of: "red").isEmpty)
        #expect(recent.roomCount == 0)
    }
}
