import CLua
import CLuaShim
import TaskerCore

/// JSON text -> Lua values, pushed as they are parsed (`json.decode`,
/// `resp:json()`); the tokens are `JSONScanner`'s, as for every JSON read
/// on the Swift side. Arrays get `json.array`'s mark, `null` is `json.null`.
struct LuaJSONDecoder {
    let module: JSONModule
    let L: OpaquePointer
    private var s: JSONScanner
    /// A string's bytes, reused from one string to the next.
    private var buffer: [UInt8] = []

    init(module: JSONModule, L: OpaquePointer, bytes: UnsafeBufferPointer<UInt8>) {
        self.module = module
        self.L = L
        s = JSONScanner(bytes)
    }

    mutating func decodeDocument() throws(JSONReadError) {
        s.skipSpace()
        try value(depth: 0)
        try s.end()
    }

    private mutating func value(depth: Int) throws(JSONReadError) {
        guard depth < JSONModule.maxDepth else { throw s.fail("nested deeper than \(JSONModule.maxDepth) levels") }
        guard let b = s.peek() else { throw s.fail("unexpected end of text") }
        _ = lua_checkstack(L, 4)
        switch b {
        case UInt8(ascii: "{"): try object(depth: depth)
        case UInt8(ascii: "["): try array(depth: depth)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"): try s.literal("true"); lua_pushboolean(L, 1)
        case UInt8(ascii: "f"): try s.literal("false"); lua_pushboolean(L, 0)
        case UInt8(ascii: "n"): try s.literal("null"); lua_pushlightuserdata(L, JSONModule.null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try s.number() {
            case .integer(let n): lua_pushinteger(L, lua_Integer(n))
            case .double(let d): lua_pushnumber(L, d)
            }
        default: throw s.fail("unexpected \(s.describe(s.position))")
        }
    }

    private mutating func object(depth: Int) throws(JSONReadError) {
        s.position += 1
        lua_createtable(L, 0, 4)
        s.skipSpace()
        if s.peek() == UInt8(ascii: "}") {
            s.position += 1
            return
        }
        while true {
            s.skipSpace()
            guard s.peek() == UInt8(ascii: "\"") else { throw s.fail("expected a string key") }
            try string()
            s.skipSpace()
            guard s.peek() == UInt8(ascii: ":") else { throw s.fail("expected ':'") }
            s.position += 1
            s.skipSpace()
            try value(depth: depth + 1)
            lua_rawset(L, -3)
            s.skipSpace()
            switch s.peek() {
            case UInt8(ascii: "}"):
                s.position += 1
                return
            case UInt8(ascii: ","):
                s.position += 1
            default:
                throw s.fail("expected ',' or '}'")
            }
        }
    }

    private mutating func array(depth: Int) throws(JSONReadError) {
        s.position += 1
        lua_createtable(L, 4, 0)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(module.arrayMeta))
        lua_setmetatable(L, -2)
        s.skipSpace()
        if s.peek() == UInt8(ascii: "]") {
            s.position += 1
            return
        }
        var n: lua_Integer = 0
        while true {
            s.skipSpace()
            try value(depth: depth + 1)
            n += 1
            lua_rawseti(L, -2, n)
            s.skipSpace()
            switch s.peek() {
            case UInt8(ascii: "]"):
                s.position += 1
                return
            case UInt8(ascii: ","):
                s.position += 1
            default:
                throw s.fail("expected ',' or ']'")
            }
        }
    }

    private mutating func string() throws(JSONReadError) {
        buffer.removeAll(keepingCapacity: true)
        try s.string(into: &buffer)
        buffer.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(L, $0.baseAddress, $0.count) }
        }
    }
}
