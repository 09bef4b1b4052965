import CLua
import CLuaShim
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

    unowned let host: any ModuleHost
    /// The metatable that marks a table as a JSON array.
    private(set) var arrayMeta: Int32 = 0

    init(host: any ModuleHost) { self.host = host }

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

    func isArray(_ L: OpaquePointer, _ i: Int32) -> Bool { host.hasMetatable(L, i, arrayMeta) }
}

struct JSONError: Error {
    let message: String
}

extension JSONModule {
    func array(_ L: OpaquePointer) -> Int32 {
        if lua_type(L, 1) <= LUA_TNIL { lua_settop(L, 0); lua_createtable(L, 0, 0) }
        guard lua_type(L, 1) == LUA_TTABLE else { return host.argError(L, "json.array", 1, "table or nil") }
        lua_settop(L, 1)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(arrayMeta))
        lua_setmetatable(L, 1)
        return 1
    }

    func encode(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        var pretty = false
        if !s.isNoneOrNil(2) {
            guard s.type(2) == LUA_TTABLE else { return host.argError(L, "json.encode", 2, "table") }
            let o = OptionReader(L: L, table: 2, function: "json.encode", known: ["pretty"])
            if let message = o.unknownOption() { return host.usage(L, message) }
            do throws(UsageMessage) {
                pretty = try o.read("pretty", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? false
            } catch {
                return host.usage(L, error.text)
            }
        }
        lua_settop(L, 1)
        let out: [UInt8]
        do {
            out = try encodeJSON(L, 1, pretty: pretty)
        } catch {
            return host.raise(L, TaskFailure(.json, error.message, position: s.whereString(level: 1)))
        }
        _ = out.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { lua_pushlstring(L, $0.baseAddress, $0.count) }
        }
        return 1
    }

    /// The JSON text of the value at `i`.
    func encodeJSON(_ L: OpaquePointer, _ i: Int32, pretty: Bool = false,
                    maskedKeys: ((String) -> Bool)? = nil, lossy: Bool = false) throws(JSONError) -> [UInt8] {
        // A refusal leaves the walk's keys and values on the stack: drop them.
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        var encoder = LuaJSONEncoder(module: self, L: L, pretty: pretty, maskedKeys: maskedKeys, lossy: lossy)
        try encoder.encode(lua_absindex(L, i), depth: 0)
        return encoder.out
    }

    /// The JSON text of the value at `i`, and whether it reads back as it
    /// was (false: an integer key became a string, a hole `null`).
    func encodeJSONNotingKeys(_ L: OpaquePointer, _ i: Int32) throws(JSONError) -> (text: [UInt8], exact: Bool) {
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        var encoder = LuaJSONEncoder(module: self, L: L, pretty: false)
        try encoder.encode(lua_absindex(L, i), depth: 0)
        return (encoder.out, !encoder.readsBackOtherwise)
    }

    func decode(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TSTRING else { return host.argError(L, "json.decode", 1, "string") }
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
            return host.raise(L, TaskFailure(.json, error.message, position: LuaStack(L).whereString(level: 1)))
        }
        return 1
    }

    /// Pushes the value of the JSON text `bytes`; pushes nothing if it fails.
    func decodeJSON(_ L: OpaquePointer, _ bytes: UnsafeBufferPointer<UInt8>) throws(JSONError) {
        let base = lua_gettop(L)
        var decoder = LuaJSONDecoder(module: self, L: L, bytes: bytes)
        do {
            try decoder.decodeDocument()
        } catch {
            lua_settop(L, base)
            throw JSONError(message: error.message)
        }
    }
}

extension TaskFailure {
    init(_ kind: Kind, _ message: String, position: String) {
        self.init(kind, message)
        self.position = position.isEmpty ? nil : position
    }
}
