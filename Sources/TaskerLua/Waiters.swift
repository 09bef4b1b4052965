import TaskerCore

/// `tasker.all`: every value in input order; the first failure cancels the
/// unfinished others and is raised.
final class AllWaiter: TaskWaiter {
    unowned let runtime: LuaRuntime
    let fiber: Fiber
    let ids: [TaskID]
    private var remaining: Int
    private var done = false

    init(runtime: LuaRuntime, fiber: Fiber, ids: [TaskID]) {
        self.runtime = runtime
        self.fiber = fiber
        self.ids = ids
        self.remaining = ids.count
    }

    func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        guard engine.state(id) == .succeeded else {
            done = true
            runtime.cancelOthers(ids, except: id, reason: "tasker.all: task '\(engine.name(id))' did not succeed")
            runtime.enqueue(.resume(fiber, .luaFailureOf(id)))
            return
        }
        remaining -= 1
        if remaining == 0 {
            done = true
            runtime.enqueue(.resume(fiber, .values(ids, compact: false)))
        }
    }
}

/// `tasker.any`: the first to succeed wins and the others are cancelled; if
/// all fail, a `dependency` error lists them.
final class AnyWaiter: TaskWaiter {
    unowned let runtime: LuaRuntime
    let fiber: Fiber
    let ids: [TaskID]
    private var remaining: Int
    private var done = false

    init(runtime: LuaRuntime, fiber: Fiber, ids: [TaskID]) {
        self.runtime = runtime
        self.fiber = fiber
        self.ids = ids
        self.remaining = ids.count
    }

    func taskFinished(_ id: TaskID, engine: Engine) {
        guard !done else { return }
        if engine.state(id) == .succeeded {
            done = true
            runtime.cancelOthers(ids, except: id, reason: "tasker.any: task '\(engine.name(id))' succeeded first")
            runtime.enqueue(.resume(fiber, .anyWinner(id)))
            return
        }
        remaining -= 1
        if remaining == 0 {
            done = true
            runtime.enqueue(.resume(fiber, .failure(anyFailure(ids, engine: engine))))
        }
    }
}

func anyFailure(_ ids: [TaskID], engine: Engine) -> TaskFailure {
    let parts = ids.map { "'\(engine.name($0))' (\(engine.outcome($0)?.failure?.description ?? "?"))" }
    return TaskFailure(.dependency, "tasker.any: every task failed: " + parts.joined(separator: ", "))
}

/// `tasker.some`: after all finished, the values of those that succeeded.
final class SomeWaiter: TaskWaiter {
    unowned let runtime: LuaRuntime
    let fiber: Fiber
    let ids: [TaskID]
    private var remaining: Int

    init(runtime: LuaRuntime, fiber: Fiber, ids: [TaskID]) {
        self.runtime = runtime
        self.fiber = fiber
        self.ids = ids
        self.remaining = ids.count
    }

    func taskFinished(_ id: TaskID, engine: Engine) {
        remaining -= 1
        if remaining == 0 { runtime.enqueue(.resume(fiber, .values(ids, compact: true))) }
    }
}

extension LuaRuntime {
    /// Cancels the unfinished handles among `ids` (from the drain loop, not
    /// inside the engine callout that reported the finish).
    func cancelOthers(_ ids: [TaskID], except winner: TaskID, reason: String) {
        enqueue(.call { [unowned self] in
            for id in ids where id != winner && !self.engine.isFinished(id) {
                self.engine.cancel(id, reason: reason)
            }
        })
    }
}
