import CLua
import CLuaShim
import TaskerCore

/// The task `t` that interceptors and reactors receive: a small userdata
/// whose fields are read and written through the task itself, so a
/// callback costs one allocation and its changes need no copying back.
/// `id`, `attempt` are read-only; `name`, `priority`, `args`, `tags` may be
/// set (args and tags are the task's own tables, made on first read).
final class TaskViewModule: LuaModule {
    static let metatableName = "tasker.task"
    /// The runtime keeps this module (a strong reference back would be a
    /// cycle). Checked: cheap since nothing refers weakly to the runtime or
    /// its engines on the per-task path (a weak reference gives an object a
    /// side table, and each retain of it then takes the slow path).
    unowned let runtime: LuaRuntime

    struct Payload {
        var task: TaskID
        var attempt: Int
    }

    init(runtime: LuaRuntime) { self.runtime = runtime }

    func install(in runtime: LuaRuntime) {
        runtime.refs.taskViewMeta = makeMetatable(Self.metatableName, index: { L in TaskViewModule.this(L!).index(L!) }, methods: [],
                                  metamethods: [("__newindex", { L in TaskViewModule.this(L!).newindex(L!) }),
                                                ("__tostring", { L in TaskViewModule.this(L!).tostring(L!) })],
                                  in: runtime.L)
    }

    /// Pushes the view of task `id` as its attempt `attempt` sees it
    /// (`metatable`: the runtime's `refs.taskViewMeta`, which `install`
    /// set; static, so that a hook's call touches no module).
    static func push(_ L: OpaquePointer, _ id: TaskID, attempt: Int, metatable: Int32) {
        LuaStack(L).pushUserdata(Payload(task: id, attempt: attempt), metatable: metatable)
    }

    static func view(_ L: OpaquePointer, _ i: Int32) -> Payload? {
        LuaStack(L).userdata(i, metatableName, as: Payload.self)
    }

    private func index(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        guard let v = Self.view(L, 1), let key = LuaStack(L).string(2) else { return 0 }
        switch key {
        case "id": lua_pushinteger(L, lua_Integer(v.task))
        case "name": LuaStack(L).push(rt.engine.name(v.task))
        case "priority": lua_pushinteger(L, lua_Integer(rt.engine.priority(v.task)))
        case "attempt": lua_pushinteger(L, lua_Integer(v.attempt))
        case "args": rt.pushPart(L, rt.refs.args, v.task)
        case "tags": rt.pushPart(L, rt.refs.tags, v.task)
        default: lua_pushnil(L)
        }
        return 1
    }

    private func newindex(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        let s = LuaStack(L)
        guard let v = Self.view(L, 1), let key = s.string(2) else { return 0 }
        func bad(_ expected: String) -> Int32 {
            rt.usage(L, "bad value for t.\(key) (\(expected) expected, got \(s.got(3, expected: expected)))")
        }
        switch key {
        case "name":
            guard let n = s.string(3) else { return bad("string") }
            rt.engine.setName(v.task, n)
        case "priority":
            guard let p = s.integer(3) else { return bad("integer") }
            rt.engine.setPriority(v.task, p)
        case "args", "tags":
            guard s.type(3) == LUA_TTABLE else { return bad(key == "tags" ? "list of strings" : "table") }
            if key == "tags", let problem = s.notAListOfStrings(3) {
                return rt.usage(L, "bad value for t.tags (list of strings expected, \(problem))")
            }
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(key == "args" ? rt.refs.args : rt.refs.tags))
            lua_pushvalue(L, 3)
            lua_rawseti(L, -2, lua_Integer(v.task))
            if key == "tags" { rt.refs.flags.tagged[v.task] = true }
        default:
            return rt.usage(L, "t.\(key) cannot be set (a task has id, name, args, tags, priority, attempt)")
        }
        return 0
    }

    private func tostring(_ L: OpaquePointer) -> Int32 {
        guard let v = Self.view(L, 1) else { return 0 }
        LuaStack(L).push("task \(v.task) '\(runtime.engine.name(v.task))' (attempt \(v.attempt))")
        return 1
    }
}
