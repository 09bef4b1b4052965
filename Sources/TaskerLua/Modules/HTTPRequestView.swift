import CLua
import CLuaShim

/// The request `t` that `on="http"` interceptors and reactors receive: the
/// request's own table, whose `method`, `url`, `headers`, `body` and
/// `timeout` an interceptor changes in place. `id` and `attempt` are not
/// in it but in its metatable (one per request), read through `__index`,
/// so that setting them, or a field a request does not have, reaches
/// `__newindex` and is refused at the line that tried, as for a task.
extension HTTPModule {
    static let settableRequestFields: Set<String> = ["method", "url", "headers", "body", "timeout"]
    static let requestFieldList = "a request has method, url, headers, body, timeout; id and attempt are read-only"

    /// Gives the request table at `t` its metatable.
    func setRequestViewMetatable(_ L: OpaquePointer, _ t: Int32) {
        let s = LuaStack(L)
        s.newTable(hash: 4)
        s.pushRegistry(requestIndex)
        s.rawSet(-2, "__index")
        s.pushRegistry(requestNewindex)
        s.rawSet(-2, "__newindex")
        lua_setmetatable(L, t)
    }

    /// `t.id`, `t.attempt` (from the metatable); any other absent field is nil.
    func requestViewIndex(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        guard s.type(2) == LUA_TSTRING, let key = s.string(2), key == "id" || key == "attempt",
              lua_getmetatable(L, 1) != 0 else {
            s.pushNil()
            return 1
        }
        s.rawGet(-1, key)
        return 1
    }

    /// Sets a field the request lacks now (`body` after none), or refuses.
    func requestViewNewindex(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        let key = s.type(2) == LUA_TSTRING ? s.string(2) : nil
        guard let key, Self.settableRequestFields.contains(key) else {
            let shown = key.map { "t.\($0)" } ?? "a field of type \(s.typeName(2))"
            return runtime.usage(L, "\(shown) cannot be set (\(Self.requestFieldList))")
        }
        lua_settop(L, 3)
        lua_rawset(L, 1)
        return 0
    }
}
