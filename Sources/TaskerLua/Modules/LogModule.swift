import CLua
import CLuaShim
import Logging
import TaskerCore

/// `log.debug/info/warn/error(message [, fields])`: a line on stderr with
/// the time, the level, the current task's name and the fields (secrets
/// shown as `***`), filtered by `--log-level`.
final class LogModule: LuaModule {
    unowned let host: any ModuleHost

    init(host: any ModuleHost) { self.host = host }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("debug", { L in LogModule.this(L!).log(L!, .debug, "log.debug") }),
        ("error", { L in LogModule.this(L!).log(L!, .error, "log.error") }),
        ("info", { L in LogModule.this(L!).log(L!, .info, "log.info") }),
        ("warn", { L in LogModule.this(L!).log(L!, .warning, "log.warn") }),
    ]

    func install(in runtime: LuaRuntime) {
        pushTable(Self.functions, in: runtime.L)
        setGlobal("log", in: runtime.L)
    }

    func log(_ L: OpaquePointer, _ level: Logger.Level, _ fn: String) -> Int32 {
        let s = LuaStack(L)
        guard s.type(1) == LUA_TSTRING || s.type(1) == LUA_TNUMBER else { return host.argError(L, fn, 1, "string") }
        guard s.isNoneOrNil(2) || s.type(2) == LUA_TTABLE else { return host.argError(L, fn, 2, "table") }
        let logger = host.logger
        guard logger.logLevel <= level else { return 0 }  // skip the work below when filtered out
        var metadata: Logger.Metadata = [:]
        if let id = host.currentTask { metadata["task"] = "\(host.engine.name(id))" }
        if s.type(2) == LUA_TTABLE {
            lua_pushnil(L)
            while lua_next(L, 2) != 0 {
                let top = lua_gettop(L)
                metadata[s.describe(top - 1)] = field(L, top)
                s.pop()
            }
        }
        logger.log(level: level, "\(s.describe(1))", metadata: metadata)
        return 0
    }

    /// A field's value: strings as they are; numbers, booleans and tables
    /// as JSON, what JSON has no form for as Lua shows it (a function, NaN,
    /// invalid UTF-8 with U+FFFD); a table nested too deep (a cycle) as Lua
    /// describes it.
    private func field(_ L: OpaquePointer, _ i: Int32) -> Logger.Metadata.Value {
        let s = LuaStack(L)
        switch s.type(i) {
        case LUA_TSTRING:
            return .string(s.string(i) ?? "")
        case LUA_TNUMBER, LUA_TBOOLEAN, LUA_TTABLE:
            // a table's header-like keys are secret at any depth, as a field's are
            if let bytes = try? host.module(JSONModule.self).encodeJSON(L, i, maskedKeys: LineLogHandler.isSecretKey, lossy: true) {
                return .stringConvertible(LogJSON(String(decoding: bytes, as: UTF8.self)))
            }
            return .string(s.describe(i))
        default:
            return .string(s.describe(i))
        }
    }
}
