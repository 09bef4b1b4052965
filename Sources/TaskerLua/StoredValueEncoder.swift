import CLua
import CLuaShim
import Foundation
import TaskerCore

/// How a task's values are kept (journal, worker results) so that they
/// come back exactly. Two forms, both JSON:
/// - plain, `[v1, v2, ...]`, when every value is JSON without loss: nil,
///   booleans, integers, finite floats, UTF-8 strings, tables that are
///   sequences without holes or have only string keys. Every version wrote
///   and reads this form.
/// - tagged, `{"$v":2,"values":[...]}`, otherwise. In it a `null` is nil
///   (also a hole in an array) and an object whose one key starts with `$`
///   is a tag: `{"$float":"nan"|"-nan"|"inf"|"-inf"|"-0"}`, `{"$error":{…}}` (an
///   error table, its metatable restored), `{"$bytes":base64}`
///   (a string that is not UTF-8), `{"$null":true}` (`json.null`) and
///   `{"$pairs":[[k,v],...]}` (any other table: integer, float and boolean
///   keys, mixed keys, a string key starting with `$`) and
///   `{"$array":...}` (a table `json.array` marked, so it encodes as `[]`).
/// Integers stay integers and floats floats (a float is always written
/// with a `.` or an exponent).
enum StoredValueCodec {
    static let maxDepth = 200
    static let version = 2
    /// How the tagged form begins (`{"$v":2,"values":[…]}`).
    static let taggedPrefix = "{\"$v\":\(version),\"values\":"  // a let: every remote call tests its args against it
}

/// Why values cannot be stored (and where: `value 1.cb[2]`). The place is
/// put together only when a value fails, from the inside out: a value that
/// stores pays nothing for it.
struct NotStorable: Error {
    let what: String
    /// Innermost first.
    var place: [String] = []

    init(reason: String) { what = reason }
    init(what: String, at place: String) {
        self.what = what
        self.place = [place]
    }

    var reason: String { place.isEmpty ? what : "\(what) at \(place.reversed().joined())" }

    func under(_ part: String) -> NotStorable {
        var e = self
        if !e.place.isEmpty { e.place.append(part) }
        return e
    }
}

/// Writes values from the Lua stack (raw access: no metamethod runs).
struct StoredValueEncoder {
    let L: OpaquePointer
    let limit: Int
    /// The registry ref of the metatable `json.array` sets (0: none).
    let arrayMeta: Int32
    /// The registry ref of tasker's error tables' metatable (0: none).
    let errorMeta: Int32
    var out: [UInt8] = []
    /// Where this encoder's output starts in `out`.
    private var base = 0
    /// A tag or a hole was written: the tagged form is needed.
    var tagged = false
    /// Tables on the way down (a cycle is one of them again).
    private var open: [UnsafeRawPointer] = []
    /// For the journal: values holding a registered secret are not stored
    /// (masked, they would come back on resume as `***`).
    var refusingSecrets = false

    init(_ L: OpaquePointer, limit: Int, arrayMeta: Int32, errorMeta: Int32 = 0) {
        self.L = L
        self.limit = limit
        self.arrayMeta = arrayMeta
        self.errorMeta = errorMeta
    }

    /// The values at `first`…`first + count - 1` as stored text.
    static func encode(_ L: OpaquePointer, first: Int32, count: Int32, limit: Int, arrayMeta: Int32,
                       errorMeta: Int32 = 0, refusingSecrets: Bool = false) throws(NotStorable) -> String {
        var out: [UInt8] = []
        try encode(L, first: first, count: count, limit: limit, arrayMeta: arrayMeta, errorMeta: errorMeta,
                   refusingSecrets: refusingSecrets, appendingTo: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The same, appended to `buffer` (the journal collects many tasks'
    /// values in one); on a failure `buffer` is as it was.
    static func encode(_ L: OpaquePointer, first: Int32, count: Int32, limit: Int, arrayMeta: Int32, errorMeta: Int32 = 0,
                       refusingSecrets: Bool = false, appendingTo buffer: inout [UInt8]) throws(NotStorable) {
        let start = buffer.count
        var e = StoredValueEncoder(L, limit: limit, arrayMeta: arrayMeta, errorMeta: errorMeta)
        e.refusingSecrets = refusingSecrets
        swap(&e.out, &buffer)
        defer { swap(&e.out, &buffer) }
        e.base = start
        do throws(NotStorable) {
            e.out.append(UInt8(ascii: "["))
            for k in 0..<count {
                if k > 0 { e.out.append(UInt8(ascii: ",")) }
                do { try e.value(first + k) } catch { throw error.under("value \(k + 1)") }
            }
            e.out.append(UInt8(ascii: "]"))
            if e.tagged {
                e.out.insert(contentsOf: StoredValueCodec.taggedPrefix.utf8, at: start)
                e.out.append(UInt8(ascii: "}"))
            }
            guard e.out.count - start <= limit else { throw e.tooBig() }
            // in a string, a key or a number's text, as JSON writes it (the
            // mask knows those forms)
            if refusingSecrets, e.out[start...].withUnsafeBufferPointer({ SecretMask.shared.occurs(in: $0) }) {
                throw NotStorable(reason: Self.holdsSecret)
            }
        } catch {
            e.out.removeSubrange(start...)
            throw error
        }
    }

    static let holdsSecret = "they hold a secret (the journal would keep it as ***)"

    private func tooBig() -> NotStorable {
        NotStorable(reason: "its values are over \(limit >> 20) MiB as JSON, the limit for a stored value")
    }

    /// What cannot be stored; the place is added on the way out.
    private func fail(_ what: String) -> NotStorable {
        NotStorable(what: what, at: "")
    }

    private mutating func append(_ s: String) {
        out.append(contentsOf: s.utf8)
    }

    private mutating func checkSize() throws(NotStorable) {
        if out.count - base > limit { throw tooBig() }
    }

    mutating func value(_ i: Int32) throws(NotStorable) {
        switch lua_type(L, i) {
        case LUA_TNIL, LUA_TNONE:
            append("null")
        case LUA_TBOOLEAN:
            append(lua_toboolean(L, i) != 0 ? "true" : "false")
        case LUA_TNUMBER:
            number(i)
        case LUA_TSTRING:
            try string(i)
        case LUA_TTABLE:
            try table(i)
        case LUA_TLIGHTUSERDATA where lua_touserdata(L, i) == JSONModule.null:
            tagged = true
            append("{\"$null\":true}")
        case LUA_TFUNCTION:
            throw fail("a function")
        case LUA_TTHREAD:
            throw fail("a coroutine")
        default:
            throw fail(lua_type(L, i) == LUA_TLIGHTUSERDATA ? "a light userdata" : "a userdata")
        }
    }

    private mutating func number(_ i: Int32) {
        if tasker_isinteger_value(L, i) != 0 {
            DecimalText.append(Int64(tasker_tointeger(L, i, nil)), to: &out)
            return
        }
        let d = tasker_tonumber(L, i, nil)
        // NaN's sign too: Lua prints 0/0 as "-nan" here, and a value must come back as it was
        let special: String? = d.isNaN ? (d.sign == .minus ? "-nan" : "nan") : d == .infinity ? "inf" : d == -.infinity ? "-inf"
            : (d == 0 && d.sign == .minus) ? "-0" : nil
        if let special {
            tagged = true
            append("{\"$float\":\"\(special)\"}")
        } else {
            // The shortest text that reads back as the same double; it
            // always has a `.` or an exponent.
            JSONDoubles.swift.append(d, to: &out)
        }
    }

    private mutating func string(_ i: Int32) throws(NotStorable) {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
        if out.count - base + len > limit { throw tooBig() }
        if String(validating: bytes, as: UTF8.self) != nil {
            // every control character and DEL as \u00XX, the form every version stored
            JSONEscaping.storedValues.append(bytes, to: &out)
        } else {
            // base64 below: the mask would not find it there. A secret that
            // is not UTF-8 itself was registered as text, its bad bytes
            // replaced: looked for in the bytes repaired the same way.
            if refusingSecrets, !SecretMask.shared.isEmpty {
                let repaired = Array(String(decoding: bytes, as: UTF8.self).utf8)
                if SecretMask.shared.occurs(in: bytes) || repaired.withUnsafeBufferPointer({ SecretMask.shared.occurs(in: $0) }) {
                    throw NotStorable(reason: Self.holdsSecret)
                }
            }
            tagged = true
            append("{\"$bytes\":\"")
            append(Data(bytes).base64EncodedString())
            append("\"}")
        }
    }

    private mutating func table(_ i: Int32) throws(NotStorable) {
        let t = lua_absindex(L, i)
        guard let p = lua_topointer(L, t) else { throw fail("a table") }
        if open.contains(p) { throw fail("a cycle (a table that contains itself)") }
        guard open.count < StoredValueCodec.maxDepth else { throw fail("tables nested deeper than \(StoredValueCodec.maxDepth)") }
        guard lua_checkstack(L, 6) != 0 else { throw fail("no stack space") }
        open.append(p)
        defer { open.removeLast() }
        if lua_getmetatable(L, t) != 0 {
            func isMetatable(_ ref: Int32) -> Bool {
                guard ref != 0 else { return false }
                lua_rawgeti(L, tasker_registryindex(), lua_Integer(ref))
                defer { tasker_pop(L, 1) }
                return lua_rawequal(L, -1, -2) != 0
            }
            let tag = isMetatable(arrayMeta) ? "$array" : isMetatable(errorMeta) ? "$error" : nil
            tasker_pop(L, 1)
            // Any other metatable (methods, __index defaults, __tostring)
            // would not come back: named, never silently dropped.
            guard let tag else { throw fail("a table with a metatable (it would come back without it)") }
            tagged = true
            append("{\"\(tag)\":")
            try contents(t)
            out.append(UInt8(ascii: "}"))
            return
        }
        try contents(t)
    }

    private mutating func contents(_ t: Int32) throws(NotStorable) {

        // What keys it has: a sequence (holes allowed, if not too many),
        // string keys only, or anything else.
        var count = 0, maxIndex: Int64 = 0
        var positiveIntegers = true, plainStrings = true
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            count += 1
            if lua_type(L, -2) == LUA_TNUMBER && tasker_isinteger_value(L, -2) != 0 {
                let k = tasker_tointeger(L, -2, nil)
                if k > 0 { maxIndex = max(maxIndex, k) } else { positiveIntegers = false }
                plainStrings = false
            } else {
                positiveIntegers = false
                if plainStrings { plainStrings = lua_type(L, -2) == LUA_TSTRING && isPlainKey(-2) }
            }
            tasker_pop(L, 1)
        }
        if count == 0 {
            append("[]")
        } else if positiveIntegers && maxIndex <= Int64(2 * count) {
            if maxIndex > Int64(count) { tagged = true }  // holes: null is nil only in the tagged form
            out.append(UInt8(ascii: "["))
            for k in 1...maxIndex {
                if k > 1 { out.append(UInt8(ascii: ",")) }
                lua_rawgeti(L, t, lua_Integer(k))
                do { try value(-1) } catch { throw error.under("[\(k)]") }
                tasker_pop(L, 1)
                try checkSize()
            }
            out.append(UInt8(ascii: "]"))
        } else if plainStrings {
            out.append(UInt8(ascii: "{"))
            var first = true
            lua_pushnil(L)
            while lua_next(L, t) != 0 {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                try string(-2)
                out.append(UInt8(ascii: ":"))
                let key = lua_gettop(L) - 1
                do { try value(-1) } catch { throw error.under(keyPath(key)) }
                tasker_pop(L, 1)
                try checkSize()
            }
            out.append(UInt8(ascii: "}"))
        } else {
            tagged = true
            append("{\"$pairs\":[")
            var first = true
            lua_pushnil(L)
            while lua_next(L, t) != 0 {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                out.append(UInt8(ascii: "["))
                let key = lua_gettop(L) - 1
                // A copy: writing a number key must not touch the one lua_next reads.
                lua_pushvalue(L, -2)
                do { try value(-1) } catch { throw error.under(keyPath(key) + " (key)") }
                tasker_pop(L, 1)
                out.append(UInt8(ascii: ","))
                do { try value(-1) } catch { throw error.under(keyPath(key)) }
                out.append(UInt8(ascii: "]"))
                tasker_pop(L, 1)
                try checkSize()
            }
            append("]}")
        }
    }

    /// A string key the plain form can keep: UTF-8, not starting with `$`
    /// (the tagged form reads those as tags).
    private func isPlainKey(_ i: Int32) -> Bool {
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: len)
        return bytes.first != UInt8(ascii: "$") && String(validating: bytes, as: UTF8.self) != nil
    }

    /// `.name`, `["a b"]`, `[3]`, `[true]`, for messages (never converts
    /// the key in place).
    private func keyPath(_ i: Int32) -> String {
        switch lua_type(L, i) {
        case LUA_TSTRING:
            var len = 0
            let p = tasker_tostring(L, i, &len)!
            let s = String(decoding: UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self),
                                                         count: min(len, 40)), as: UTF8.self)
            let identifier = s.first.map { $0 == "_" || $0.isLetter } == true && s.allSatisfy { $0 == "_" || $0.isLetter || $0.isNumber }
            return identifier && s.allSatisfy(\.isASCII) ? "." + s : "[\"\(s)\"]"
        case LUA_TNUMBER:
            return tasker_isinteger_value(L, i) != 0 ? "[\(tasker_tointeger(L, i, nil))]" : "[\(tasker_tonumber(L, i, nil))]"
        case LUA_TBOOLEAN:
            return lua_toboolean(L, i) != 0 ? "[true]" : "[false]"
        default:
            return "[?]"
        }
    }
}
