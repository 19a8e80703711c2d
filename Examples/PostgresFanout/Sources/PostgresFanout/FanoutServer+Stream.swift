import AsyncMulticast
import Hummingbird

extension FanoutServer {
    /// Writes the room's feed to one client until the client leaves (a write fails) or is
    /// evicted (see ``evicted(_:_:)``).
    ///
    /// The client sees `event: ready` once the instance's LISTEN connection is in effect for it
    /// (what is committed after that reaches it), an event with `id:` and `data:` lines for
    /// each message of its room, and, if the LISTEN connection is lost, `event: interrupted`
    /// then `event: resumed` when a new one listens. The status and the heartbeats come
    /// through the room's subscription, in order with its messages: the session sends them to
    /// every room (see ``RoomNames``).
    ///
    /// What the client missed comes from the table (``EventHistory``), at the two moments the
    /// instance cannot otherwise know it: at `ready` for a client that came back with the id
    /// of the last message it saw (`lastEventID`), and at `resumed` for a client that has
    /// seen a message (what was committed while the LISTEN connection was down). The client
    /// joined its room before either, so a message is in the table or arrives through the
    /// subscription, or both: a message whose id is not above the last one written is one
    /// written already, and is skipped. A client that has seen no message yet misses what is
    /// committed while the connection is down, as before.
    func stream(
        _ subscription: SharedSubscription<RoomEvent, Never>, of room: String, after lastEventID: Int64?,
        to writer: inout any ResponseBodyWriter, connection: ClientConnection
    ) async throws {
        let instance = self.configuration.instanceName
        // The id of the last message the client has: every message up to it was written.
        var last = lastEventID
        var generation = self.feed.listeningGeneration
        if generation != 0 {
            try await writer.write(ServerSentEvent.event("ready", data: instance))
            try await self.catchUp(room, after: &last, to: &writer)
        } else {
            try await writer.write(ServerSentEvent.comment("waiting for the LISTEN connection"))
        }
        for await event in subscription.events {
            switch event {
            case .element(let routed):
                switch routed.event {
                case .message where generation == 0:
                    // Not ready yet: the LISTEN connection was lost after this client joined,
                    // and this message was routed before the loss. Written now, it would move
                    // `last` past the messages before it; the catch-up at `ready` writes it
                    // from the table, after them.
                    break
                case .message(let id, _) where last.map({ id <= $0 }) ?? false:
                    break  // written already, from the table
                case .message(let id, let text):
                    try await writer.write(ServerSentEvent.event(id: id, data: text))
                    last = id
                case .heartbeat:
                    try await writer.write(ServerSentEvent.comment("heartbeat"))
                case .listening(let new) where new > generation:
                    // The first connection this client sees listening, or a reconnection.
                    try await writer.write(
                        ServerSentEvent.event(generation == 0 ? "ready" : "resumed", data: instance))
                    generation = new
                    try await self.catchUp(room, after: &last, to: &writer)
                case .listening:
                    break  // already announced when this client joined
                case .interrupted(let lost) where lost == generation:
                    try await writer.write(ServerSentEvent.event("interrupted", data: instance))
                case .interrupted:
                    break
                }
            case .missed:
                break  // only dropping policies report gaps; `.evicting` evicts instead
            case .evicted(let eviction):
                // This client fell too far behind: it reconnects with the id of the last
                // message it got, and resumes from there. (If its connection is not
                // writable, `evicted` closes it and this write fails.)
                self.evicted(connection, eviction)
                try await writer.write(ServerSentEvent.event("evicted", data: instance))
                return
            }
        }
    }

    /// Writes the messages of `room` after `last` that the client missed, and moves `last` to
    /// the last one written. Nothing if `last` is `nil` (nothing to resume from).
    ///
    /// From the local history (``RecentMessages``) alone when it holds message `last`: it then
    /// holds every message of the room after it, with no gap. Otherwise the part before the
    /// history's oldest message (everything, if it holds none) comes from the table first,
    /// page by page, then the history. An id past the room's newest (made up, or from a table
    /// since recreated) says nothing of what the client has: it becomes `nil`, and the client
    /// goes on as a new one does, from now. (Brought down to the newest instead, it would
    /// hide a message committed between the join and the reading of the newest.)
    func catchUp(_ room: String, after last: inout Int64?, to writer: inout any ResponseBodyWriter) async throws {
        guard let from = last else { return }
        let recent = self.feed.recentMessages(of: room)
        var after = from
        if let held = recent.firstIndex(where: { $0.id == from }) {
            self.countCatchUp(fromMemory: true)
            for message in recent[recent.index(after: held)...] {
                try await writer.write(ServerSentEvent.event(id: message.id, data: message.text))
                after = message.id
            }
            last = after
            return
        }
        self.countCatchUp(fromMemory: false)
        while true {
            let page = try await self.history.messages(
                of: room, after: after, before: recent.first?.id, on: self.notifier)
            for message in page {
                try await writer.write(ServerSentEvent.event(id: message.id, data: message.text))
                after = message.id
            }
            if page.count < EventHistory.pageSize { break }
        }
        for message in recent where message.id > after {
            try await writer.write(ServerSentEvent.event(id: message.id, data: message.text))
            after = message.id
        }
        if after != from {
            last = after
        } else if from > (try await self.history.newestID(of: room, on: self.notifier)) {
            last = nil
        }
    }
}
