import CLua
import CLuaShim
import TaskerCore

/// An interceptor written in Lua: `fn(t, held)` decides per DESIGN §2.3.
final class LuaInterceptor: TaskInterceptor {
    unowned let runtime: LuaRuntime
    let name: String
    let maxHold: Double?
    /// The function, anchored in the registry.
    let function: Int32

    init(runtime: LuaRuntime, name: String, maxHold: Double?, function: Int32) {
        self.runtime = runtime
        self.name = name
        self.maxHold = maxHold
        self.function = function
    }

    func intercept(_ id: TaskID, held: Int, engine: Engine) -> InterceptDecision {
        runtime.runInterceptor(self, id, held: held)
    }
}

extension LuaRuntime {
    /// Seconds a handler, predicate or interceptor may run before the hook
    /// stops it as a runaway.
    static let callBudget = 2.0

    /// `tasker.intercept(spec)`: spec is `fn(t, held)` or
    /// `{name=, on="task", fn=, max_hold=}`.
    func apiIntercept(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        var name = "interceptor-\(engine.interceptors.count + 1)"
        var maxHold: Double?
        let fnIndex: Int32
        switch s.type(1) {
        case LUA_TFUNCTION:
            fnIndex = 1
        case LUA_TTABLE:
            s.rawGet(1, "fn")
            guard s.type(-1) == LUA_TFUNCTION else {
                return usage(L, "bad field 'fn' in 'tasker.intercept' spec (function expected, got \(s.typeName(-1)))")
            }
            fnIndex = lua_gettop(L)
            s.rawGet(1, "name")
            if !s.isNoneOrNil(-1) {
                guard let n = s.string(-1) else {
                    return usage(L, "bad field 'name' in 'tasker.intercept' spec (string expected, got \(s.typeName(-1)))")
                }
                name = n
            }
            s.rawGet(1, "max_hold")
            if !s.isNoneOrNil(-1) {
                guard let m = s.number(-1), m >= 0, m.isFinite else {
                    return usage(L, "bad field 'max_hold' in 'tasker.intercept' spec (non-negative number expected, got \(s.typeName(-1)))")
                }
                maxHold = m
            }
            s.rawGet(1, "on")
            if !s.isNoneOrNil(-1) {
                guard let on = s.string(-1), on == "task" || on == "http" else {
                    return usage(L, "bad field 'on' in 'tasker.intercept' spec (\"task\" or \"http\" expected, got \(s.typeName(-1)))")
                }
                if on == "http" {
                    return usage(L, "tasker.intercept: on = \"http\" needs the http module, which this version does not have yet")
                }
            }
        default:
            return argError(L, "tasker.intercept", 1, "function or table")
        }
        lua_pushvalue(L, fnIndex)
        let ref = luaL_ref(L, tasker_registryindex())
        let interceptor = LuaInterceptor(runtime: self, name: name, maxHold: maxHold, function: ref)
        if staging != nil { staging!.interceptors.append(interceptor) } else { engine.addInterceptor(interceptor) }
        pushInterceptorObject(L, interceptor)
        return 1
    }

    /// `{name = ..., remove = function}` for the script.
    private func pushInterceptorObject(_ L: OpaquePointer, _ i: LuaInterceptor) {
        let s = LuaStack(L)
        s.newTable(hash: 2)
        s.push(i.name)
        s.rawSet(-2, "name")
        interceptorObjects.append(i)
        lua_pushinteger(L, lua_Integer(interceptorObjects.count - 1))
        s.push({ L in
            let L = L!
            let rt = LuaRuntime.from(L)
            let index = Int(lua_tointegerx(L, tasker_upvalueindex(2), nil))
            if let i = rt.interceptorObjects[index] { rt.engine.removeInterceptor(i) }
            rt.interceptorObjects[index] = nil
            return 0
        }, upvalues: 1)
        s.rawSet(-2, "remove")
    }

    /// Builds `t`, calls `fn(t, held)`, applies what it changed in `t`, and
    /// turns its answer into a decision. Errors fail the task (kind `interceptor`).
    func runInterceptor(_ i: LuaInterceptor, _ id: TaskID, held: Int) -> InterceptDecision {
        let s = LuaStack(L)
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        pushTaskView(L, id, attempt: engine.attempts(id) + 1)  // the attempt about to start
        let t = lua_gettop(L)
        s.pushRegistry(i.function)  // [t, fn, t, held]: t stays for reading back
        lua_pushvalue(L, t)
        s.push(held)
        let context = "an interceptor ('\(i.name)')"
        if let error = callForError(nargs: 2, nresults: 2, context: context) {
            let message = error.components(separatedBy: "\nstack traceback:").first ?? error
            return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' failed: \(message)"))
        }
        applyChanges(from: t, to: id)
        let answer = s.isNoneOrNil(-2) ? "execute" : s.string(-2)
        switch answer {
        case "execute": return .execute
        case "force": return .force
        case "hold": return .hold
        case "discard": return .discard
        case "delay":
            guard let seconds = s.number(-1), seconds >= 0, seconds.isFinite else {
                return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \"delay\" without a non-negative number of seconds"))
            }
            return .delay(seconds)
        default:
            let shown = answer.map { "\"\($0)\"" } ?? s.typeName(-2)
            return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \(shown) (expected nil, \"execute\", \"force\", \"hold\", \"discard\" or \"delay\", seconds)"))
        }
    }

    /// Interceptors may change `priority`, `name`, `args` and `tags`.
    private func applyChanges(from t: Int32, to id: TaskID) {
        let s = LuaStack(L)
        s.rawGet(t, "priority")
        if let p = s.integer(-1) { engine.setPriority(id, p) }
        s.rawGet(t, "name")
        if let n = s.string(-1) { engine.setName(id, n) }
        for (key, table) in [("args", refs.args), ("tags", refs.tags)] {
            s.rawGet(t, key)
            if s.type(-1) == LUA_TTABLE {
                lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
                lua_pushvalue(L, -2)
                lua_rawseti(L, -2, lua_Integer(id))
                s.pop()
            }
            s.pop()
        }
        s.pop(2)
    }
}
