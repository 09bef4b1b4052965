import CLua
import CLuaShim
import TaskerCore

/// The task `t` that interceptors and reactors receive: a small userdata
/// whose fields are read and written through the task itself, so a
/// callback costs one allocation and its changes need no copying back.
/// `id`, `attempt` are read-only; `name`, `priority`, `args`, `tags` may be
/// set (args and tags are the task's own tables, made on first read).
enum TaskViewModule {
    static let metatableName = "tasker.task"

    struct Payload {
        var task: TaskID
        var attempt: Int
    }

    static let index: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        guard let v = rt.taskView(L, 1), let key = LuaStack(L).string(2) else { return 0 }
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

    static let newindex: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        let s = LuaStack(L)
        guard let v = rt.taskView(L, 1), let key = s.string(2) else { return 0 }
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
            if key == "tags" {
                for k in stride(from: 1, through: s.rawLength(3), by: 1) {
                    s.rawGet(3, k)
                    let type = s.type(-1), typeName = s.typeName(-1)
                    s.pop()
                    guard type == LUA_TSTRING else {
                        return rt.usage(L, "bad value for t.tags (list of strings expected, element #\(k) is \(typeName))")
                    }
                }
            }
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(key == "args" ? rt.refs.args : rt.refs.tags))
            lua_pushvalue(L, 3)
            lua_rawseti(L, -2, lua_Integer(v.task))
            if key == "tags" { rt.tagged[v.task] = true }
        default:
            return rt.usage(L, "t.\(key) cannot be set (a task has id, name, args, tags, priority, attempt)")
        }
        return 0
    }

    static let tostring: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        guard let v = rt.taskView(L, 1) else { return 0 }
        LuaStack(L).push("task \(v.task) '\(rt.engine.name(v.task))' (attempt \(v.attempt))")
        return 1
    }

    static func install(_ rt: LuaRuntime) {
        rt.refs.taskViewMeta = rt.makeMetatable(metatableName, index: index, methods: [],
                                                metamethods: [("__newindex", newindex), ("__tostring", tostring)])
    }
}

extension LuaRuntime {
    func pushTaskView(_ L: OpaquePointer, _ id: TaskID, attempt: Int) {
        let p = tasker_newuserdata(L, MemoryLayout<TaskViewModule.Payload>.size)!
        p.storeBytes(of: TaskViewModule.Payload(task: id, attempt: attempt), as: TaskViewModule.Payload.self)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.taskViewMeta))
        lua_setmetatable(L, -2)
    }

    func taskView(_ L: OpaquePointer, _ i: Int32) -> TaskViewModule.Payload? {
        guard let p = luaL_testudata(L, i, TaskViewModule.metatableName) else { return nil }
        return p.load(as: TaskViewModule.Payload.self)
    }
}
