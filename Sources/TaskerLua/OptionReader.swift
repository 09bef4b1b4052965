import CLua
import CLuaShim

/// Reads an options table (`tasker.exec{…}`, `http.request{…}`,
/// `http.configure{…}`) the same way everywhere: raw access, unknown keys
/// refused, every bad value worded alike:
/// `bad option 'timeout' to 'tasker.exec' (positive number expected, got -1)`.
///
///     let o = OptionReader(L: L, table: 2, function: "tasker.sh", known: ["cwd", "timeout"])
///     if let message = o.unknownOption() { return usage(L, message) }
///     let timeout = try o.read("timeout", "positive number") { s.number($0).flatMap { $0 > 0 ? $0 : nil } }
struct OptionReader {
    let L: OpaquePointer
    let table: Int32
    let function: String
    let known: Set<String>

    /// The first key of the table at `t` not in `allowed`, as shown in a
    /// message (`'bogus'`, or `of type number`); integer keys are skipped
    /// when `skippingIntegers` (a command's own elements).
    static func unknownKey(_ L: OpaquePointer, _ t: Int32, allowed: Set<String>, skippingIntegers: Bool = false) -> String? {
        let s = LuaStack(L)
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            s.pop()
            if skippingIntegers && s.type(-1) == LUA_TNUMBER { continue }
            guard s.type(-1) == LUA_TSTRING, let key = s.string(-1), allowed.contains(key) else {
                let shown = s.type(-1) == LUA_TSTRING ? "'\(s.string(-1)!)'" : "of type \(s.typeName(-1))"
                s.pop()
                return shown
            }
        }
        return nil
    }

    /// "unknown option 'x' to 'fn' (known: …)" for the first unknown key, or nil.
    func unknownOption(skippingIntegers: Bool = false) -> String? {
        guard let bad = Self.unknownKey(L, table, allowed: known, skippingIntegers: skippingIntegers) else { return nil }
        return "unknown option \(bad) to '\(function)' (known: \(known.sorted().joined(separator: ", ")))"
    }

    /// The value of `key` read by `convert` (given its stack index); nil when
    /// absent; a usage message when `convert` refuses it.
    func read<T>(_ key: String, _ expected: String, _ convert: (Int32) -> T?) throws(UsageMessage) -> T? {
        let s = LuaStack(L)
        s.rawGet(table, key)
        defer { s.pop() }
        if s.isNoneOrNil(-1) { return nil }
        guard let value = convert(lua_gettop(L)) else { throw UsageMessage(bad(key, expected)) }
        return value
    }

    /// "bad option 'k' to 'fn' (expected expected, got X)" for the value on top.
    func bad(_ key: String, _ expected: String) -> String {
        "bad option '\(key)' to '\(function)' (\(expected) expected, got \(LuaStack(L).got(-1, expected: expected)))"
    }
}
