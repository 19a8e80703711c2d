// A stand-in for a SwiftUI view's `.task { … }`, so that the guides' view models are tested
// where SwiftUI does not exist (Linux): what a view does with its model's sequence is what
// its `.task` does, and that is a task with a lifecycle.

/// What SwiftUI does with a view's `.task { action }`: starts `action` in a task of its own,
/// on the main actor, when the view appears; cancels that task when the view disappears;
/// starts `action` again, in a new task, when the view appears again.
///
/// `disappear()` also waits for the task to end (SwiftUI does not wait): the test then looks
/// at what the view left behind, such as the subscriber count of the sequence it iterated.
/// It drops the task handle as well, as SwiftUI does, so that nothing of a view's task
/// outlives its disappearance but what the code under test keeps.
@MainActor
final class ViewStandIn {
    private let action: @MainActor () async -> Void
    private var task: Task<Void, Never>?

    /// A view whose `.task` modifier runs `action`.
    init(task action: @escaping @MainActor () async -> Void) {
        self.action = action
    }

    /// Whether the view is on screen (its task was started and not cancelled since).
    var isVisible: Bool { self.task != nil }

    /// The view appears: its `.task` action starts, in a new task.
    func appear() {
        precondition(self.task == nil, "the view is already on screen")
        let action = self.action
        self.task = Task { await action() }
    }

    /// The view disappears: its task is cancelled; returns once the task has ended.
    func disappear() async {
        guard let task = self.task else { preconditionFailure("the view is not on screen") }
        self.task = nil
        task.cancel()
        await task.value
    }
}
