import CLua
import CLuaShim
import Logging
import TaskerCore

/// Task handles: full userdata holding the task id, with `id`, `name`,
/// `attempts` fields and the methods the README lists under Tasks. Makes
/// the handles' metatable; `h:on` handlers are kept in the registry table
/// `refs.handlers`, and which tasks have some in `handlerTasks` (the
/// runtime reads it as each task starts and ends).
final class HandleModule: LuaModule {
    static let metatableName = "tasker.handle"
    /// The runtime keeps this module (a strong reference back would be a
    /// cycle). Checked: cheap since nothing refers weakly to the runtime or
    /// its engines on the per-task path (a weak reference gives an object a
    /// side table, and each retain of it then takes the slow path).
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

    func install(in runtime: LuaRuntime) {
        let methods: [(String, tasker_SwiftFunction)] = [
            ("await", { L in HandleModule.this(L!).await(L!, mode: .raising) }),
            ("cancel", { L in HandleModule.this(L!).cancel(L!) }),
            ("on", { L in HandleModule.this(L!).on(L!) }),
            ("result", { L in HandleModule.this(L!).await(L!, mode: .result) }),
            ("start", { L in HandleModule.this(L!).start(L!) }),
            ("pause", { L in HandleModule.this(L!).pause(L!, pause: true) }),
            ("resume", { L in HandleModule.this(L!).pause(L!, pause: false) }),
            ("state", { L in HandleModule.this(L!).state(L!) }),
        ]
        runtime.refs.handleMeta = makeMetatable(
            Self.metatableName, index: { L in HandleModule.this(L!).index(L!) }, methods: methods,
            metamethods: [("__eq", { L in
                              let L = L!
                              lua_pushboolean(L, HandleModule.id(L, 1) == HandleModule.id(L, 2) ? 1 : 0)
                              return 1
                          }),
                          ("__newindex", { L in
                              let L = L!
                              return HandleModule.this(L).runtime.usage(
                                  L, "task handles are read-only (tried to set '\(LuaStack(L).describe(2))')")
                          }),
                          ("__tostring", { L in HandleModule.this(L!).tostring(L!) })],
            in: runtime.L)
    }

    /// Pushes a handle of task `id` (`metatable`: the runtime's
    /// `refs.handleMeta`, which `install` set; static, so that adding a
    /// task touches no module).
    static func push(_ L: OpaquePointer, _ id: TaskID, metatable: Int32) {
        LuaStack(L).pushUserdata(id, metatable: metatable)
    }

    /// The task id of the handle at `i`, if it is one.
    static func id(_ L: OpaquePointer, _ i: Int32) -> TaskID? {
        LuaStack(L).userdata(i, metatableName, as: TaskID.self)
    }

    /// `h.key`: a method from the methods table (upvalue 3), or a field.
    private func index(_ L: OpaquePointer) -> Int32 {
        lua_pushvalue(L, 2)
        lua_rawget(L, tasker_upvalueindex(3))
        if lua_type(L, -1) != LUA_TNIL { return 1 }
        guard let id = Self.id(L, 1), let key = LuaStack(L).string(2) else { return 1 }
        let engine = runtime.engine
        switch key {
        case "id": lua_pushinteger(L, lua_Integer(id))
        case "name": LuaStack(L).push(engine.name(id))
        case "attempts": lua_pushinteger(L, lua_Integer(engine.attempts(id)))
        default: lua_pushnil(L)
        }
        return 1
    }

    private func tostring(_ L: OpaquePointer) -> Int32 {
        guard let id = Self.id(L, 1) else { return 0 }
        let engine = runtime.engine
        LuaStack(L).push("task \(id) '\(engine.name(id))' (\(engine.state(id).rawValue))")
        return 1
    }

    /// The handle in `self` position, or a usage error status.
    private func selfHandle(_ L: OpaquePointer, _ method: String) -> Result<TaskID, RaiseStatus> {
        let rt = runtime
        if let id = Self.id(L, 1) { return .success(id) }
        return .failure(RaiseStatus(code: rt.usage(L, "calling 'h:\(method)' on bad self (task handle expected, got \(LuaStack(L).got(1, expected: "task handle"))); use h:\(method)(...)")))
    }

    private func state(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        switch selfHandle(L, "state") {
        case .failure(let e): return e.code
        case .success(let id):
            LuaStack(L).push(rt.engine.state(id).rawValue)
            return 1
        }
    }

    private func start(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        switch selfHandle(L, "start") {
        case .failure(let e): return e.code
        case .success(let id):
            rt.engine.start(id)
            return 0
        }
    }

    /// `h:pause()` / `h:resume()`; no effect on a final task.
    private func pause(_ L: OpaquePointer, pause: Bool) -> Int32 {
        let rt = runtime
        switch selfHandle(L, pause ? "pause" : "resume") {
        case .failure(let e): return e.code
        case .success(let id):
            let work = rt.workOf(id)
            if pause { rt.pauseTask(work) } else { rt.resumeTask(work) }
            return 0
        }
    }

    private func cancel(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        switch selfHandle(L, "cancel") {
        case .failure(let e): return e.code
        case .success(let id):
            let s = LuaStack(L)
            var reason: String?
            if !s.isNoneOrNil(2) {
                guard let r = s.string(2) else { return rt.argError(L, "h:cancel", 1, "string", index: 2) }
                reason = r
            }
            rt.engine.cancel(id, reason: reason)
            return 0
        }
    }

    private func await(_ L: OpaquePointer, mode: AwaitMode) -> Int32 {
        let rt = runtime
        let method = mode == .raising ? "await" : "result"
        switch selfHandle(L, method) {
        case .failure(let e): return e.code
        case .success(let id):
            if let outcome = rt.engine.outcome(id) {
                // Already over: answered at once, and the main chunk is
                // handed the error as a wait would hand it.
                if mode == .raising, let failure = outcome.failure {
                    let status = rt.raise(L, failure)
                    if rt.isMainThread(L) { rt.rememberHandedError(L, -1, from: id) }
                    return status
                }
                let n = rt.pushOutcome(L, outcome, mode: mode, leading: false)
                if outcome.failure != nil, rt.isMainThread(L) { rt.rememberHandedError(L, -1, from: id) }
                return n
            }
            if rt.waitsOnItself([id]) != nil {
                return rt.usage(L, "h:\(method): task '\(rt.engine.name(id))' cannot wait for itself (it would never finish)")
            }
            if let reactor = rt.reactionWaitedOnBy(id) {
                return rt.usage(L, "h:\(method): task '\(rt.engine.name(id))' waits for this reaction of reactor '\(reactor)' "
                                + "to end, so the reaction cannot wait for it (it would never finish)")
            }
            if let status = rt.cannotWait(L, "h:\(method)") { return status }
            if let cycle = rt.waitCycle(id) { return rt.raise(L, LuaRuntime.deadlock(cycle)) }
            return rt.suspend(L, .wait(AwaitWait(id: id, mode: mode)))
        }
    }

    private func on(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        switch selfHandle(L, "on") {
        case .failure(let e): return e.code
        case .success(let id):
            let s = LuaStack(L)
            guard let event = s.string(2), ["start", "progress", "retry", "finish"].contains(event) else {
                return rt.argError(L, "h:on", 1, "\"start\", \"progress\", \"retry\" or \"finish\"", index: 2)
            }
            guard s.type(3) == LUA_TFUNCTION else { return rt.argError(L, "h:on", 2, "function", index: 3) }
            if event == "finish", let outcome = rt.engine.outcome(id), !rt.options.describeOnly {
                // Already finished: run it at once.
                lua_pushvalue(L, 3)
                lua_pushvalue(L, 1)
                let n = pushFinishArguments(L, id, outcome)
                let saved = rt.driver.callContext
                rt.driver.callContext = "the 'finish' handler of task '\(rt.engine.name(id))'"
                // A handler, like every call tasker makes into Lua, has a budget.
                let savedBudget = tasker_set_budget(rt.crt, Monotonic.now() &+ Monotonic.nanos(LuaRuntime.callBudget))
                let status = tasker_pcall_traceback(L, 1 + n, 0)
                tasker_set_budget(rt.crt, savedBudget)
                rt.driver.callContext = saved
                if status != LUA_OK { tasker_reset_hook(L) }
                if status != LUA_OK && lua_touserdata(L, -1) == LuaRuntime.describeMarker {
                    // a plan stopped in it (it would have run something): so does the main chunk
                    s.pop()
                    return rt.describeStop(L)
                }
                if status != LUA_OK {
                    // tasker.exit or os.exit in it unwinds it: no error of its own
                    if !rt.isExitUnwind(L, -1) {
                        rt.logger.error("error in the 'finish' handler of task '\(rt.engine.name(id))': \(s.describe(-1))")
                    }
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
        let rt = runtime
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(rt.refs.handlers))
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
        rt.refs.flags.handlerTasks[id] = true
    }

    /// (state, value_or_err) for a finish handler.
    func pushFinishArguments(_ L: OpaquePointer, _ id: TaskID, _ outcome: TaskOutcome) -> Int32 {
        let rt = runtime
        LuaStack(L).push(outcome.state.rawValue)
        switch outcome {
        case .succeeded: rt.pushFirstValue(L, id)
        case .failed(let f), .cancelled(let f), .skipped(let f): rt.pushFailure(L, f)
        }
        return 2
    }

    /// Runs the handlers registered for an event, each under pcall.
    func fireHandlers(_ id: TaskID, _ event: TaskEvent) {
        let rt = runtime
        // `--help`, `list`: the tasks a description adds never run, nor
        // do their handlers (a cancel by the main chunk ends them)
        if rt.options.describeOnly { return }
        let L = rt.L
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
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(rt.refs.handlers))
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
                rt.pushFailure(L, failure)
                s.push(delay)
                n += 3
            case .finish:
                if let outcome = rt.engine.outcome(id) { n += pushFinishArguments(L, id, outcome) }
            }
            _ = rt.callProtected(nargs: n, nresults: 0, context: "the '\(name)' handler of task '\(rt.engine.name(id))'")
        }
        if case .finish = event {
            lua_pushnil(L)
            lua_rawseti(L, base + 1, lua_Integer(id))
            rt.refs.flags.handlerTasks[id] = nil
        }
    }
}

/// A trampoline status carried through a `Result`.
struct RaiseStatus: Error {
    let code: Int32
}
