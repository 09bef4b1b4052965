import CLua
import CLuaShim
import TaskerCore

/// The per-task work of a defined task's add, done in Swift where Lua was
/// slow: the default name of the usual args, and the check that args are
/// JSON. Both run once for every task a definition adds.
extension DefineModule {
    /// `fast_name(name, args)`: the default name (`resize(dst=b.png,
    /// src=a.png)`) when args are the usual kind: nil, or a table without
    /// a metatable whose keys are ASCII strings and whose values are
    /// strings without `://`, integers, booleans, `json.null` or tables, the text short
    /// enough not to be cut. nil otherwise: the Lua `short_args` then names
    /// it, and both give the same text (Lua's `tostring` of an integer went
    /// through `snprintf`, a third of a no-op task's add).
    func fastName(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TSTRING else { return 0 }
        if lua_type(L, 2) <= LUA_TNIL {
            lua_settop(L, 1)
            return 1
        }
        guard lua_type(L, 2) == LUA_TTABLE, lua_getmetatable(L, 2) == 0 else { return 0 }
        lua_settop(L, 2)
        let most = Self.fastNameMaxKeys
        guard lua_checkstack(L, Int32(2 * most + 4)) != 0 else { return 0 }
        // Keys and values are left on the stack (3, 4, 5, 6…), so their
        // bytes stay valid while they are sorted and written: no copies.
        var count: Int32 = 0
        lua_pushnil(L)
        while lua_next(L, 2) != 0 {
            count += 1
            guard count <= most, lua_type(L, -2) == LUA_TSTRING, Self.isPlainKey(Self.bytes(L, -2)),
                  Self.showsLikeLua(L, -1) else { return 0 }
            lua_pushvalue(L, -2)
        }
        guard count > 0 else {
            lua_settop(L, 1)
            return 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(80)
        out.append(contentsOf: Self.bytes(L, 1))
        out.append(UInt8(ascii: "("))
        let textStart = out.count
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: Int(count)) { buffer in
            var order = buffer
            for i in 0..<Int(count) { order[i] = 3 + 2 * Int32(i) }
            order.sort { Self.bytes(L, $0).lexicographicallyPrecedes(Self.bytes(L, $1)) }
            for (n, k) in order.enumerated() {
                if n == 8 {
                    out.append(contentsOf: ", …".utf8)
                    break
                }
                if n > 0 { out.append(contentsOf: ", ".utf8) }
                let key = Self.bytes(L, k)
                out.append(contentsOf: key)
                out.append(UInt8(ascii: "="))
                Self.appendShown(L, k + 1, secret: Self.isSecretKey(key), to: &out)
            }
        }
        guard out.count - textStart <= 60 else { return 0 }  // the cut counts characters: Lua's
        out.append(UInt8(ascii: ")"))
        _ = out.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { lua_pushlstring(L, $0.baseAddress, $0.count) }
        }
        return 1
    }

    /// More keys than this: Lua names it (the name shows eight).
    static let fastNameMaxKeys = 16

    /// `check(value)`: nil when `value` is JSON, else why not (what
    /// `json.encode` would raise), without making the text a string.
    func jsonProblem(_ L: OpaquePointer) -> Int32 {
        do {
            _ = try runtime.json.encodeJSON(L, 1)
            return 0
        } catch {
            LuaStack(L).push(error.message)
            return 1
        }
    }

    /// The bytes of the string at `i` (valid while it is on the stack).
    private static func bytes(_ L: OpaquePointer, _ i: Int32) -> UnsafeBufferPointer<UInt8> {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        return UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
    }

    /// ASCII without NUL: Lua compares such keys byte by byte in the C
    /// locale tasker runs in, as the sort here does.
    private static func isPlainKey(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        key.allSatisfy { $0 != 0 && $0 < 0x80 }
    }

    /// Whether `shown_value` shows the value at `i` as `appendShown` does:
    /// not for floats, URLs (their passwords are hidden), functions…
    private static func showsLikeLua(_ L: OpaquePointer, _ i: Int32) -> Bool {
        switch lua_type(L, i) {
        case LUA_TTABLE, LUA_TBOOLEAN: return true
        case LUA_TNUMBER: return tasker_isinteger_value(L, i) != 0
        case LUA_TSTRING: return !containsURLMark(bytes(L, i))
        case LUA_TLIGHTUSERDATA: return lua_touserdata(L, i) == JSONModule.null
        default: return false
        }
    }

    private static func appendShown(_ L: OpaquePointer, _ i: Int32, secret: Bool, to out: inout [UInt8]) {
        switch lua_type(L, i) {
        case LUA_TTABLE: out.append(contentsOf: "{…}".utf8)
        case _ where secret: out.append(contentsOf: "***".utf8)
        case LUA_TSTRING: out.append(contentsOf: bytes(L, i))
        case LUA_TNUMBER: DecimalText.append(Int64(tasker_tointeger(L, i, nil)), to: &out)
        case LUA_TLIGHTUSERDATA: out.append(contentsOf: "null".utf8)  // json.null
        default: out.append(contentsOf: (lua_toboolean(L, i) != 0 ? "true" : "false").utf8)
        }
    }

    private static func containsURLMark(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard b.count >= 3 else { return false }
        for j in 0...(b.count - 3) where b[j] == UInt8(ascii: ":") && b[j + 1] == UInt8(ascii: "/") && b[j + 2] == UInt8(ascii: "/") {
            return true
        }
        return false
    }

    /// `secret_key`: the key, lower-cased, contains one of `secretWords`.
    private static func isSecretKey(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }
        for word in secretParts where word.count <= key.count {
            search: for start in 0...(key.count - word.count) {
                for (j, c) in word.enumerated() where lower(key[start + j]) != c { continue search }
                return true
            }
        }
        return false
    }

    /// Words that make a key's value `***` in a default name (the rule of
    /// --var keys), for Swift and for the Lua `secret_parts`.
    static let secretWords = ["token", "secret", "passw", "pwd", "bearer", "key", "auth", "credential", "cookie", "dsn"]
    private static let secretParts: [[UInt8]] = secretWords.map { Array($0.utf8) }
}
