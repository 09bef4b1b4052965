import CLua
import CLuaShim
import Foundation
import TaskerCore
import TaskerHTTP

/// HTTP request events and task tags, for the journal and the events file.
extension LuaRuntime {
    /// Calls `sink` on the loop after every HTTP attempt.
    public func observeRequests(_ sink: @escaping (RequestEvent) -> Void) {
        httpEngine.observers.append(RequestEventSource(runtime: self, sink: sink))
    }

    /// Whether the task was given tags (cheaper than reading them).
    public func hasTags(_ id: TaskID) -> Bool { refs.flags.tagged[id] != nil }

    /// The task's tags as they are now.
    public func tags(of id: TaskID) -> [String] {
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.tags))
        lua_rawgeti(L, -1, lua_Integer(id))
        defer { tasker_pop(L, 2) }
        guard lua_type(L, -1) == LUA_TTABLE else { return [] }
        let s = LuaStack(L)
        let t = lua_gettop(L)
        var tags: [String] = []
        for k in stride(from: 1, through: s.rawLength(t), by: 1) {
            s.rawGet(t, k)
            if let t = s.string(-1) { tags.append(t) }
            s.pop()
        }
        return tags
    }
}
