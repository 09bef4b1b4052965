import CLua
import CLuaShim
import TaskerCore

/// The `ctx` a task body receives: a small userdata (task id, attempt,
/// token) whose fields are computed when read, so an attempt that never
/// looks at them costs one allocation.
enum ContextModule {
    static let metatableName = "tasker.context"

    struct Payload {
        var task: TaskID
        var attempt: Int
        var token: UInt64
    }

    static let methods: [(String, tasker_SwiftFunction)] = [
        ("cancelled", { L in LuaRuntime.from(L!).contextCancelled(L!) }),
        ("progress", { L in LuaRuntime.from(L!).contextProgress(L!) }),
    ]

    static let index: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        lua_pushvalue(L, 2)
        lua_rawget(L, tasker_upvalueindex(2))
        if lua_type(L, -1) != LUA_TNIL { return 1 }
        guard let c = rt.context(L, 1), let key = LuaStack(L).string(2) else { return 1 }
        switch key {
        case "id": lua_pushinteger(L, lua_Integer(c.task))
        case "name": LuaStack(L).push(rt.engine.name(c.task))
        case "attempt": lua_pushinteger(L, lua_Integer(rt.claimedContext(c.task).map { $0.attempt + c.attempt - 1 } ?? c.attempt))
        case "args": rt.pushPart(L, rt.refs.args, c.task)
        case "tags": rt.pushPart(L, rt.refs.tags, c.task)
        case "idempotency_key": LuaStack(L).push(rt.claimedContext(c.task)?.key ?? rt.idempotencyKey(c.task, in: L))
        default: lua_pushnil(L)
        }
        return 1
    }

    static let newindex: tasker_SwiftFunction = { L in
        let L = L!
        return LuaRuntime.from(L).usage(L, "ctx is read-only (tried to set '\(LuaStack(L).describe(2))'); keep your own state in locals or ctx.args")
    }

    static func install(_ rt: LuaRuntime) {
        rt.refs.contextMeta = rt.makeMetatable(metatableName, index: index, methods: methods,
                                               metamethods: [("__newindex", newindex)])
    }
}

extension LuaRuntime {
    func pushContext(_ co: OpaquePointer, _ run: AttemptRun) {
        let p = tasker_newuserdata(co, MemoryLayout<ContextModule.Payload>.size)!
        p.storeBytes(of: ContextModule.Payload(task: run.task, attempt: run.attempt, token: run.token),
                     as: ContextModule.Payload.self)
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.contextMeta))
        lua_setmetatable(co, -2)
    }

    /// On a worker: the coordinator's attempt number and key for a claimed
    /// attempt's task.
    func claimedContext(_ id: TaskID) -> DefineModule.ClaimedContext? {
        let claimed = module(DefineModule.self).claimed
        return claimed.isEmpty ? nil : claimed[id]
    }

    func context(_ L: OpaquePointer, _ i: Int32) -> ContextModule.Payload? {
        guard let p = luaL_testudata(L, i, ContextModule.metatableName) else { return nil }
        return p.load(as: ContextModule.Payload.self)
    }

    /// Pushes table[id] of a per-task table, creating `{}` on first use so
    /// that every read sees (and may change) the same table.
    func pushPart(_ L: OpaquePointer, _ table: Int32, _ id: TaskID) {
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
        lua_rawgeti(L, -1, lua_Integer(id))
        if lua_type(L, -1) != LUA_TTABLE {
            tasker_pop(L, 1)
            lua_createtable(L, 0, 0)
            lua_pushvalue(L, -1)
            lua_rawseti(L, -3, lua_Integer(id))
        }
        tasker_remove(L, -2)
    }

    func contextProgress(_ L: OpaquePointer) -> Int32 {
        guard let c = context(L, 1) else {
            return usage(L, "calling 'ctx:progress' on bad self (ctx expected, got \(LuaStack(L).got(1, expected: "ctx"))); use ctx:progress(fraction)")
        }
        let s = LuaStack(L)
        guard let fraction = s.number(2), fraction.isFinite else {
            return argError(L, "ctx:progress", 1, "finite number", index: 2)
        }
        var message: String?
        if !s.isNoneOrNil(3) {
            guard let m = s.string(3) else { return argError(L, "ctx:progress", 2, "string", index: 3) }
            message = m
        }
        engine.progress(c.task, fraction: min(1, max(0, fraction)), message: message)
        return 0
    }

    func contextCancelled(_ L: OpaquePointer) -> Int32 {
        guard let c = context(L, 1) else {
            return usage(L, "calling 'ctx:cancelled' on bad self (ctx expected, got \(LuaStack(L).got(1, expected: "ctx"))); use ctx:cancelled()")
        }
        let f = fibersByTask[c.task]
        let live = f != nil && f!.run?.token == c.token && !f!.isAborted
            && engine.isCurrent(AttemptRun(task: c.task, attempt: c.attempt, token: c.token))
        lua_pushboolean(L, live ? 0 : 1)
        return 1
    }
}
