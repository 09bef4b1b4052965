import TaskerCore

/// Waits on other tasks: registered with the engine as a waiter of each,
/// removed again if the fiber is closed first. The waiting task lends its
/// slot meanwhile (see `Engine.lendSlot`).
class TasksWait: FiberWait, TaskWaiter {
    let ids: [TaskID]
    unowned var runtime: LuaRuntime!
    var fiber: Fiber!
    var done = false

    init(ids: [TaskID]) { self.ids = ids }

    var lendsSlot: Bool { true }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        self.fiber = fiber
        self.runtime = runtime
        for id in ids { runtime.engine.addWaiter(id, self) }
    }

    func cancel() {
        done = true
        for id in ids { runtime?.engine.removeWaiter(id, self) }
    }

    func finish(_ result: Resumption) {
        done = true
        runtime.finishWait(fiber, result)
    }

    func taskFinished(_ id: TaskID, engine: Engine) {}
}

/// `h:await()` / `h:result()`.
final class AwaitWait: TasksWait {
    let mode: AwaitMode

    init(id: TaskID, mode: AwaitMode) {
        self.mode = mode
        super.init(ids: [id])
    }

    override func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        finish(.taskResult(id, mode))
    }
}

/// `tasker.all`: every value in input order; the first failure cancels the
/// unfinished others and is raised.
final class AllWaiter: TasksWait {
    private lazy var remaining = ids.count

    override func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        guard engine.state(id) == .succeeded else {
            runtime.cancelOthers(ids, except: id, reason: "tasker.all: task '\(engine.name(id))' did not succeed")
            finish(.luaFailureOf(id))
            return
        }
        remaining -= 1
        if remaining == 0 { finish(.values(ids, compact: false)) }
    }
}

/// `tasker.any`: the first to succeed wins and the others are cancelled; if
/// all fail, a `dependency` error lists them.
final class AnyWaiter: TasksWait {
    private lazy var remaining = ids.count

    override func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        if engine.state(id) == .succeeded {
            runtime.cancelOthers(ids, except: id, reason: "tasker.any: task '\(engine.name(id))' succeeded first")
            finish(.anyWinner(id))
            return
        }
        remaining -= 1
        if remaining == 0 { finish(.failureOfTasks(anyFailure(ids, engine: engine), naming: ids[0])) }
    }
}

func anyFailure(_ ids: [TaskID], engine: Engine) -> TaskFailure {
    let parts = ids.map { "'\(engine.name($0))' (\(engine.outcome($0)?.failure?.description ?? "?"))" }
    return TaskFailure(.dependency, "tasker.any: no task succeeded: " + parts.joined(separator: ", "))
}

/// `tasker.some`: after all finished, the values of those that succeeded.
final class SomeWaiter: TasksWait {
    private lazy var remaining = ids.count

    override func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        remaining -= 1
        if remaining == 0 { finish(.values(ids, compact: true)) }
    }
}
