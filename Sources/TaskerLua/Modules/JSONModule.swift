import CLua
import CLuaShim
import Foundation
import TaskerCore

/// The `json` module (README, Processes): `json.encode(value [, {pretty=true}])`,
/// `json.decode(text)`, `json.null`, `json.array(t)`. Integers stay
/// integers and floats floats; objects are written with sorted keys; an
/// empty table is `{}` unless marked with `json.array`; decoded arrays are
/// marked, so they encode back as arrays. Errors are kind `json`.
final class JSONModule: LuaModule {
    static let maxDepth = 200
    /// `json.null`: a light userdata, equal to itself only.
    static var null: UnsafeMutableRawPointer { tasker_json_null() }

    unowned let runtime: LuaRuntime
    /// The metatable that marks a table as a JSON array.
    private(set) var arrayMeta: Int32 = 0

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("array", { L in JSONModule.this(L!).array(L!) }),
        ("decode", { L in JSONModule.this(L!).decode(L!) }),
        ("encode", { L in JSONModule.this(L!).encode(L!) }),
    ]

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        s.newTable(hash: 1)
        s.push("json.array")
        s.rawSet(-2, "__name")
        arrayMeta = s.ref()
        pushTable(Self.functions, in: L)
        lua_pushlightuserdata(L, Self.null)
        s.rawSet(-2, "null")
        setGlobal("json", in: L)
    }

    func isArray(_ L: OpaquePointer, _ i: Int32) -> Bool { runtime.hasMetatable(L, i, arrayMeta) }
}

struct JSONError: Error {
    let message: String
}

extension JSONModule {
    func array(_ L: OpaquePointer) -> Int32 {
        if lua_type(L, 1) <= LUA_TNIL { lua_settop(L, 0); lua_createtable(L, 0, 0) }
        guard lua_type(L, 1) == LUA_TTABLE else { return runtime.argError(L, "json.array", 1, "table or nil") }
        lua_settop(L, 1)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(arrayMeta))
        lua_setmetatable(L, 1)
        return 1
    }

    func encode(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        var pretty = false
        if !s.isNoneOrNil(2) {
            guard s.type(2) == LUA_TTABLE else { return runtime.argError(L, "json.encode", 2, "table") }
            s.rawGet(2, "pretty")
            pretty = s.boolean(-1)
            s.pop()
        }
        lua_settop(L, 1)
        let out: [UInt8]
        do {
            out = try encodeJSON(L, 1, pretty: pretty)
        } catch {
            return runtime.raise(L, TaskFailure(.json, error.message, position: s.whereString(level: 1)))
        }
        _ = out.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { lua_pushlstring(L, $0.baseAddress, $0.count) }
        }
        return 1
    }

    /// The JSON text of the value at `i`.
    func encodeJSON(_ L: OpaquePointer, _ i: Int32, pretty: Bool = false) throws(JSONError) -> [UInt8] {
        var encoder = JSONEncoder(module: self, L: L, pretty: pretty)
        try encoder.encode(lua_absindex(L, i), depth: 0)
        return encoder.out
    }

    func decode(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TSTRING else { return runtime.argError(L, "json.decode", 1, "string") }
        lua_settop(L, 1)
        return decodeJSONString(L, 1, fn: "json.decode")
    }

    /// Replaces the string at `i` (the top) by its decoded value, or raises
    /// kind `json` at the caller's line.
    func decodeJSONString(_ L: OpaquePointer, _ i: Int32, fn: String) -> Int32 {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
        do {
            try decodeJSON(L, bytes)
        } catch {
            return runtime.raise(L, TaskFailure(.json, error.message, position: LuaStack(L).whereString(level: 1)))
        }
        return 1
    }

    /// Pushes the value of the JSON text `bytes`; pushes nothing if it fails.
    func decodeJSON(_ L: OpaquePointer, _ bytes: UnsafeBufferPointer<UInt8>) throws(JSONError) {
        let base = lua_gettop(L)
        var decoder = JSONDecoder(module: self, L: L, bytes: bytes)
        do {
            try decoder.decodeDocument()
        } catch {
            lua_settop(L, base)
            throw error
        }
    }
}

extension TaskFailure {
    init(_ kind: Kind, _ message: String, position: String) {
        self.init(kind, message)
        self.position = position.isEmpty ? nil : position
    }
}

/// Lua value -> JSON text, with raw table access.
private struct JSONEncoder {
    let module: JSONModule
    let L: OpaquePointer
    let pretty: Bool
    var out: [UInt8] = []

    init(module: JSONModule, L: OpaquePointer, pretty: Bool) {
        self.module = module
        self.L = L
        self.pretty = pretty
        out.reserveCapacity(256)
    }

    mutating func encode(_ i: Int32, depth: Int) throws(JSONError) {
        let s = LuaStack(L)
        switch lua_type(L, i) {
        case LUA_TNIL, LUA_TNONE: append("null")
        case LUA_TBOOLEAN: append(s.boolean(i) ? "true" : "false")
        case LUA_TNUMBER:
            if tasker_isinteger_value(L, i) != 0 {
                append(String(tasker_tointeger(L, i, nil)))
            } else {
                let d = tasker_tonumber(L, i, nil)
                guard d.isFinite else {
                    throw JSONError(message: "cannot encode \(d.isNaN ? "NaN" : (d > 0 ? "infinity" : "-infinity")) (JSON has neither)")
                }
                append("\(d)")
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
            lua_rawgeti(L, t, lua_Integer(k + 1))
            try encode(lua_gettop(L), depth: depth + 1)
            tasker_pop(L, 1)
        }
        if n > 0 { newline(depth) }
        append("]")
    }

    private mutating func object(_ t: Int32, depth: Int) throws(JSONError) {
        // Sorted keys: stable output for reports and diffs.
        var keys: [(String, Int32)] = []
        lua_createtable(L, 0, 0)
        let keep = lua_gettop(L)
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            tasker_pop(L, 1)
            let name: String
            switch lua_type(L, -1) {
            case LUA_TSTRING: name = LuaStack(L).string(-1) ?? ""
            case LUA_TNUMBER where tasker_isinteger_value(L, -1) != 0: name = String(tasker_tointeger(L, -1, nil))
            default:
                let type = LuaStack(L).typeName(-1)
                tasker_pop(L, 2)
                throw JSONError(message: "cannot encode a table key of type \(type)")
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
            try quoted(name)
            append(pretty ? ": " : ":")
            lua_rawgeti(L, keep, lua_Integer(slot))
            lua_rawget(L, t)
            try encode(lua_gettop(L), depth: depth + 1)
            tasker_pop(L, 1)
        }
        if !keys.isEmpty { newline(depth) }
        append("}")
        tasker_pop(L, 1)
    }

    private mutating func string(_ i: Int32) throws(JSONError) {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw JSONError(message: "cannot encode a string that is not valid UTF-8")
        }
        escape(bytes)
    }

    private mutating func quoted(_ s: String) throws(JSONError) {
        var s = s
        s.withUTF8 { escape($0) }
    }

    private mutating func escape(_ bytes: UnsafeBufferPointer<UInt8>) {
        out.append(UInt8(ascii: "\""))
        for b in bytes {
            switch b {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x08: append("\\b")
            case 0x0C: append("\\f")
            case 0..<0x20: append(String(format: "\\u%04x", b))
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private mutating func newline(_ depth: Int) {
        guard pretty else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: depth * 2))
    }

    private mutating func append(_ s: String) { out.append(contentsOf: s.utf8) }
}

/// JSON text -> Lua values, pushed as they are parsed.
private struct JSONDecoder {
    let module: JSONModule
    let L: OpaquePointer
    let bytes: UnsafeBufferPointer<UInt8>
    var i = 0

    init(module: JSONModule, L: OpaquePointer, bytes: UnsafeBufferPointer<UInt8>) {
        self.module = module
        self.L = L
        self.bytes = bytes
    }

    mutating func decodeDocument() throws(JSONError) {
        skipSpace()
        try value(depth: 0)
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected \(describe(i)) after the value") }
    }

    /// "at line 3, column 7 (byte 20)".
    private func fail(_ what: String) -> JSONError {
        var line = 1, column = 1
        for b in bytes[0..<min(i, bytes.count)] {
            if b == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return JSONError(message: "\(what) at line \(line), column \(column) (byte \(i + 1))")
    }

    private func describe(_ at: Int) -> String {
        guard at < bytes.count else { return "end of text" }
        let b = bytes[at]
        return b >= 0x20 && b < 0x7F ? "'\(Character(UnicodeScalar(b)))'" : String(format: "byte 0x%02x", b)
    }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func literal(_ word: String) throws(JSONError) {
        for b in word.utf8 {
            guard i < bytes.count, bytes[i] == b else { throw fail("invalid literal (expected '\(word)')") }
            i += 1
        }
    }

    private mutating func value(depth: Int) throws(JSONError) {
        guard depth < JSONModule.maxDepth else { throw fail("nested deeper than \(JSONModule.maxDepth) levels") }
        guard i < bytes.count else { throw fail("unexpected end of text") }
        _ = lua_checkstack(L, 4)
        switch bytes[i] {
        case UInt8(ascii: "{"): try object(depth: depth)
        case UInt8(ascii: "["): try array(depth: depth)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"): try literal("true"); lua_pushboolean(L, 1)
        case UInt8(ascii: "f"): try literal("false"); lua_pushboolean(L, 0)
        case UInt8(ascii: "n"): try literal("null"); lua_pushlightuserdata(L, JSONModule.null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
        default: throw fail("unexpected \(describe(i))")
        }
    }

    private mutating func object(depth: Int) throws(JSONError) {
        i += 1
        lua_createtable(L, 0, 4)
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipSpace()
            try value(depth: depth + 1)
            lua_rawset(L, -3)
            skipSpace()
            guard i < bytes.count else { throw fail("expected ',' or '}'") }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return }
            guard bytes[i] == UInt8(ascii: ",") else { throw fail("expected ',' or '}'") }
            i += 1
        }
    }

    private mutating func array(depth: Int) throws(JSONError) {
        i += 1
        lua_createtable(L, 4, 0)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(module.arrayMeta))
        lua_setmetatable(L, -2)
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return }
        var n: lua_Integer = 0
        while true {
            skipSpace()
            try value(depth: depth + 1)
            n += 1
            lua_rawseti(L, -2, n)
            skipSpace()
            guard i < bytes.count else { throw fail("expected ',' or ']'") }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return }
            guard bytes[i] == UInt8(ascii: ",") else { throw fail("expected ',' or ']'") }
            i += 1
        }
    }

    private mutating func number() throws(JSONError) {
        let start = i
        var isFloat = false
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) else { throw fail("invalid number") }
        if bytes[i] == UInt8(ascii: "0"), i + 1 < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i + 1]) {
            throw fail("invalid number (leading zero)")
        }
        func digits() { while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 } }
        digits()
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            isFloat = true
            i += 1
            let before = i
            digits()
            guard i > before else { throw fail("invalid number (no digits after '.')") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            isFloat = true
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            let before = i
            digits()
            guard i > before else { throw fail("invalid number (no digits in the exponent)") }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if !isFloat, let n = Int64(text) {
            lua_pushinteger(L, lua_Integer(n))
        } else if let d = Double(text) {
            lua_pushnumber(L, d)
        } else {
            throw fail("invalid number")
        }
    }

    private mutating func string() throws(JSONError) {
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { i += 1; break }
            if b < 0x20 { throw fail("control character in string") }
            if b != UInt8(ascii: "\\") { out.append(b); i += 1; continue }
            i += 1
            guard i < bytes.count else { throw fail("unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("lone surrogate in \\u escape")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("lone surrogate in \\u escape")
                }
                out.append(contentsOf: String(Character(UnicodeScalar(scalar)!)).utf8)
            default:
                i -= 1
                let shown = e >= 0x20 && e < 0x7F ? String(Character(UnicodeScalar(e))) : String(format: "x%02x", e)
                throw fail("invalid escape '\\\(shown)'")
            }
        }
        out.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(L, $0.baseAddress, $0.count) }
        }
    }

    private mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[i..<(i + 4)], as: UTF8.self), radix: 16) else {
            throw fail("invalid \\u escape")
        }
        i += 4
        return v
    }
}

extension LuaRuntime {
    /// The json module (HTTP encodes `json=` bodies and decodes `resp:json()` with it).
    var json: JSONModule { module(JSONModule.self) }
}
