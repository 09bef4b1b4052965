import CLua
import CLuaShim
import Logging
import TaskerCore

/// `log.debug/info/warn/error(message [, fields])`: a line on stderr with
/// the time, the level, the current task's name and the fields (secrets
/// shown as `***`), filtered by `--log-level`.
final class LogModule: LuaModule {
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

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
        guard s.type(1) == LUA_TSTRING || s.type(1) == LUA_TNUMBER else { return runtime.argError(L, fn, 1, "string") }
        guard s.isNoneOrNil(2) || s.type(2) == LUA_TTABLE else { return runtime.argError(L, fn, 2, "table") }
        let logger = runtime.logger
        guard logger.logLevel <= level else { return 0 }  // skip the work below when filtered out
        var metadata: Logger.Metadata = [:]
        if let id = runtime.current?.taskID { metadata["task"] = "\(runtime.engine.name(id))" }
        if s.type(2) == LUA_TTABLE {
            lua_pushnil(L)
            while lua_next(L, 2) != 0 {
                let value = s.describe(-1)
                s.pop()
                metadata[s.describe(-1)] = "\(value)"
            }
        }
        logger.log(level: level, "\(s.describe(1))", metadata: metadata)
        return 0
    }
}
