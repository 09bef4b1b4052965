import CLua
import CLuaShim
import TaskerCore

/// An interceptor written in Lua: `fn(t, held)` decides as the README's Interceptors section says.
final class LuaInterceptor: TaskInterceptor {
    unowned let runtime: LuaRuntime
    /// Tasks or HTTP requests (`on=`).
    let target: HookTarget
    let name: String
    let maxHold: Double?
    /// The function, anchored in the registry.
    let function: Int32
    /// Names this interceptor in errors from code it runs.
    let context: String

    init(runtime: LuaRuntime, target: HookTarget, name: String, maxHold: Double?, function: Int32) {
        self.runtime = runtime
        self.target = target
        self.name = name
        self.maxHold = maxHold
        self.function = function
        self.context = "an interceptor ('\(name)')"
    }

    func intercept(_ id: TaskID, held: Int, engine: Engine) -> InterceptDecision {
        runtime.runInterceptor(self, id, held: held)
    }

    var engine: Engine { runtime.engine(for: target) }
}

/// What an interceptor or reactor applies to: `on = "task"` or `"http"`.
enum HookTarget {
    case task, http
}

extension LuaRuntime {
    func engine(for target: HookTarget) -> Engine { target == .task ? engine : httpEngine }

    /// Reads `on` from the spec table at 1; nil if it is neither.
    func readTarget(_ L: OpaquePointer) -> HookTarget? {
        let s = LuaStack(L)
        s.rawGet(1, "on")
        defer { s.pop() }
        if s.isNoneOrNil(-1) { return .task }
        switch s.string(-1) {
        case "task": return .task
        case "http": return .http
        default: return nil
        }
    }
}

extension LuaRuntime {
    /// Seconds a handler, predicate or interceptor may run before the hook
    /// stops it as a runaway.
    static let callBudget = 2.0

    static let interceptFields: Set<String> = ["name", "on", "fn", "max_hold"]

    /// `tasker.intercept(spec)`: spec is `fn(t, held)` or
    /// `{name=, on="task", fn=, max_hold=}`.
    func apiIntercept(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        var name = "interceptor-\(engine.interceptors.count + httpEngine.interceptors.count + 1)"
        var maxHold: Double?
        var target = HookTarget.task
        let fnIndex: Int32
        switch s.type(1) {
        case LUA_TFUNCTION:
            fnIndex = 1
        case LUA_TTABLE:
            if let status = unknownField(L, table: 1, known: LuaRuntime.interceptFields, in: "'tasker.intercept' spec") {
                return status
            }
            s.rawGet(1, "fn")
            guard s.type(-1) == LUA_TFUNCTION else {
                return usage(L, "bad field 'fn' in 'tasker.intercept' spec (function expected, got \(s.got(-1, expected: "function")))")
            }
            fnIndex = lua_gettop(L)
            s.rawGet(1, "name")
            if !s.isNoneOrNil(-1) {
                guard let n = s.string(-1) else {
                    return usage(L, "bad field 'name' in 'tasker.intercept' spec (string expected, got \(s.got(-1, expected: "string")))")
                }
                name = n
            }
            s.rawGet(1, "max_hold")
            if !s.isNoneOrNil(-1) {
                guard let m = s.number(-1), m >= 0, m.isFinite else {
                    return usage(L, "bad field 'max_hold' in 'tasker.intercept' spec (non-negative number expected, got \(s.got(-1, expected: "non-negative number")))")
                }
                maxHold = m
            }
            guard let on = readTarget(L) else {
                s.rawGet(1, "on")
                return usage(L, "bad field 'on' in 'tasker.intercept' spec (\"task\" or \"http\" expected, got \(s.describe(-1)))")
            }
            target = on
        default:
            return argError(L, "tasker.intercept", 1, "function or table")
        }
        lua_pushvalue(L, fnIndex)
        let ref = luaL_ref(L, tasker_registryindex())
        let interceptor = LuaInterceptor(runtime: self, target: target, name: name, maxHold: maxHold, function: ref)
        useModule.register(interceptor)
        pushRegistrationObject(L, name: name, .interceptor(interceptor))
        return 1
    }

    /// Calls `fn(t, held)` and turns its answer into a decision. Changes to
    /// `t` apply to the task as they are made. Errors fail the task (kind
    /// `interceptor`).
    func runInterceptor(_ i: LuaInterceptor, _ id: TaskID, held: Int) -> InterceptDecision {
        let s = LuaStack(L)
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        s.pushRegistry(i.function)
        let attempt = i.engine.attempts(id) + 1  // the attempt about to start
        if i.target == .http { http.pushRequestTable(L, id, attempt: attempt) } else { pushTaskView(L, id, attempt: attempt) }
        s.push(held)
        if let error = callForError(nargs: 2, nresults: 2, context: i.context, traceback: false) {
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
                return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \"delay\" without a non-negative number of seconds"))
            }
            return .delay(seconds)
        default:
            let shown = answer.map { "\"\($0)\"" } ?? s.typeName(base + 1)
            return .fail(TaskFailure(.interceptor, "interceptor '\(i.name)' returned \(shown) (expected nil, \"execute\", \"force\", \"hold\", \"discard\" or \"delay\", seconds)"))
        }
    }
}
