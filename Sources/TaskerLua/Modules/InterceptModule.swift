import CLua
import CLuaShim
import TaskerCore

/// An interceptor written in Lua: `fn(t, held)` decides as the README's Interceptors section says.
final class LuaInterceptor: TaskInterceptor {
    /// The runtime keeps its hook module, which registered this; only the
    /// runtime's engines call this, while the runtime lives.
    unowned let hooks: HookModule
    /// Tasks or HTTP requests (`on=`).
    let target: HookTarget
    let name: String
    let maxHold: Double?
    /// The function, anchored in the registry.
    let function: Int32
    /// Names this interceptor in errors from code it runs.
    let context: String

    /// Where its function is defined (`rules.lua:3`), for an answer it
    /// should not have given.
    let definedAt: String?

    init(hooks: HookModule, target: HookTarget, name: String, maxHold: Double?, function: Int32, definedAt: String?) {
        self.definedAt = definedAt
        self.hooks = hooks
        self.target = target
        self.name = name
        self.maxHold = maxHold
        self.function = function
        self.context = "an interceptor ('\(name)')"
    }

    func intercept(_ id: TaskID, held: Int, engine: Engine) -> InterceptDecision {
        let hooks = self.hooks  // one checked load, not two
        return hooks.runInterceptor(self, id, held: held, engine: engine, rt: hooks.runtime)
    }

    var engine: Engine { hooks.engine(for: target) }
}

extension HookModule {
    /// Seconds a handler, predicate or interceptor may run before the hook
    /// stops it as a runaway.
    static let interceptFields: Set<String> = ["name", "on", "fn", "max_hold"]

    /// `tasker.intercept(spec)`: spec is `fn(t, held)` or
    /// `{name=, on="task", fn=, max_hold=}`.
    func intercept(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        let s = LuaStack(L)
        var name = "interceptor-\(rt.engine.interceptors.count + rt.httpEngine.interceptors.count + 1)"
        var maxHold: Double?
        var target = HookTarget.task
        let fnIndex: Int32
        switch s.type(1) {
        case LUA_TFUNCTION:
            fnIndex = 1
        case LUA_TTABLE:
            if let status = rt.unknownField(L, table: 1, known: Self.interceptFields, in: "'tasker.intercept' spec") {
                return status
            }
            s.rawGet(1, "fn")
            guard s.type(-1) == LUA_TFUNCTION else {
                return rt.usage(L, "bad field 'fn' in 'tasker.intercept' spec (function expected, got \(s.got(-1, expected: "function")))")
            }
            fnIndex = lua_gettop(L)
            s.rawGet(1, "name")
            if !s.isNoneOrNil(-1) {
                guard let n = s.string(-1) else {
                    return rt.usage(L, "bad field 'name' in 'tasker.intercept' spec (string expected, got \(s.got(-1, expected: "string")))")
                }
                name = n
            }
            s.rawGet(1, "max_hold")
            if !s.isNoneOrNil(-1) {
                guard let m = s.number(-1), m >= 0, m.isFinite else {
                    return rt.usage(L, "bad field 'max_hold' in 'tasker.intercept' spec (non-negative number expected, got \(s.got(-1, expected: "non-negative number")))")
                }
                maxHold = m
            }
            guard let on = Self.readTarget(L) else {
                s.rawGet(1, "on")
                return rt.usage(L, "bad field 'on' in 'tasker.intercept' spec (\"task\" or \"http\" expected, got \(s.describe(-1)))")
            }
            target = on
        default:
            return rt.argError(L, "tasker.intercept", 1, "function or table")
        }
        lua_pushvalue(L, fnIndex)
        let ref = luaL_ref(L, tasker_registryindex())
        tasker_push_defined_at(L, fnIndex)
        let definedAt = LuaStack(L).string(-1)
        lua_settop(L, lua_gettop(L) - 1)
        let interceptor = LuaInterceptor(hooks: self, target: target, name: name, maxHold: maxHold, function: ref,
                                         definedAt: definedAt)
        rt.useModule.register(interceptor)
        pushRegistrationObject(L, name: name, .interceptor(interceptor))
        return 1
    }

    /// Calls `fn(t, held)` and turns its answer into a decision. Changes to
    /// `t` apply to the task as they are made. Errors fail the task (kind
    /// `interceptor`).
    /// `engine` is the one asking; `rt` is `runtime`, passed so that it is
    /// borrowed, not retained (this runs for every task).
    func runInterceptor(_ i: LuaInterceptor, _ id: TaskID, held: Int, engine: Engine, rt: LuaRuntime) -> InterceptDecision {
        let L = rt.L
        let s = LuaStack(L)
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        s.pushRegistry(i.function)
        let attempt = engine.attempts(id) + 1  // the attempt about to start
        if i.target == .http { rt.http.pushRequestTable(L, id, attempt: attempt) } else { TaskViewModule.push(L, id, attempt: attempt, metatable: rt.refs.taskViewMeta) }
        s.push(held)
        if let error = rt.callForError(nargs: 2, nresults: 2, context: i.context, traceback: false, definedAt: i.definedAt,
                                       task: .some(i.target == .http ? rt.http.calls[id]?.task : id)) {
            let message = error.components(separatedBy: "\nstack traceback:").first ?? error
            return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' failed: \(message)"))
        }
        let answer = s.isNoneOrNil(base + 1) ? "execute" : s.string(base + 1)
        switch answer {
        case "execute": return .execute
        case "force": return .force
        case "hold": return .hold
        case "discard": return .discard
        case "delay":
            guard let seconds = s.number(base + 2), seconds >= 0, seconds.isFinite else {
                return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \"delay\" without a non-negative number of seconds",
                                         position: i.definedAt ?? ""))
            }
            return .delay(seconds)
        default:
            let shown = answer.map { "\"\($0)\"" } ?? s.typeName(base + 1)
            return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \(shown) (expected nil, \"execute\", \"force\", \"hold\", \"discard\" or \"delay\", seconds)",
                                     position: i.definedAt ?? ""))
        }
    }
}
