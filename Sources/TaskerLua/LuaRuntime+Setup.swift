import CLua
import CLuaShim
import Foundation
import TaskerCore

/// Building the Lua environment and loading the pipeline.
extension LuaRuntime {
    func installModules() {
        let s = LuaStack(L)
        for keyPath in [\Refs.bodies, \Refs.values, \Refs.errors, \Refs.args, \Refs.tags,
                        \Refs.handlers, \Refs.threads, \Refs.predicates, \Refs.handedErrors] as [WritableKeyPath<Refs, Int32>] {
            s.newTable()
            refs[keyPath: keyPath] = s.ref()
        }
        installErrorMetatable()
        // The `tasker` table first: some modules add to it (`tasker.use`).
        for module: LuaModule in [TaskerModule(runtime: self), TaskViewModule(runtime: self), ContextModule(runtime: self),
                                  HandleModule(runtime: self)] {
            modules.add(module)
            module.install(in: self)
        }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        let globals = lua_gettop(L)
        if options.output != nil {
            s.push(LuaRuntime.printFunction)
            s.rawSet(globals, "print")
        }
        lua_settop(L, 0)
        for module: LuaModule in [ShellModule(runtime: self), LogModule(host: self), JSONModule(host: self),
                                  UseModule(runtime: self), ExecModule(runtime: self), HTTPModule(runtime: self),
                                  SleepModule(host: self), FSModule(host: self), DefineModule(runtime: self),
                                  HookModule(runtime: self), CommandModule(runtime: self),
                                  HostsModule(host: self), SSHModule(host: self), RollingModule(runtime: self)] {
            modules.add(module)
            module.install(in: self)
        }
    }

    /// Whether the value at `i` has the metatable anchored at `ref`.
    func hasMetatable(_ co: OpaquePointer, _ i: Int32, _ ref: Int32) -> Bool {
        guard lua_getmetatable(co, i) != 0 else { return false }
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(ref))
        let same = lua_rawequal(co, -1, -2) != 0
        tasker_pop(co, 2)
        return same
    }

    private func installErrorMetatable() {
        let s = LuaStack(L)
        s.newTable(hash: 2)
        s.push(LuaRuntime.errorToString)
        s.rawSet(-2, "__tostring")
        s.push("tasker.error")
        s.rawSet(-2, "__name")
        refs.errorMeta = s.ref()
    }

    /// `tostring(err)`: "[where ]kind: message".
    static let errorToString: tasker_SwiftFunction = { L in
        let L = L!
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return 0 }
        s.rawGet(1, "kind")
        s.rawGet(1, "message")
        s.rawGet(1, "where")
        let kind = s.string(-3) ?? "error"
        let message = s.string(-2) ?? ""
        let position = s.string(-1).map { $0.isEmpty ? "" : $0 + ": " } ?? ""
        s.push("\(position)\(kind): \(message)")
        return 1
    }

    /// `print` writing to `options.output` (tests); same format as Lua's.
    static let printFunction: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        let s = LuaStack(L)
        let n = s.top
        var parts: [String] = []
        for i in stride(from: 1, through: n, by: 1) {
            if tasker_tostring_protected(L, i) != LUA_OK { return TASKER_RAISE }
            parts.append(s.string(-1) ?? "")
            s.pop()
        }
        rt.options.output?(parts.joined(separator: "\t") + "\n")
        return 0
    }

    /// The string keys of each global table named in `names` (raw reads).
    func globalTableKeys(_ names: [String]) -> [String: Set<String>] {
        let s = LuaStack(L)
        var out: [String: Set<String>] = [:]
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        for name in names {
            s.rawGet(-1, name)
            if lua_type(L, -1) == LUA_TTABLE {
                var keys = Set<String>()
                lua_pushnil(L)
                while lua_next(L, -2) != 0 {
                    if lua_type(L, -2) == LUA_TSTRING, let k = s.string(-2) { keys.insert(k) }
                    s.pop()
                }
                out[name] = keys
            }
            s.pop()
        }
        s.pop()
        return out
    }

    /// `tasker.script_dir`: the pipeline's directory, absolute, for paths
    /// relative to the script rather than to the current directory.
    private func setScriptDir(_ dir: String) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "tasker")
        if lua_type(L, -1) == LUA_TTABLE {
            s.push(dir)
            s.rawSet(-2, "script_dir")
        }
        s.pop(2)
    }

    /// Loads the pipeline and starts its main chunk as a coroutine. A file
    /// that cannot be read or compiled ends the run with exit code 2.
    public func start(path: String) {
        chunk.scriptPath = path
        let dir = (path as NSString).deletingLastPathComponent
        chunk.scriptDirectory = dir.isEmpty ? "." : dir
        setPackagePath(chunk.scriptDirectory)
        setScriptDir(URL(fileURLWithPath: chunk.scriptDirectory).standardizedFileURL.path)
        guard let data = FileManager.default.contents(atPath: path) else {
            chunk.mainError = PipelineRunner.unreadable(path: path) ?? "cannot open '\(path)'"
            mainDone = true
            finish()
            return
        }
        let source = Self.withoutShebang(data)
        let status = source.withUnsafeBytes { raw in
            tasker_loadbuffer(L, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count, "@" + path)
        }
        guard status == LUA_OK else {
            chunk.mainError = Self.loadError(LuaStack(L).string(-1), path: path)
            lua_settop(L, 0)
            mainDone = true
            finish()
            return
        }
        // A plan runs no body: only reused tasks finish. A description runs
        // nothing but the main chunk up to its first task.
        if options.planOnly || options.describeOnly { engine.close(reason: options.planOnly ? "plan" : "describe") }
        startMain(lua_gettop(L))
    }

    private func setPackagePath(_ dir: String) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "package")
        s.rawGet(-1, "path")
        let old = s.string(-1) ?? ""
        s.pop()
        s.push("\(dir)/?.lua;\(dir)/?/init.lua;\(old)")
        s.rawSet(-2, "path")
        s.pop(2)
    }
}

/// Engine events become Lua `h:on` handler calls, run from the drain loop.
extension LuaRuntime: EngineObserver {
    public var observesAdds: Bool { false }

    public func taskStarted(_ id: TaskID, engine: Engine) {
        if refs.flags.handlerTasks[id] != nil { enqueue(.event(id, .start)) }
    }

    public func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        if refs.flags.handlerTasks[id] != nil { enqueue(.event(id, .progress(fraction, message))) }
    }

    public func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        if refs.flags.handlerTasks[id] != nil { enqueue(.event(id, .retry(failedAttempt, failure, delay))) }
        // A shard that passed on its second try is worth a line.
        logger.info("attempt \(failedAttempt) failed, retrying in \(Self.seconds(delay)): \(Self.firstLine(failure.description))",
                    metadata: ["task": "\(engine.name(id))", "attempt": "\(failedAttempt)"])
    }

    static func seconds(_ s: Double) -> String { s < 10 ? String(format: "%.2gs", s) : String(format: "%.0fs", s) }

    /// The first line of an error, at most 300 bytes, for a log line.
    static func firstLine(_ s: String) -> String {
        // masked before it is cut: a secret cut in half is no longer found
        let line = SecretMask.shared.mask(String(s.prefix { $0 != "\n" }))
        return line.utf8.count <= 300 ? line : String(line.prefix(300)) + "…"
    }

    public func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        if refs.flags.handlerTasks[id] != nil { enqueue(.event(id, .finish)) }
        // The body may still be needed by followers of shared work: drop the
        // Lua parts only once the work itself has ended.
        let work = workOf(id)
        if engine.isWorkFinished(work), !engine.isGroupOrSchedule(work) { dropParts(work) }
        if engine === self.engine, engine.isEphemeral(id), outcome.state != .failed, refs.flags.handlerTasks[id] == nil {
            // A finished `every` instance: free it once this finish is delivered.
            enqueue(.call { [unowned self] in
                self.dropAllParts(id)
                self.engine.forgetFinished(id)
            })
        }
    }
}

extension LuaRuntime {
    /// Compiles `path` in a bare state; returns the error message, if any.
    static func compileOnly(path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else {
            return PipelineRunner.unreadable(path: path) ?? "cannot open '\(path)'"
        }
        guard let L = luaL_newstate() else { return "\(path): out of memory" }
        defer { lua_close(L) }
        let source = Self.withoutShebang(data)
        let status = source.withUnsafeBytes { raw in
            tasker_loadbuffer(L, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count, "@" + path)
        }
        return status == LUA_OK ? nil : Self.loadError(LuaStack(L).string(-1), path: path)
    }

    /// A file starting `#!` (`#!/usr/bin/env -S tasker run`) loads as
    /// `lua` loads it: that first line is skipped, the line numbers stay.
    public static func withoutShebang(_ data: Data) -> Data {
        guard data.first == UInt8(ascii: "#") else { return data }
        let end = data.firstIndex(of: UInt8(ascii: "\n")) ?? data.endIndex
        return data[end...].isEmpty ? Data() : Data(data[end...])
    }

    /// A compile error naming the file: Lua's limits (`C stack overflow`,
    /// `too many local variables`) come without a position.
    static func loadError(_ message: String?, path: String) -> String {
        guard let message else { return "\(path): cannot compile" }
        return message.hasPrefix(path + ":") ? message : "\(path): \(message)"
    }
}
