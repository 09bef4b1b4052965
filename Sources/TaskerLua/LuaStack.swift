import CLua
import CLuaShim

/// A view of one Lua thread's stack for Swift code. Only non-raising calls
/// (raw access, pushes) are used here; see CLuaShim.h for what is excluded.
/// Valid only on the runtime's loop thread, during the call that got `L`.
struct LuaStack {
    let L: OpaquePointer

    /// Pushes a full userdata holding `value` (plain data: no references),
    /// with the metatable anchored in the registry at `metatable` (task
    /// handles, `ctx`, the task view `t`).
    @inline(__always)
    func pushUserdata<T>(_ value: T, metatable: Int32) {
        let p = tasker_newuserdata(L, MemoryLayout<T>.size)!
        p.storeBytes(of: value, as: T.self)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(metatable))
        lua_setmetatable(L, -2)
    }

    /// The value a `pushUserdata` userdata at `i` holds, if its metatable
    /// is the one named `metatableName`.
    @inline(__always)
    func userdata<T>(_ i: Int32, _ metatableName: String, as type: T.Type) -> T? {
        guard let p = luaL_testudata(L, i, metatableName) else { return nil }
        return p.load(as: T.self)
    }

    init(_ L: OpaquePointer) { self.L = L }

    @inline(__always) var top: Int32 { lua_gettop(L) }
    @inline(__always) func pop(_ n: Int32 = 1) { tasker_pop(L, n) }
    @inline(__always) func type(_ i: Int32) -> Int32 { lua_type(L, i) }
    @inline(__always) func isNoneOrNil(_ i: Int32) -> Bool { lua_type(L, i) <= LUA_TNIL }
    @inline(__always) func absolute(_ i: Int32) -> Int32 { lua_absindex(L, i) }

    func typeName(_ i: Int32) -> String {
        if lua_type(L, i) == LUA_TNONE { return "no value" }
        return String(cString: lua_typename(L, lua_type(L, i)))
    }

    // MARK: reading

    func string(_ i: Int32) -> String? {
        guard lua_type(L, i) == LUA_TSTRING else { return nil }
        var len = 0
        guard let p = tasker_tostring(L, i, &len) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: len), as: UTF8.self)
    }

    /// A string's bytes as they are (not all strings are UTF-8: `string`
    /// would make each bad byte U+FFFD), for what goes to the system.
    func bytes(_ i: Int32) -> [UInt8]? {
        guard lua_type(L, i) == LUA_TSTRING else { return nil }
        var len = 0
        guard let p = tasker_tostring(L, i, &len) else { return nil }
        return Array(UnsafeRawBufferPointer(start: p, count: len))
    }

    func number(_ i: Int32) -> Double? {
        guard lua_type(L, i) == LUA_TNUMBER else { return nil }
        return tasker_tonumber(L, i, nil)
    }

    /// An integer, or a float with an integral value.
    func integer(_ i: Int32) -> Int? {
        guard lua_type(L, i) == LUA_TNUMBER else { return nil }
        var ok: Int32 = 0
        let v = tasker_tointeger(L, i, &ok)
        return ok != 0 ? Int(v) : nil
    }

    func boolean(_ i: Int32) -> Bool { lua_toboolean(L, i) != 0 }

    /// A string, number or boolean as text (numbers as Lua prints them).
    func describeScalar(_ i: Int32) -> String? {
        switch lua_type(L, i) {
        case LUA_TSTRING: string(i)
        case LUA_TNUMBER, LUA_TBOOLEAN: describe(i)
        default: nil
        }
    }

    /// `tostring(v)` under pcall; the error text if __tostring raises.
    /// What a usage error says it got: the type, or for a number its value
    /// ("got -1", "got NaN"), since "number expected, got number" helps nobody.
    func got(_ i: Int32, expected: String = "number") -> String {
        guard lua_type(L, i) == LUA_TNUMBER, expected.contains("number") || expected.contains("integer")
        else { return typeName(i) }
        if tasker_isinteger_value(L, i) != 0 { return "\(lua_tointegerx(L, i, nil))" }
        let v = lua_tonumberx(L, i, nil)
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v < 0 ? "-inf" : "inf" }
        return "\(v)"
    }

    func describe(_ i: Int32) -> String {
        let status = tasker_tostring_protected(L, i)
        defer { pop() }
        let s = string(-1) ?? "?"
        return status == LUA_OK ? s : "(error in __tostring: \(s))"
    }

    // MARK: raw table access (never runs metamethods)

    /// Pushes t[key] for the table at `t`.
    @inline(__always) func rawGet(_ t: Int32, _ key: String) {
        let t = absolute(t)
        lua_pushstring(L, key)
        lua_rawget(L, t)
    }

    /// t[key] = top value (popped).
    @inline(__always) func rawSet(_ t: Int32, _ key: String) {
        let t = absolute(t)
        lua_pushstring(L, key)
        lua_rotate(L, -2, 1)
        lua_rawset(L, t)
    }

    @inline(__always) func rawGet(_ t: Int32, _ n: Int) { lua_rawgeti(L, t, lua_Integer(n)) }
    /// t[n] = top value (popped).
    @inline(__always) func rawSet(_ t: Int32, _ n: Int) { lua_rawseti(L, t, lua_Integer(n)) }

    func rawLength(_ t: Int32) -> Int { Int(lua_rawlen(L, t)) }

    /// What keeps the table at `t` from being a list of strings (keys 1…n,
    /// each value a string), or nil when it is one. Raw access.
    func notAListOfStrings(_ t: Int32) -> String? {
        let t = absolute(t)
        let n = rawLength(t)
        for k in stride(from: 1, through: n, by: 1) {
            rawGet(t, k)
            let ok = type(-1) == LUA_TSTRING, name = typeName(-1)
            pop()
            if !ok { return "element #\(k) is \(name)" }
        }
        var count = 0
        lua_pushnil(L)
        while lua_next(L, t) != 0 {  // …, key, value
            pop()
            count += 1
            if count > n {
                // a key past 1…n: name it (a copy: converting the key itself would confuse lua_next)
                lua_pushvalue(L, -1)
                let key = type(-1) == LUA_TSTRING ? "'\(string(-1) ?? "")'" : describeScalar(-1) ?? "of type \(typeName(-1))"
                pop(2)
                return "it has the key \(key)"
            }
        }
        return nil
    }

    // MARK: pushing

    /// Every byte, NULs too (a C string would end at the first).
    @inline(__always) func push(_ s: String) {
        var s = s
        s.withUTF8 { b in b.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(L, $0.baseAddress, $0.count) } }
    }
    @inline(__always) func push(_ n: Int) { lua_pushinteger(L, lua_Integer(n)) }
    @inline(__always) func push(_ d: Double) { lua_pushnumber(L, d) }
    @inline(__always) func push(_ b: Bool) { lua_pushboolean(L, b ? 1 : 0) }
    @inline(__always) func pushNil() { lua_pushnil(L) }
    @inline(__always) func newTable(array: Int32 = 0, hash: Int32 = 0) { lua_createtable(L, array, hash) }
    @inline(__always) func pushRegistry(_ ref: Int32) { lua_rawgeti(L, tasker_registryindex(), lua_Integer(ref)) }

    /// Anchors the top value in the registry (popped); returns its ref.
    func ref() -> Int32 { luaL_ref(L, tasker_registryindex()) }

    /// Pushes a function implemented in Swift (through the C trampoline).
    func push(_ fn: tasker_SwiftFunction, upvalues: Int32 = 0) {
        tasker_pushfunction(L, fn, upvalues)
    }

    /// "chunk:line" of the function `level` levels up, or "".
    func whereString(level: Int32 = 1) -> String {
        luaL_where(L, level)
        defer { pop() }
        var w = string(-1) ?? ""
        while w.last == " " || w.last == ":" { w.removeLast() }
        return w
    }

    /// A position in tasker's own Lua (chunks named `[tasker.…]`), not in
    /// the script's: a `load`ed string (`[string "…"]`) is the script's.
    static func isTaskersOwn(_ position: String) -> Bool { position.hasPrefix("[tasker.") }

    /// "chunk:line" of the Lua code that called the running C function,
    /// passing over tasker's own Lua (a chunk named `[…]`: a defined task's
    /// add function) to the script's line that called that; "" when a C
    /// function called it (`pcall(tasker.sleep, -1)`).
    func callerPosition() -> String {
        var ar = lua_Debug()
        var level: Int32 = 1
        while level < 50, lua_getstack(L, level, &ar) != 0 {
            let w = whereString(level: level)
            if !Self.isTaskersOwn(w) { return w }
            level += 1
        }
        return whereString(level: 1)
    }

    /// "file:line" of the innermost Lua function on this thread's stack (a
    /// C function such as a metamethod called from C has no line, and
    /// tasker's own Lua, a chunk named `[…]`, is passed over), or nil.
    /// Works on a thread whose resume just failed: its stack is kept.
    func innermostLuaPosition() -> String? {
        var ar = lua_Debug()
        var level: Int32 = 0
        while level < 200, lua_getstack(L, level, &ar) != 0 {
            let w = whereString(level: level)
            if !w.isEmpty, !Self.isTaskersOwn(w) { return w }
            level += 1
        }
        return nil
    }
}
