import CLua
import CLuaShim
import Logging
import TaskerCore

/// Task handles: full userdata holding the task id, with `id`, `name`,
/// `attempts` fields and the methods the README lists under Tasks.
enum HandleModule {
    static let metatableName = "tasker.handle"

    static let methods: [(String, tasker_SwiftFunction)] = [
        ("await", { L in LuaRuntime.from(L!).handleAwait(L!, mode: .raising) }),
        ("cancel", { L in LuaRuntime.from(L!).handleCancel(L!) }),
        ("on", { L in LuaRuntime.from(L!).handleOn(L!) }),
        ("result", { L in LuaRuntime.from(L!).handleAwait(L!, mode: .result) }),
        ("start", { L in LuaRuntime.from(L!).handleStart(L!) }),
        ("pause", { L in LuaRuntime.from(L!).handlePause(L!, pause: true) }),
        ("resume", { L in LuaRuntime.from(L!).handlePause(L!, pause: false) }),
        ("state", { L in LuaRuntime.from(L!).handleState(L!) }),
    ]

    /// `h.key`: a method from the methods table (upvalue), or a field.
    static let index: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        lua_pushvalue(L, 2)
        lua_rawget(L, tasker_upvalueindex(2))
        if lua_type(L, -1) != LUA_TNIL { return 1 }
        guard let id = rt.handleID(L, 1), let key = LuaStack(L).string(2) else { return 1 }
        switch key {
        case "id": lua_pushinteger(L, lua_Integer(id))
        case "name": LuaStack(L).push(rt.engine.name(id))
        case "attempts": lua_pushinteger(L, lua_Integer(rt.engine.attempts(id)))
        default: lua_pushnil(L)
        }
        return 1
    }

    static let tostring: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        guard let id = rt.handleID(L, 1) else { return 0 }
        LuaStack(L).push("task \(id) '\(rt.engine.name(id))' (\(rt.engine.state(id).rawValue))")
        return 1
    }

    static let eq: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        lua_pushboolean(L, rt.handleID(L, 1) == rt.handleID(L, 2) ? 1 : 0)
        return 1
    }

    static let newindex: tasker_SwiftFunction = { L in
        let L = L!
        return LuaRuntime.from(L).usage(L, "task handles are read-only (tried to set '\(LuaStack(L).describe(2))')")
    }

    static func install(_ rt: LuaRuntime) {
        rt.refs.handleMeta = rt.makeMetatable(metatableName, index: index, methods: methods,
                                              metamethods: [("__eq", eq), ("__newindex", newindex), ("__tostring", tostring)])
    }
}

extension LuaRuntime {
    func pushHandle(_ L: OpaquePointer, _ id: TaskID) {
        let p = tasker_newuserdata(L, MemoryLayout<Int>.size)!
        p.storeBytes(of: id, as: Int.self)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.handleMeta))
        lua_setmetatable(L, -2)
    }

    /// The handle in `self` position, or a usage error status.
    func selfHandle(_ L: OpaquePointer, _ method: String) -> Result<TaskID, RaiseStatus> {
        if let id = handleID(L, 1) { return .success(id) }
        return .failure(RaiseStatus(code: usage(L, "calling 'h:\(method)' on bad self (task handle expected, got \(LuaStack(L).got(1, expected: "task handle"))); use h:\(method)(...)")))
    }

    func handleState(_ L: OpaquePointer) -> Int32 {
        switch selfHandle(L, "state") {
        case .failure(let e): return e.code
        case .success(let id):
            LuaStack(L).push(engine.state(id).rawValue)
            return 1
        }
    }

    func handleStart(_ L: OpaquePointer) -> Int32 {
        switch selfHandle(L, "start") {
        case .failure(let e): return e.code
        case .success(let id):
            engine.start(id)
            return 0
        }
    }

    /// `h:pause()` / `h:resume()`; no effect on a final task.
    func handlePause(_ L: OpaquePointer, pause: Bool) -> Int32 {
        switch selfHandle(L, pause ? "pause" : "resume") {
        case .failure(let e): return e.code
        case .success(let id):
            let work = workOf(id)
            if pause { pauseTask(work) } else { resumeTask(work) }
            return 0
        }
    }

    func handleCancel(_ L: OpaquePointer) -> Int32 {
        switch selfHandle(L, "cancel") {
        case .failure(let e): return e.code
        case .success(let id):
            let s = LuaStack(L)
            var reason: String?
            if !s.isNoneOrNil(2) {
                guard let r = s.string(2) else { return argError(L, "h:cancel", 1, "string", index: 2) }
                reason = r
            }
            engine.cancel(id, reason: reason)
            return 0
        }
    }

    func handleAwait(_ L: OpaquePointer, mode: AwaitMode) -> Int32 {
        let method = mode == .raising ? "await" : "result"
        switch selfHandle(L, method) {
        case .failure(let e): return e.code
        case .success(let id):
            if let outcome = engine.outcome(id) {
                // Already over: answered at once, and the main chunk is
                // handed the error as a wait would hand it.
                if mode == .raising, let failure = outcome.failure {
                    let status = raise(L, failure)
                    if isMainThread(L) { rememberHandedError(L, -1, from: id) }
                    return status
                }
                let n = pushOutcome(L, outcome, mode: mode, leading: false)
                if outcome.failure != nil, isMainThread(L) { rememberHandedError(L, -1, from: id) }
                return n
            }
            if waitsOnItself([id]) != nil {
                return usage(L, "h:\(method): task '\(engine.name(id))' cannot wait for itself (it would never finish)")
            }
            if let status = cannotWait(L, "h:\(method)") { return status }
            return suspend(L, .wait(AwaitWait(id: id, mode: mode)))
        }
    }

    func handleOn(_ L: OpaquePointer) -> Int32 {
        switch selfHandle(L, "on") {
        case .failure(let e): return e.code
        case .success(let id):
            let s = LuaStack(L)
            guard let event = s.string(2), ["start", "progress", "retry", "finish"].contains(event) else {
                return argError(L, "h:on", 1, "\"start\", \"progress\", \"retry\" or \"finish\"", index: 2)
            }
            guard s.type(3) == LUA_TFUNCTION else { return argError(L, "h:on", 2, "function", index: 3) }
            if event == "finish", let outcome = engine.outcome(id) {
                // Already finished: run it at once.
                lua_pushvalue(L, 3)
                lua_pushvalue(L, 1)
                let n = pushFinishArguments(L, id, outcome)
                let saved = callContext
                callContext = "an event handler"
                // A handler, like every call tasker makes into Lua, has a budget.
                let savedBudget = tasker_set_budget(crt, Monotonic.now() &+ Monotonic.nanos(LuaRuntime.callBudget))
                let status = tasker_pcall_traceback(L, 1 + n, 0)
                tasker_set_budget(crt, savedBudget)
                callContext = saved
                if status != LUA_OK { tasker_reset_hook(L) }
                if status != LUA_OK {
                    logger.error("error in the 'finish' handler of task '\(engine.name(id))': \(s.describe(-1))")
                    s.pop()
                }
                return 0
            }
            addHandler(L, id, event: event, handle: 1, function: 3)
            return 0
        }
    }

    /// HANDLERS[id] = {handle, start = {fn…}, …}
    private func addHandler(_ L: OpaquePointer, _ id: TaskID, event: String, handle: Int32, function: Int32) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.handlers))
        lua_rawgeti(L, -1, lua_Integer(id))
        if lua_type(L, -1) != LUA_TTABLE {
            s.pop()
            s.newTable(array: 1, hash: 4)
            lua_pushvalue(L, handle)
            lua_rawseti(L, -2, 1)
            lua_pushvalue(L, -1)
            lua_rawseti(L, -3, lua_Integer(id))
        }
        s.rawGet(-1, event)
        if lua_type(L, -1) != LUA_TTABLE {
            s.pop()
            s.newTable(array: 1)
            lua_pushvalue(L, -1)
            s.rawSet(-3, event)
        }
        lua_pushvalue(L, function)
        lua_rawseti(L, -2, lua_Integer(s.rawLength(-2) + 1))
        s.pop(3)
        handlerTasks[id] = true
    }

    /// (state, value_or_err) for a finish handler.
    func pushFinishArguments(_ L: OpaquePointer, _ id: TaskID, _ outcome: TaskOutcome) -> Int32 {
        LuaStack(L).push(outcome.state.rawValue)
        switch outcome {
        case .succeeded: pushFirstValue(L, id)
        case .failed(let f), .cancelled(let f), .skipped(let f): pushFailure(L, f)
        }
        return 2
    }

    /// Runs the handlers registered for an event, each under pcall.
    func fireHandlers(_ id: TaskID, _ event: TaskEvent) {
        let name: String
        switch event {
        case .start: name = "start"
        case .progress: name = "progress"
        case .retry: name = "retry"
        case .finish: name = "finish"
        }
        let s = LuaStack(L)
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.handlers))
        lua_rawgeti(L, -1, lua_Integer(id))
        guard lua_type(L, -1) == LUA_TTABLE else { return }
        let entry = lua_gettop(L)
        s.rawGet(entry, name)
        guard lua_type(L, -1) == LUA_TTABLE else { return }
        let list = lua_gettop(L)
        for k in stride(from: 1, through: s.rawLength(list), by: 1) {
            lua_rawgeti(L, list, lua_Integer(k))
            lua_rawgeti(L, entry, 1)
            var n: Int32 = 1
            switch event {
            case .start: break
            case .progress(let fraction, let message):
                s.push(fraction)
                if let message { s.push(message) } else { s.pushNil() }
                n += 2
            case .retry(let attempt, let failure, let delay):
                s.push(attempt)
                pushFailure(L, failure)
                s.push(delay)
                n += 3
            case .finish:
                if let outcome = engine.outcome(id) { n += pushFinishArguments(L, id, outcome) }
            }
            _ = callProtected(nargs: n, nresults: 0, context: "the '\(name)' handler of task '\(engine.name(id))'")
        }
        if case .finish = event {
            lua_pushnil(L)
            lua_rawseti(L, base + 1, lua_Integer(id))
            handlerTasks[id] = nil
        }
    }
}

/// A trampoline status carried through a `Result`.
struct RaiseStatus: Error {
    let code: Int32
}
