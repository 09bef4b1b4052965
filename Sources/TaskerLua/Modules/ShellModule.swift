import CLua
import CLuaShim
import Foundation
import TaskerCore

/// `os.execute`, `io.popen` and `os.exit` as the Lua manual has them, made to
/// wait without blocking the engine: waiting for the process and reading or
/// writing a popen'd file yield to the engine (`for line in
/// io.popen("tail -f log"):lines()` streams). Where the caller cannot yield
/// (a handler, a C boundary) Lua's own functions run, blocking as usual.
/// Cancelling the task terminates the process group, as `exec` does.
final class ShellModule: LuaModule {
    static let metatableName = "tasker.popen"

    unowned let runtime: LuaRuntime
    /// Files `io.popen` opened, by the id their userdata holds.
    var files: [Int: PopenFile] = [:]
    private var nextID = 0
    private var metatable: Int32 = 0

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let methods: [(String, tasker_SwiftFunction)] = [
        ("read", { L in ShellModule.this(L!).read(L!) }),
        ("lines", { L in ShellModule.this(L!).lines(L!) }),
        ("write", { L in ShellModule.this(L!).write(L!) }),
        ("close", { L in ShellModule.this(L!).close(L!) }),
        ("flush", { L in
            lua_settop(L!, 1)
            return 1
        }),
        ("setvbuf", { L in
            lua_pushboolean(L!, 1)
            return 1
        }),
        ("seek", { L in
            lua_pushnil(L!)
            LuaStack(L!).push("Illegal seek")
            lua_pushinteger(L!, lua_Integer(ESPIPE))
            return 3
        }),
    ]

    static let metamethods: [(String, tasker_SwiftFunction)] = [
        // __gc and __close drop tasker's end without waiting (neither may
        // yield); the process goes on and is reaped when it ends.
        ("__gc", { L in ShellModule.this(L!).detach(L!) }),
        ("__close", { L in ShellModule.this(L!).detach(L!) }),
        ("__tostring", { L in ShellModule.this(L!).describe(L!) }),
    ]

    /// Lua's own calls that change files, stopped in a plan (`stop(name)`);
    /// `io.open` for reading still opens.
    static let planGuards = """
        local stop = ...
        local open = io.open
        os.remove = function() return stop("os.remove") end
        os.rename = function() return stop("os.rename") end
        os.tmpname = function() return stop("os.tmpname") end
        io.open = function(path, mode, ...)
          if type(mode) == "string" and mode:find("[wa+]") then return stop("io.open") end
          return open(path, mode, ...)
        end
        """

    /// `--help` or a plan came to a process (`fn`): the main chunk stops.
    private func stopsHere(_ L: OpaquePointer, _ fn: String) -> Int32 {
        runtime.planStops(L, fn) ?? runtime.describeStop(L, at: fn)
    }

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        luaL_newmetatable(L, Self.metatableName)
        pushTable(Self.methods, in: L)
        s.rawSet(-2, "__index")
        for (event, fn) in Self.metamethods {
            push(fn, in: L)
            s.rawSet(-2, event)
        }
        metatable = s.ref()
        replaceWithWaitingVariant("os", "execute", { L in ShellModule.this(L!).execute(L!) }, in: L)
        replaceWithWaitingVariant("io", "popen", { L in ShellModule.this(L!).popen(L!) }, in: L)
        if runtime.options.describeOnly || runtime.options.planOnly {
            // `--help`, a plan: no process starts, also from where Lua cannot yield
            // (a gsub callback, a sort comparator, a __gc handler)
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
            s.rawGet(-1, "os")
            push({ L in ShellModule.this(L!).stopsHere(L!, "os.execute") }, in: L)
            s.rawSet(-2, "execute")
            s.pop()
            s.rawGet(-1, "io")
            push({ L in ShellModule.this(L!).stopsHere(L!, "io.popen") }, in: L)
            s.rawSet(-2, "popen")
            s.pop()
            if runtime.options.planOnly || runtime.options.describeOnly {
                // a plan or a description changes no file through Lua's own library either
                pushSource(Self.planGuards, named: "=[tasker.plan]", in: L)
                push({ L in ShellModule.this(L!).stopsHere(L!, LuaStack(L!).string(1) ?? "?") }, in: L)
                guard tasker_pcall_traceback(L, 1, 0) == LUA_OK else { preconditionFailure("the plan's guards did not load") }
            }
            s.pop()
        }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "os")
        push(ShellModule.exit, in: L)
        s.rawSet(-2, "exit")
        lua_settop(L, 0)
    }

    /// `os.exit([code [, close]])` ends the run like `tasker.exit`: what is
    /// left is cancelled, cancel paths run, the summary is printed.
    static let exit: tasker_SwiftFunction = { L in
        let L = L!
        let s = LuaStack(L)
        let code: Int
        switch s.type(1) {
        case LUA_TNONE, LUA_TNIL: code = 0
        case LUA_TBOOLEAN: code = s.boolean(1) ? 0 : 1
        default:
            guard let c = s.integer(1) else { return ShellModule.this(L).runtime.argError(L, "os.exit", 1, "boolean or integer") }
            code = c & 0xFF
        }
        lua_settop(L, 0)
        lua_pushinteger(L, lua_Integer(code))
        return ShellModule.this(L).runtime.module(TaskerModule.self).exit(L)
    }

    private func detach(_ L: OpaquePointer) -> Int32 {
        if let (id, file) = file(L, 1) {
            file.closeEnd()
            files[id] = nil
        }
        return 0
    }

    private func describe(_ L: OpaquePointer) -> Int32 {
        let open = file(L, 1).map { !$0.1.closed } ?? false
        LuaStack(L).push(open ? "file (popen)" : "file (closed)")
        return 1
    }

    /// The popen file of the userdata at `i`, with its id.
    func file(_ L: OpaquePointer, _ i: Int32) -> (Int, PopenFile)? {
        guard runtime.hasMetatable(L, i, metatable), let p = lua_touserdata(L, i) else { return nil }
        let id = p.load(as: Int.self)
        return files[id].map { (id, $0) }
    }

    /// A new userdata for `file`.
    func pushFile(_ file: PopenFile, in L: OpaquePointer) {
        nextID += 1
        files[nextID] = file
        let p = lua_newuserdatauv(L, MemoryLayout<Int>.size, 0)!
        p.storeBytes(of: nextID, as: Int.self)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(metatable))
        lua_setmetatable(L, -2)
    }
}

extension ShellModule {
    /// `os.execute(command)`: true|nil, "exit"|"signal", code.
    func execute(_ L: OpaquePointer) -> Int32 {
        let runtime = self.runtime
        let s = LuaStack(L)
        if s.isNoneOrNil(1) {
            lua_pushboolean(L, 1)  // a shell is available
            return 1
        }
        // bytes: a command naming a file in Latin-1 must reach the shell as it is
        guard let command = s.bytes(1) else { return runtime.argError(L, "os.execute", 1, "string") }
        guard !command.contains(0) else { return runtime.usage(L, "bad argument #1 to 'os.execute' (it contains a NUL byte)") }
        if let status = runtime.cannotWait(L, "os.execute") { return status }
        return runtime.suspend(L, .wait(ShellCommandWait(command: command, position: s.whereString(level: 1))))
    }

    /// Lua's result for a finished command: true|nil, "exit"|"signal", code.
    static func pushStatus(_ co: OpaquePointer, _ status: ShellStatus) -> Int32 {
        let s = LuaStack(co)
        lua_pushboolean(co, 1)  // the engine's "resumed fine"
        switch status {
        case .exited(let c):
            if c == 0 { lua_pushboolean(co, 1) } else { lua_pushnil(co) }
            s.push("exit")
            s.push(Int(c))
        case .signaled(let sig):
            lua_pushnil(co)
            s.push("signal")
            s.push(Int(sig))
        }
        return 4
    }

    /// `io.popen(command [, mode])`: a file whose reads and writes wait on
    /// the engine.
    func popen(_ L: OpaquePointer) -> Int32 {
        let runtime = self.runtime
        let s = LuaStack(L)
        guard let command = s.bytes(1) else { return runtime.argError(L, "io.popen", 1, "string") }
        guard !command.contains(0) else { return runtime.usage(L, "bad argument #1 to 'io.popen' (it contains a NUL byte)") }
        let modeText = s.isNoneOrNil(2) ? "r" : (s.string(2) ?? "")
        guard modeText == "r" || modeText == "w" else {
            return runtime.usage(L, "bad argument #2 to 'io.popen' (invalid mode '\(modeText)': \"r\" or \"w\" expected)")
        }
        let reading = modeText == "r"
        // The file is made once the process is: its end reports to it.
        var made: PopenFile?
        let process: ShellProcess
        do {
            process = try ShellProcess(command: command, stdin: reading ? .inherit : .pipe, stdout: reading ? .pipe : .inherit,
                                       runtime: runtime) { status in made?.processEnded(status) }
        } catch {
            // Out of descriptors or processes: the task fails, the run goes on.
            runtime.pushErrorTable(L, kind: "exec", message: "cannot run '\(ExecRequest.short(String(decoding: command, as: UTF8.self)))': \(error.message)",
                                   where: s.whereString(level: 1))
            return TASKER_RAISE
        }
        let file = PopenFile(mode: reading ? .read : .write, process: process, loop: runtime.loop)
        made = file
        runtime.driver.current?.processes.append(process)
        pushFile(file, in: L)
        return 1
    }

    /// Reads the formats from arguments `first...` ("l" when there are none).
    private func readFormats(_ L: OpaquePointer, from first: Int32, fn: String) -> Result<[ReadFormat], TaskFailure> {
        let s = LuaStack(L)
        let top = lua_gettop(L)
        if top < first { return .success([.line(keepNewline: false)]) }
        var formats: [ReadFormat] = []
        for i in first...top {
            if let n = s.integer(i), s.type(i) == LUA_TNUMBER {
                guard n >= 0 else { return .failure(TaskFailure(.usage, "bad argument #\(i - 1) to '\(fn)' (non-negative count expected, got \(n))")) }
                formats.append(.count(n))
                continue
            }
            var f = s.string(i) ?? ""
            if f.hasPrefix("*") { f.removeFirst() }  // Lua 5.3 spelling
            switch f.first {
            case "l": formats.append(.line(keepNewline: false))
            case "L": formats.append(.line(keepNewline: true))
            case "a": formats.append(.all)
            case "n": formats.append(.number)
            default: return .failure(TaskFailure(.usage, "bad argument #\(i - 1) to '\(fn)' (invalid format)"))
            }
        }
        return .success(formats)
    }

    static func push(_ co: OpaquePointer, _ values: [ReadValue]) -> Int32 {
        for v in values {
            switch v {
            case .bytes(let b):
                b.withUnsafeBufferPointer { raw in
                    raw.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(co, $0.baseAddress, $0.count) }
                }
            case .numeral(let text):
                if text.withCString({ lua_stringtonumber(co, $0) }) == 0 { lua_pushnil(co) }
            case .fail:
                lua_pushnil(co)
            }
        }
        return Int32(values.count)
    }

    /// `f:read(...)`, and the iterator `f:lines(...)` returns.
    func read(_ L: OpaquePointer) -> Int32 {
        guard let (_, file) = file(L, 1) else { return runtime.argError(L, "read", 0, "popen file", index: 1) }
        switch readFormats(L, from: 2, fn: "read") {
        case .failure(let f): return runtime.usage(L, f.message)
        case .success(let formats): return read(L, file, formats)
        }
    }

    private func read(_ L: OpaquePointer, _ file: PopenFile, _ formats: [ReadFormat]) -> Int32 {
        guard file.mode == .read else {
            lua_pushnil(L)
            LuaStack(L).push("Bad file descriptor")
            lua_pushinteger(L, lua_Integer(EBADF))
            return 3
        }
        guard !file.closed else { return runtime.usage(L, "attempt to use a closed file") }
        if let values = file.tryRead(formats) { return ShellModule.push(L, values) }
        if let status = runtime.cannotWait(L, "read") { return status }
        return runtime.suspend(L, .wait(PopenReadWait(file: file, formats: formats)))
    }

    /// `f:lines(...)`: an iterator that reads with the given formats.
    func lines(_ L: OpaquePointer) -> Int32 {
        guard file(L, 1) != nil else { return runtime.argError(L, "lines", 0, "popen file", index: 1) }
        if case .failure(let f) = readFormats(L, from: 2, fn: "lines") { return runtime.usage(L, f.message) }
        // upvalues: this module, then the file and the formats, as given
        let n = lua_gettop(L)
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        lua_rotate(L, 1, 1)
        LuaStack(L).push(ShellModule.linesStep, upvalues: n + 1)
        return 1
    }

    static let linesStep: tasker_SwiftFunction = { L in
        let L = L!
        let module = ShellModule.this(L)
        lua_settop(L, 0)
        var i: Int32 = 3
        while lua_type(L, tasker_upvalueindex(i)) != LUA_TNONE {
            lua_pushvalue(L, tasker_upvalueindex(i))
            i += 1
        }
        guard let (_, file) = module.file(L, 1) else { return 0 }
        if file.closed { return module.runtime.usage(L, "file is already closed") }
        switch module.readFormats(L, from: 2, fn: "lines") {
        case .failure(let f): return module.runtime.usage(L, f.message)
        case .success(let formats): return module.read(L, file, formats)
        }
    }

    /// `f:write(...)`: the file, or nil, message, errno.
    func write(_ L: OpaquePointer) -> Int32 {
        let runtime = self.runtime
        guard let (_, file) = file(L, 1) else { return runtime.argError(L, "write", 0, "popen file", index: 1) }
        let s = LuaStack(L)
        guard file.mode == .write, !file.closed else {
            lua_pushnil(L)
            s.push(file.closed ? "file is closed" : "Bad file descriptor")
            lua_pushinteger(L, lua_Integer(EBADF))
            return 3
        }
        var bytes: [UInt8] = []
        let top = lua_gettop(L)
        if top >= 2 {
            for i in 2...top {
                guard s.type(i) == LUA_TSTRING || s.type(i) == LUA_TNUMBER else {
                    return runtime.argError(L, "write", i - 1, "string or number", index: i)
                }
                var len = 0
                if s.type(i) == LUA_TNUMBER {
                    bytes += Array(s.describe(i).utf8)
                } else if let p = tasker_tostring(L, i, &len) {
                    bytes += UnsafeRawBufferPointer(start: p, count: len)
                }
            }
        }
        if let status = runtime.cannotWait(L, "write") { return status }
        lua_settop(L, 1)
        lua_pushvalue(L, 1)
        let fileRef = luaL_ref(L, tasker_registryindex())  // returned on success
        return runtime.suspend(L, .wait(PopenWriteWait(file: file, bytes: bytes, fileRef: fileRef)))
    }

    /// `f:close()`: waits for the command; true|nil, "exit"|"signal", code.
    func close(_ L: OpaquePointer) -> Int32 {
        let runtime = self.runtime
        guard let (id, file) = file(L, 1) else { return runtime.argError(L, "close", 0, "popen file", index: 1) }
        guard !file.closed else { return runtime.usage(L, "attempt to use a closed file") }
        file.closeEnd()
        if let status = file.status {
            files[id] = nil
            let n = ShellModule.pushStatus(L, status)
            lua_rotate(L, -n, -1)  // drop the leading "resumed fine"
            tasker_pop(L, 1)
            return n - 1
        }
        if let status = runtime.cannotWait(L, "close") { return status }
        return runtime.suspend(L, .wait(PopenCloseWait(file: file, id: id, module: self)))
    }
}

/// `os.execute(command)`: the command with tasker's own stdin, stdout and
/// stderr; a cancel terminates its process group. A command that cannot
/// start (out of descriptors or processes) raises kind `exec`.
final class ShellCommandWait: FiberWait {
    let command: [UInt8]
    let position: String
    private var process: ShellProcess?

    init(command: [UInt8], position: String) {
        self.command = command
        self.position = position
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        do {
            process = try ShellProcess(command: command, runtime: runtime) { [unowned runtime] status in
                runtime.finishWait(fiber, .push { co in ShellModule.pushStatus(co, status) })
            }
        } catch {
            let message = "cannot run '\(ExecRequest.short(String(decoding: command, as: UTF8.self)))': \(error.message)", position = self.position
            runtime.finishWait(fiber, .push { [unowned runtime] co in
                lua_pushboolean(co, 0)
                runtime.pushErrorTable(co, kind: "exec", message: message, where: position)
                return 2
            })
        }
    }

    func cancel() { process?.cancel() }
}

/// `f:read(...)` on a popen'd file: tried again after every chunk. The loop
/// stays busy while it waits (a grandchild may hold the pipe after the
/// command exited); a cancel lets go.
final class PopenReadWait: FiberWait {
    let file: PopenFile
    let formats: [ReadFormat]
    private var loop: EventLoop?

    init(file: PopenFile, formats: [ReadFormat]) {
        self.file = file
        self.formats = formats
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        guard !fiber.finished else { return idle() }
        if file.closed {
            idle()
            runtime.finishWait(fiber, .failure(TaskFailure(.usage, "the file was closed while a read waited")))
        } else if let values = file.tryRead(formats) {
            idle()
            runtime.finishWait(fiber, .push { co in
                lua_pushboolean(co, 1)
                return 1 + ShellModule.push(co, values)
            })
        } else {
            if loop == nil {
                loop = runtime.loop
                runtime.loop.beginActivity()
            }
            file.waitForData { [unowned runtime] in self.start(fiber, in: runtime) }
        }
    }

    private func idle() {
        loop?.endActivity()
        loop = nil
    }

    func cancel() { idle() }  // a late chunk finds the fiber finished
}

/// `f:write(...)` on a popen'd file: the file, or nil, message, errno.
final class PopenWriteWait: FiberWait {
    let file: PopenFile
    let bytes: [UInt8]
    /// The file userdata, anchored until the result is pushed.
    let fileRef: Int32

    init(file: PopenFile, bytes: [UInt8], fileRef: Int32) {
        self.file = file
        self.bytes = bytes
        self.fileRef = fileRef
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        let ref = fileRef
        file.write(bytes) { [unowned runtime] failure in
            guard !fiber.finished else {
                luaL_unref(runtime.L, tasker_registryindex(), ref)
                return
            }
            runtime.finishWait(fiber, .push { co in
                defer { luaL_unref(co, tasker_registryindex(), ref) }
                lua_pushboolean(co, 1)
                if let failure {
                    lua_pushnil(co)
                    LuaStack(co).push(failure)
                    lua_pushinteger(co, lua_Integer(EPIPE))
                    return 4
                }
                lua_rawgeti(co, tasker_registryindex(), lua_Integer(ref))
                return 2
            })
        }
    }

    func cancel() {}
}

/// `f:close()` on a popen'd file: waits for the command to end.
final class PopenCloseWait: FiberWait {
    let file: PopenFile
    let id: Int
    unowned let module: ShellModule

    init(file: PopenFile, id: Int, module: ShellModule) {
        self.file = file
        self.id = id
        self.module = module
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        let (id, module) = (self.id, self.module)
        file.closeWaiters.append { [unowned runtime] status in
            module.files[id] = nil
            runtime.finishWait(fiber, .push { co in ShellModule.pushStatus(co, status) })
        }
    }

    func cancel() {}
}
