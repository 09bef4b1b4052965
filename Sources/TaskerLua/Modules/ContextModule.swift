import CLua
import CLuaShim
import TaskerCore

/// The `ctx` a task body receives: a small userdata (task id, attempt,
/// token) whose fields are computed when read, so an attempt that never
/// looks at them costs one allocation.
final class ContextModule: LuaModule {
    static let metatableName = "tasker.context"
    /// The runtime keeps this module (a strong reference back would be a
    /// cycle). Checked: cheap since nothing refers weakly to the runtime or
    /// its engines on the per-task path (a weak reference gives an object a
    /// side table, and each retain of it then takes the slow path).
    unowned let runtime: LuaRuntime

    struct Payload {
        var task: TaskID
        var attempt: Int
        var token: UInt64
    }

    init(runtime: LuaRuntime) { self.runtime = runtime }

    func install(in runtime: LuaRuntime) {
        runtime.refs.contextMeta = makeMetatable(
            Self.metatableName, index: { L in ContextModule.this(L!).index(L!) },
            methods: [("cancelled", { L in ContextModule.this(L!).cancelled(L!) }),
                      ("progress", { L in ContextModule.this(L!).progress(L!) })],
            metamethods: [("__newindex", { L in
                let L = L!
                return ContextModule.this(L).runtime.usage(
                    L, "ctx is read-only (tried to set '\(LuaStack(L).describe(2))'); keep your own state in locals or ctx.args")
            })],
            in: runtime.L)
    }

    /// Pushes the `ctx` of attempt `run` onto `co` (`metatable`: the
    /// runtime's `refs.contextMeta`, which `install` set; static, so that
    /// starting an attempt touches no module).
    static func push(_ co: OpaquePointer, _ run: AttemptRun, metatable: Int32) {
        LuaStack(co).pushUserdata(Payload(task: run.task, attempt: run.attempt, token: run.token), metatable: metatable)
    }

    private static func context(_ L: OpaquePointer, _ i: Int32) -> Payload? {
        LuaStack(L).userdata(i, metatableName, as: Payload.self)
    }

    /// Fields are looked up in the methods table (upvalue 3) first.
    private func index(_ L: OpaquePointer) -> Int32 {
        lua_pushvalue(L, 2)
        lua_rawget(L, tasker_upvalueindex(3))
        if lua_type(L, -1) != LUA_TNIL { return 1 }
        let rt = runtime
        guard let c = Self.context(L, 1), let key = LuaStack(L).string(2) else { return 1 }
        switch key {
        case "id": lua_pushinteger(L, lua_Integer(c.task))
        case "name": LuaStack(L).push(rt.engine.name(c.task))
        case "attempt": lua_pushinteger(L, lua_Integer(claimed(c.task).map { $0.attempt + c.attempt - 1 } ?? c.attempt))
        case "args": rt.pushPart(L, rt.refs.args, c.task)
        case "tags": rt.pushPart(L, rt.refs.tags, c.task)
        case "idempotency_key": LuaStack(L).push(claimed(c.task)?.key ?? rt.idempotencyKey(c.task, in: L))
        default: lua_pushnil(L)
        }
        return 1
    }

    /// On a worker: the coordinator's attempt number and key for a claimed
    /// attempt's task.
    private func claimed(_ id: TaskID) -> DefineModule.ClaimedContext? {
        let claimed = runtime.module(DefineModule.self).claimed
        return claimed.isEmpty ? nil : claimed[id]
    }

    private func progress(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        guard let c = Self.context(L, 1) else {
            return rt.usage(L, "calling 'ctx:progress' on bad self (ctx expected, got \(LuaStack(L).got(1, expected: "ctx"))); use ctx:progress(fraction)")
        }
        let s = LuaStack(L)
        guard let fraction = s.number(2), fraction.isFinite else {
            return rt.argError(L, "ctx:progress", 1, "finite number", index: 2)
        }
        var message: String?
        if !s.isNoneOrNil(3) {
            guard let m = s.string(3) else { return rt.argError(L, "ctx:progress", 2, "string", index: 3) }
            message = m
        }
        rt.engine.progress(c.task, fraction: min(1, max(0, fraction)), message: message)
        return 0
    }

    private func cancelled(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        guard let c = Self.context(L, 1) else {
            return rt.usage(L, "calling 'ctx:cancelled' on bad self (ctx expected, got \(LuaStack(L).got(1, expected: "ctx"))); use ctx:cancelled()")
        }
        let f = rt.driver.fibersByTask[c.task]
        let live = f != nil && f!.run?.token == c.token && !f!.isAborted
            && rt.engine.isCurrent(AttemptRun(task: c.task, attempt: c.attempt, token: c.token))
        lua_pushboolean(L, live ? 0 : 1)
        return 1
    }
}
