import CLua
import CLuaShim
import Foundation
import TaskerCore

/// Reads stored values back onto the Lua stack.
struct StoredValueDecoder {
    let L: OpaquePointer
    /// The text's tokens (the lexer every JSON read on the Swift side uses).
    var s: JSONScanner
    /// The tagged form: `$` objects are tags.
    let tags: Bool
    /// The registry ref of `json.array`'s metatable (0: none).
    let arrayMeta: Int32
    /// The registry ref of error tables' metatable (0: none).
    var errorMeta: Int32 = 0

    struct Bad: Error {}
    static let maxDepth = 300

    /// Pushes the values of stored `text` and returns how many; -1 (nothing
    /// pushed) if it is not stored values this version reads.
    static func push(_ text: String, onto L: OpaquePointer, arrayMeta: Int32, errorMeta: Int32 = 0) -> Int32 {
        let top = lua_gettop(L)
        var text = text
        let n: Int32? = text.withUTF8 { bytes in
            // The tagged form: the wrapper, then the list.
            var d = StoredValueDecoder(L: L, s: JSONScanner(bytes), tags: bytes.first == UInt8(ascii: "{"), arrayMeta: arrayMeta,
                                       errorMeta: errorMeta)
            do {
                if d.tags {
                    try d.expect("{\"$v\":\(StoredValueCodec.version),\"values\":")
                }
                let n = try d.list()
                if d.tags { try d.expect("}") }
                d.s.skipSpace()
                guard d.s.peek() == nil else { return nil }
                return n
            } catch {
                return nil
            }
        }
        guard let n else {
            lua_settop(L, top)
            return -1
        }
        return n
    }

    /// A JSON array's elements as values on the stack (a null is nil).
    private mutating func list() throws(Bad) -> Int32 {
        skipSpace()
        try expect("[")
        var n: Int32 = 0
        skipSpace()
        if peek() == UInt8(ascii: "]") { s.position += 1; return 0 }
        while true {
            guard lua_checkstack(L, 4) != 0 else { throw Bad() }
            try value(depth: 0)
            n += 1
            skipSpace()
            if peek() == UInt8(ascii: ",") { s.position += 1; continue }
            try expect("]")
            return n
        }
    }

    private func peek() -> UInt8? { s.peek() }

    private mutating func skipSpace() { s.skipSpace() }

    private mutating func expect(_ text: String) throws(Bad) {
        for b in text.utf8 {
            guard peek() == b else { throw Bad() }
            s.position += 1
        }
    }

    /// Pushes one value.
    private mutating func value(depth: Int) throws(Bad) {
        guard depth < Self.maxDepth, lua_checkstack(L, 6) != 0 else { throw Bad() }
        skipSpace()
        guard let b = peek() else { throw Bad() }
        switch b {
        case UInt8(ascii: "{"): try object(depth: depth)
        case UInt8(ascii: "["): try array(depth: depth)
        case UInt8(ascii: "\""): try pushString()
        case UInt8(ascii: "t"): try expect("true"); lua_pushboolean(L, 1)
        case UInt8(ascii: "f"): try expect("false"); lua_pushboolean(L, 0)
        case UInt8(ascii: "n"): try expect("null"); lua_pushnil(L)
        default: try number()
        }
    }

    private mutating func array(depth: Int) throws(Bad) {
        s.position += 1
        lua_createtable(L, 0, 0)
        skipSpace()
        if peek() == UInt8(ascii: "]") { s.position += 1; return }
        var k: lua_Integer = 1
        while true {
            try value(depth: depth + 1)
            if lua_type(L, -1) == LUA_TNIL { tasker_pop(L, 1) } else { lua_rawseti(L, -2, k) }
            k += 1
            skipSpace()
            if peek() == UInt8(ascii: ",") { s.position += 1; continue }
            try expect("]")
            return
        }
    }

    private mutating func object(depth: Int) throws(Bad) {
        s.position += 1
        skipSpace()
        if peek() == UInt8(ascii: "}") { s.position += 1; lua_createtable(L, 0, 0); return }
        let keyStart = s.position
        let key = try rawString()
        if tags, key.first == UInt8(ascii: "$") {
            skipSpace()
            try expect(":")
            try tag(key, depth: depth)
            skipSpace()
            try expect("}")
            return
        }
        s.position = keyStart
        lua_createtable(L, 0, 0)
        while true {
            skipSpace()
            try pushString()
            skipSpace()
            try expect(":")
            try value(depth: depth + 1)
            if lua_type(L, -1) == LUA_TNIL { tasker_pop(L, 2) } else { lua_rawset(L, -3) }
            skipSpace()
            if peek() == UInt8(ascii: ",") { s.position += 1; continue }
            try expect("}")
            return
        }
    }

    private mutating func tag(_ name: [UInt8], depth: Int) throws(Bad) {
        skipSpace()
        switch String(decoding: name, as: UTF8.self) {
        case "$float":
            switch String(decoding: try rawString(), as: UTF8.self) {
            case "nan": lua_pushnumber(L, .nan)
            case "-nan": lua_pushnumber(L, -Double.nan)
            case "inf": lua_pushnumber(L, .infinity)
            case "-inf": lua_pushnumber(L, -.infinity)
            case "-0": lua_pushnumber(L, -0.0)
            default: throw Bad()
            }
        case "$bytes":
            guard let data = Data(base64Encoded: Data(try rawString())) else { throw Bad() }
            data.withUnsafeBytes { pushBytes(UnsafeRawBufferPointer($0)) }
        case "$array", "$error":
            // a table that had tasker's metatable: it gets it back
            try value(depth: depth + 1)
            guard lua_type(L, -1) == LUA_TTABLE else { throw Bad() }
            let meta = name == Array("$array".utf8) ? arrayMeta : errorMeta
            if meta != 0 {
                lua_rawgeti(L, tasker_registryindex(), lua_Integer(meta))
                lua_setmetatable(L, -2)
            }
        case "$null":
            try expect("true")
            lua_pushlightuserdata(L, JSONModule.null)
        case "$pairs":
            try expect("[")
            lua_createtable(L, 0, 0)
            skipSpace()
            if peek() == UInt8(ascii: "]") { s.position += 1; return }
            while true {
                skipSpace()
                try expect("[")
                try value(depth: depth + 1)
                let keyType = lua_type(L, -1)
                if keyType == LUA_TNIL || (keyType == LUA_TNUMBER && tasker_tonumber(L, -1, nil).isNaN) { throw Bad() }
                skipSpace()
                try expect(",")
                try value(depth: depth + 1)
                skipSpace()
                try expect("]")
                lua_rawset(L, -3)
                skipSpace()
                if peek() == UInt8(ascii: ",") { s.position += 1; continue }
                try expect("]")
                return
            }
        default:
            throw Bad()  // a tag of a later version
        }
    }

    private mutating func pushString() throws(Bad) {
        try rawString().withUnsafeBytes { pushBytes($0) }
    }

    private func pushBytes(_ b: UnsafeRawBufferPointer) {
        if let base = b.baseAddress, b.count > 0 {
            _ = lua_pushlstring(L, base.assumingMemoryBound(to: CChar.self), b.count)
        } else {
            _ = lua_pushlstring(L, "", 0)
        }
    }

    /// A JSON string's bytes, escapes decoded.
    private mutating func rawString() throws(Bad) -> [UInt8] {
        var out: [UInt8] = []
        do { try s.string(into: &out) } catch { throw Bad() }
        return out
    }

    /// An integer when written without `.` or exponent (and it fits),
    /// else a float.
    private mutating func number() throws(Bad) {
        guard let b = peek(), b == UInt8(ascii: "-") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) else { throw Bad() }
        let n: JSONNumber
        do { n = try s.number() } catch { throw Bad() }
        switch n {
        case .integer(let i): lua_pushinteger(L, lua_Integer(i))
        case .double(let d): lua_pushnumber(L, d)
        }
    }
}
