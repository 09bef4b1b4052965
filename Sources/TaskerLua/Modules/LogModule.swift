import CLua
import CLuaShim
import Logging
import TaskerCore

/// `log.debug/info/warn/error(message [, fields])`: a line on stderr with
/// the time, the level, the current task's name and the fields (secrets
/// shown as `***`), filtered by `--log-level`.
enum LogModule {
    static let functions: [(String, tasker_SwiftFunction)] = [
        ("debug", { L in LuaRuntime.from(L!).apiLog(L!, .debug, "log.debug") }),
        ("error", { L in LuaRuntime.from(L!).apiLog(L!, .error, "log.error") }),
        ("info", { L in LuaRuntime.from(L!).apiLog(L!, .info, "log.info") }),
        ("warn", { L in LuaRuntime.from(L!).apiLog(L!, .warning, "log.warn") }),
    ]

    static func install(_ rt: LuaRuntime) -> Int32 {
        let s = LuaStack(rt.L)
        s.newTable(hash: Int32(functions.count))
        for (name, fn) in functions {
            s.push(fn)
            s.rawSet(-2, name)
        }
        return lua_gettop(rt.L)
    }
}

extension LuaRuntime {
    func apiLog(_ L: OpaquePointer, _ level: Logger.Level, _ fn: String) -> Int32 {
        let s = LuaStack(L)
        guard s.type(1) == LUA_TSTRING || s.type(1) == LUA_TNUMBER else { return argError(L, fn, 1, "string") }
        guard s.isNoneOrNil(2) || s.type(2) == LUA_TTABLE else { return argError(L, fn, 2, "table") }
        guard logger.logLevel <= level else { return 0 }  // skip the work below when filtered out
        var metadata: Logger.Metadata = [:]
        if let id = current?.taskID { metadata["task"] = "\(engine.name(id))" }
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
