import CLua
import CLuaShim
import TaskerCore
import Glibc

/// Lua value -> JSON text, with raw table access: `json.encode`, and the
/// JSON a log field, a request body or a remote call's args is sent as.
/// Strings in the `json` module's form (`JSONEscaping.lua`), floats as
/// Swift writes them (`1.0`), keys sorted.
struct LuaJSONEncoder {
    let module: JSONModule
    let L: OpaquePointer
    let pretty: Bool
    /// Keys (lower-case) whose values are written as `"***"`, at any depth
    /// (a log line's fields: a request's headers logged as a table).
    /// Keys whose values are written as `***` (nil: none).
    let maskedKeys: ((String) -> Bool)?
    /// For reading, not for reading back (a log line): invalid UTF-8 is
    /// written with U+FFFD, NaN and infinities, functions and userdata as
    /// the strings Lua shows for them, instead of refusing the value.
    let lossy: Bool
    var out: [UInt8] = []
    /// The text reads back as another value: an integer key was written as
    /// a string (`{[1] = a, [3] = c}`, `{a, x = b}`), or a hole of a
    /// `json.array` table as `null` (it reads back as `json.null`).
    private(set) var readsBackOtherwise = false

    init(module: JSONModule, L: OpaquePointer, pretty: Bool, maskedKeys: ((String) -> Bool)? = nil, lossy: Bool = false) {
        self.module = module
        self.L = L
        self.pretty = pretty
        self.maskedKeys = maskedKeys
        self.lossy = lossy
        out.reserveCapacity(256)
    }

    /// Whether the value under the string key at `k` is written as `***`.
    private func masks(_ k: Int32) -> Bool {
        guard let maskedKeys, let key = LuaStack(L).string(k) else { return false }
        return maskedKeys(key)
    }

    mutating func encode(_ i: Int32, depth: Int) throws(JSONError) {
        let s = LuaStack(L)
        switch lua_type(L, i) {
        case LUA_TNIL, LUA_TNONE: append("null")
        case LUA_TBOOLEAN: append(s.boolean(i) ? "true" : "false")
        case LUA_TNUMBER:
            if tasker_isinteger_value(L, i) != 0 {
                DecimalText.append(Int64(tasker_tointeger(L, i, nil)), to: &out)
            } else {
                let d = tasker_tonumber(L, i, nil)
                guard d.isFinite else {
                    if lossy { return quoted(d.isNaN ? "nan" : (d > 0 ? "inf" : "-inf")) }
                    throw JSONError(message: "cannot encode \(d.isNaN ? "NaN" : (d > 0 ? "infinity" : "-infinity")) (JSON has neither)")
                }
                JSONDoubles.swift.append(d, to: &out)
            }
        case LUA_TSTRING: try string(i)
        case LUA_TLIGHTUSERDATA where lua_touserdata(L, i) == JSONModule.null: append("null")
        case LUA_TTABLE:
            guard depth < JSONModule.maxDepth else {
                throw JSONError(message: "nested deeper than \(JSONModule.maxDepth) levels (a table that contains itself?)")
            }
            _ = lua_checkstack(L, 8)
            if let n = arrayLength(i) { try array(i, n, depth: depth) } else { try object(i, depth: depth) }
        default:
            if lossy { return quoted(s.describe(i)) }
            throw JSONError(message: "cannot encode a \(s.typeName(i))")
        }
    }

    /// n if the table is a sequence 1...n (or marked with json.array), else nil.
    private func arrayLength(_ t: Int32) -> Int? {
        let marked = module.isArray(L, t)
        var count = 0
        var maxKey = 0
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            tasker_pop(L, 1)
            guard lua_type(L, -1) == LUA_TNUMBER, tasker_isinteger_value(L, -1) != 0 else {
                tasker_pop(L, 1)
                return nil
            }
            let k = Int(tasker_tointeger(L, -1, nil))
            guard k >= 1 else {
                tasker_pop(L, 1)
                return nil
            }
            count += 1
            maxKey = max(maxKey, k)
        }
        if count == 0 { return marked ? 0 : nil }
        return maxKey == count || marked ? maxKey : nil
    }

    private mutating func array(_ t: Int32, _ n: Int, depth: Int) throws(JSONError) {
        append("[")
        for k in 0..<n {
            if k > 0 { append(",") }
            newline(depth + 1)
            if lua_rawgeti(L, t, lua_Integer(k + 1)) == LUA_TNIL { readsBackOtherwise = true }
            try encode(lua_gettop(L), depth: depth + 1)
            tasker_pop(L, 1)
        }
        if n > 0 { newline(depth) }
        append("]")
    }

    private mutating func object(_ t: Int32, depth: Int) throws(JSONError) {
        if try smallObject(t, depth: depth) { return }
        // Sorted keys: stable output for reports and diffs.
        var keys: [(String, Int32)] = []
        lua_createtable(L, 0, 0)
        let keep = lua_gettop(L)
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            tasker_pop(L, 1)
            let name: String
            switch lua_type(L, -1) {
            case LUA_TSTRING:
                var len = 0
                let p = tasker_tostring(L, -1, &len)!
                let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
                // a key is a string like any other: not UTF-8, refused (it
                // was written with U+FFFD and read back as another key)
                guard lossy || String(validating: bytes, as: UTF8.self) != nil else {
                    tasker_pop(L, 2)
                    throw JSONError(message: "cannot encode a string that is not valid UTF-8")
                }
                name = String(decoding: bytes, as: UTF8.self)
            case LUA_TNUMBER where tasker_isinteger_value(L, -1) != 0:
                name = String(tasker_tointeger(L, -1, nil))
                readsBackOtherwise = true
            default:
                if lossy {
                    name = LuaStack(L).describe(-1)  // `true`, `1.5`: as Lua shows it
                } else {
                    let type = LuaStack(L).typeName(-1)
                    tasker_pop(L, 2)
                    throw JSONError(message: "cannot encode a table key of type \(type)")
                }
            }
            lua_pushvalue(L, -1)
            lua_rawseti(L, keep, lua_Integer(keys.count + 1))
            keys.append((name, Int32(keys.count + 1)))
        }
        keys.sort { $0.0 < $1.0 }
        append("{")
        for (index, (name, slot)) in keys.enumerated() {
            if index > 0 { append(",") }
            newline(depth + 1)
            quoted(name)
            append(pretty ? ": " : ":")
            if let maskedKeys, maskedKeys(name) {
                quoted("***")
                continue
            }
            lua_rawgeti(L, keep, lua_Integer(slot))
            lua_rawget(L, t)
            try encode(lua_gettop(L), depth: depth + 1)
            tasker_pop(L, 1)
        }
        if !keys.isEmpty { newline(depth) }
        append("}")
        tasker_pop(L, 1)
    }

    /// Entries a table may have to take `smallObject`'s way.
    static let smallObjectEntries = 16

    /// The usual object (a task's args, a log line's fields): a few keys,
    /// all ASCII strings. Its keys and values are left on the stack and
    /// sorted in place by their bytes, which for ASCII is the order of
    /// Swift's String comparison the general way sorts by, so the text is
    /// the same; no String, array or key table is made for it (that was
    /// about two thirds of encoding `{i = 1}`). False, the stack as it was,
    /// for any other table.
    private mutating func smallObject(_ t: Int32, depth: Int) throws(JSONError) -> Bool {
        let most = Self.smallObjectEntries
        guard lua_checkstack(L, Int32(2 * most + 3)) != 0 else { return false }
        let base = lua_gettop(L)
        var n = 0
        lua_pushnil(L)
        // Each pair stays (key, value); a copy of the key goes on for the next.
        while lua_next(L, t) != 0 {
            guard n < most, lua_type(L, -2) == LUA_TSTRING, Self.isASCII(L, -2) else {
                lua_settop(L, base)
                return false
            }
            n += 1
            lua_pushvalue(L, -2)
        }
        guard n > 0 else {
            lua_settop(L, base)
            return false
        }
        try withUnsafeTemporaryAllocation(of: Int32.self, capacity: n) { order throws(JSONError) in
            for k in 0..<n { order[k] = base + 1 + Int32(2 * k) }
            // insertion sort of at most 16 keys, by their bytes
            for k in 1..<n {
                let key = order[k]
                var j = k
                while j > 0, Self.bytesBefore(L, key, order[j - 1]) {
                    order[j] = order[j - 1]
                    j -= 1
                }
                order[j] = key
            }
            append("{")
            for k in 0..<n {
                if k > 0 { append(",") }
                newline(depth + 1)
                var len = 0
                let p = tasker_tostring(L, order[k], &len)!
                JSONEscaping.lua.append(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len), to: &out)
                append(pretty ? ": " : ":")
                if masks(order[k]) {
                    quoted("***")
                } else {
                    try encode(order[k] + 1, depth: depth + 1)
                }
            }
        }
        newline(depth)
        append("}")
        lua_settop(L, base)
        return true
    }

    private static func isASCII(_ L: OpaquePointer, _ i: Int32) -> Bool {
        var len = 0
        let p = UnsafeRawPointer(tasker_tostring(L, i, &len)!).assumingMemoryBound(to: UInt8.self)
        for k in 0..<len where p[k] >= 0x80 { return false }
        return true
    }

    /// Whether the string at `a` sorts before the one at `b`, byte by byte.
    private static func bytesBefore(_ L: OpaquePointer, _ a: Int32, _ b: Int32) -> Bool {
        var la = 0, lb = 0
        let pa = tasker_tostring(L, a, &la)!, pb = tasker_tostring(L, b, &lb)!
        let c = memcmp(pa, pb, min(la, lb))
        return c != 0 ? c < 0 : la < lb
    }

    private mutating func string(_ i: Int32) throws(JSONError) {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
        guard String(validating: bytes, as: UTF8.self) != nil else {
            if lossy { return quoted(String(decoding: bytes, as: UTF8.self)) }
            throw JSONError(message: "cannot encode a string that is not valid UTF-8")
        }
        JSONEscaping.lua.append(bytes, to: &out)
    }

    private mutating func quoted(_ s: String) {
        JSONEscaping.lua.append(s, to: &out)
    }

    private mutating func newline(_ depth: Int) {
        guard pretty else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: depth * 2))
    }

    private mutating func append(_ s: String) { out.append(contentsOf: s.utf8) }
}
