import CLua
import CLuaShim
import Dispatch
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// The `fs` global (README, Files): reading, writing and walking files
/// without shelling out. Operations that may take long (reads, writes,
/// copies, listings, globs, recursive removals) run on a thread of their own
/// while the caller waits, so a large file does not stall other tasks;
/// where the caller cannot wait (a handler), they run in place. Failures
/// raise kind `fs` with `path` and the system's reason.
final class FSModule: LuaModule {
    unowned let host: any ModuleHost
    /// `fs.tempdir()` directories, removed at the end of the run.
    private var tempDirs: [String] = []
    /// A queue per operation: a serial queue runs on libdispatch's
    /// overcommitting pool, which adds a thread when the others wait, so
    /// calls waiting on FIFOs never hold up an `fs.read` of a plain file (a
    /// shared concurrent queue is limited to one thread per core).
    static func queue() -> DispatchQueue { DispatchQueue(label: "tasker.fs") }

    init(host: any ModuleHost) { self.host = host }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("read", { L in FSModule.this(L!).read(L!) }),
        ("write", { L in FSModule.this(L!).write(L!) }),
        ("append", { L in FSModule.this(L!).append(L!) }),
        ("list", { L in FSModule.this(L!).list(L!) }),
        ("glob", { L in FSModule.this(L!).glob(L!) }),
        ("stat", { L in FSModule.this(L!).stat(L!) }),
        ("exists", { L in FSModule.this(L!).exists(L!) }),
        ("mkdir", { L in FSModule.this(L!).mkdir(L!) }),
        ("remove", { L in FSModule.this(L!).remove(L!) }),
        ("rename", { L in FSModule.this(L!).rename(L!) }),
        ("move", { L in FSModule.this(L!).rename(L!) }),  // the same: `mv`'s name
        ("copy", { L in FSModule.this(L!).copy(L!) }),
        ("tempdir", { L in FSModule.this(L!).tempdir(L!) }),
    ]

    func install(in runtime: LuaRuntime) {
        pushTable(Self.functions, in: runtime.L)
        setGlobal("fs", in: runtime.L)
    }

    /// Removes the temporary directories the run made (unless kept).
    func runEnded() {
        for dir in tempDirs { try? Files.remove(dir, recursive: true, FileCancel()) }
        tempDirs = []
    }

    // MARK: the functions

    func read(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.read") else { return TASKER_RAISE }
        return run(L, .read(path))
    }

    func write(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.write"), let data = bytes(L, 2, "fs.write") else { return TASKER_RAISE }
        let o = OptionReader(L: L, table: 3, function: "fs.write", known: ["mode", "atomic"])
        var mode: mode_t?, atomic = true
        if lua_type(L, 3) == LUA_TTABLE {
            if let message = o.unknownOption() { return host.usage(L, message) }
            let s = LuaStack(L)
            do {
                mode = try o.read("mode", "integer file mode (e.g. 0x1a4 for 0644)") { i in
                    s.integer(i).flatMap { (0...0o7777).contains($0) ? mode_t($0) : nil }
                }
                atomic = try o.read("atomic", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? true
            } catch {
                return host.usage(L, error.text)
            }
        } else if !LuaStack(L).isNoneOrNil(3) {
            return host.argError(L, "fs.write", 3, "table")
        }
        return run(L, .write(path, data, mode: mode, atomic: atomic), data: 2)
    }

    func append(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.append"), let data = bytes(L, 2, "fs.append") else { return TASKER_RAISE }
        return run(L, .append(path, data), data: 2)
    }

    func list(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.list") else { return TASKER_RAISE }
        return run(L, .list(path))
    }

    func glob(_ L: OpaquePointer) -> Int32 {
        guard let pattern = path(L, 1, "fs.glob") else { return TASKER_RAISE }
        return run(L, .glob(pattern))
    }

    func stat(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.stat") else { return TASKER_RAISE }
        return run(L, .stat(path))
    }

    func exists(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.exists") else { return TASKER_RAISE }
        return run(L, .exists(path))
    }

    func mkdir(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.mkdir") else { return TASKER_RAISE }
        guard let parents = flag(L, 2, "fs.mkdir", "parents", default: true) else { return TASKER_RAISE }
        return run(L, .mkdir(path, parents: parents))
    }

    func remove(_ L: OpaquePointer) -> Int32 {
        guard let path = path(L, 1, "fs.remove") else { return TASKER_RAISE }
        guard let recursive = flag(L, 2, "fs.remove", "recursive", default: false) else { return TASKER_RAISE }
        return run(L, .remove(path, recursive: recursive))
    }

    func rename(_ L: OpaquePointer) -> Int32 {
        guard let from = path(L, 1, "fs.rename"), let to = path(L, 2, "fs.rename") else { return TASKER_RAISE }
        return run(L, .rename(from, to))
    }

    func copy(_ L: OpaquePointer) -> Int32 {
        guard let from = path(L, 1, "fs.copy"), let to = path(L, 2, "fs.copy") else { return TASKER_RAISE }
        return run(L, .copy(from, to))
    }

    func tempdir(_ L: OpaquePointer) -> Int32 {
        guard let keep = flag(L, 1, "fs.tempdir", "keep", default: false) else { return TASKER_RAISE }
        return run(L, .tempdir, keep: keep)
    }

    // MARK: arguments

    /// A path argument (UTF-8 without NUL), or nil with a usage error
    /// pushed. Bytes that are not UTF-8 would have named another file (each
    /// made U+FFFD): refused; `fs.list` and `fs.glob` return such names as
    /// they are, for `io.open` and `os.remove`, which take any bytes.
    private func path(_ L: OpaquePointer, _ i: Int32, _ fn: String) -> String? {
        guard lua_type(L, i) == LUA_TSTRING else {
            _ = host.argError(L, fn, i, "string (a path)")
            return nil
        }
        var len = 0
        let raw = UnsafeRawBufferPointer(start: tasker_tostring(L, i, &len), count: len)
        if let nul = raw.firstIndex(of: 0) {
            _ = host.usage(L, "bad argument #\(i) to '\(fn)' (the path contains a NUL byte at \(nul + 1))")
            return nil
        }
        guard let p = String(validating: raw, as: UTF8.self) else {
            let at = UTF8Check.firstInvalidByte(raw) ?? 0
            _ = host.usage(L, "bad argument #\(i) to '\(fn)' (the path is not UTF-8: byte 0x\(String(format: "%02X", raw[at])) at \(at + 1); "
                            + "fs takes UTF-8 paths, io.open and os.remove any bytes)")
            return nil
        }
        return p
    }

    /// The bytes of a string argument, or nil with a usage error pushed.
    /// The string at `i` (a number made one, in place), borrowed: valid
    /// while it stays on the stack or anchored (`run(_:_:keep:data:)`).
    private func bytes(_ L: OpaquePointer, _ i: Int32, _ fn: String) -> FileData? {
        guard lua_type(L, i) == LUA_TSTRING || lua_type(L, i) == LUA_TNUMBER else {
            _ = host.argError(L, fn, i, "string")
            return nil
        }
        var len = 0
        let p = tasker_tostring(L, i, &len)!
        return FileData(UnsafeRawBufferPointer(start: p, count: len))
    }

    /// One boolean option of an options table at `i`, or nil with a usage error pushed.
    private func flag(_ L: OpaquePointer, _ i: Int32, _ fn: String, _ key: String, default value: Bool) -> Bool? {
        let s = LuaStack(L)
        if s.isNoneOrNil(i) { return value }
        guard s.type(i) == LUA_TTABLE else {
            _ = host.argError(L, fn, i, "table")
            return nil
        }
        let o = OptionReader(L: L, table: i, function: fn, known: [key])
        if let message = o.unknownOption() {
            _ = host.usage(L, message)
            return nil
        }
        do {
            return try o.read(key, "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? value
        } catch {
            _ = host.usage(L, error.text)
            return nil
        }
    }

    // MARK: running

    /// Runs `op` on the fs thread while the caller waits, or here when it
    /// is quick or the caller cannot wait.
    /// `data`: the stack index of the string the operation's bytes are
    /// borrowed from, anchored while the fs thread writes them.
    private func run(_ L: OpaquePointer, _ op: FileOperation, keep: Bool = false, data: Int32? = nil) -> Int32 {
        if op.changesFiles, let status = host.planStops(L, op.function) { return status }
        let position = LuaStack(L).whereString(level: 1)
        if op.mayBlock, host.inFiber, lua_isyieldable(L) != 0 {
            var anchor = LUA_NOREF
            if let data {
                lua_pushvalue(L, data)
                anchor = luaL_ref(L, tasker_registryindex())
            }
            return host.suspend(L, .wait(FileWait(op, keep: keep, position: position, anchor: anchor)))
        }
        var result = op.perform()
        if case .success(.staged(let staged)) = result { result = staged.commit() }
        if case .failure(let f) = result {
            pushFailure(L, f, position: position)
            return TASKER_RAISE
        }
        return push(L, result, keep: keep)
    }

    /// The values of a finished operation.
    func push(_ L: OpaquePointer, _ result: Result<FileResult, FSFailure>, keep: Bool) -> Int32 {
        let s = LuaStack(L)
        switch result {
        case .failure(let f):
            pushFailure(L, f, position: nil)
            return TASKER_RAISE
        case .success(.nothing), .success(.staged):
            return 0
        case .success(.bytes(let b)):
            b.withUnsafeBytes { _ = lua_pushlstring(L, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
            return 1
        case .success(.names(let names)):
            s.newTable(array: Int32(names.count))
            for (k, n) in names.enumerated() {
                n.withUnsafeBytes { _ = lua_pushlstring(L, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
                s.rawSet(-2, k + 1)
            }
            return 1
        case .success(.stat(nil)):
            lua_pushnil(L)
            return 1
        case .success(.stat(let st?)):
            s.newTable(hash: 4)
            s.push(st.type)
            s.rawSet(-2, "type")
            s.push(st.size)
            s.rawSet(-2, "size")
            s.push(st.mtime)
            s.rawSet(-2, "mtime")
            s.push(st.mode)
            s.rawSet(-2, "mode")
            return 1
        case .success(.flag(let b)):
            s.push(b)
            return 1
        case .success(.path(let p)):
            if !keep { tempDirs.append(p) }
            s.push(p)
            return 1
        }
    }

    func pushFailure(_ L: OpaquePointer, _ f: FSFailure, position: String?) {
        host.pushErrorTable(L, kind: "fs", message: f.message, where: position)
        LuaStack(L).push(f.path)
        LuaStack(L).rawSet(-2, "path")
    }
}

/// An `fs` operation on the fs thread; the caller resumes with its values
/// (`true, …`) or its failure (`false, err`). A cancel (the task timed out,
/// was cancelled, the run interrupted) stops the operation at its next
/// chunk or wait; the loop stays busy until the thread has let go, so an
/// atomic write's temp file is always removed. That write's rename happens
/// here, on the loop, and only while the caller is still live: a write
/// whose task is gone leaves the old content.
final class FileWait: FiberWait {
    let op: FileOperation
    let keep: Bool
    let position: String
    /// Registry ref of the string whose bytes `op` writes (borrowed, see
    /// `FileData`): released in `finish`, once the fs thread has let go.
    let anchor: Int32
    private let token = FileCancel()
    private var cancelled = false

    init(_ op: FileOperation, keep: Bool, position: String, anchor: Int32 = LUA_NOREF) {
        self.op = op
        self.keep = keep
        self.position = position
        self.anchor = anchor
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        runtime.loop.beginActivity()
        let target = LoopBound(runtime, loop: runtime.loop)
        let waiter = LoopBound(fiber, loop: runtime.loop)
        let me = LoopBound(self, loop: runtime.loop)
        let (op, token) = (self.op, self.token)
        FSModule.queue().async {
            let result = op.perform(token)
            target.loop.execute {
                let runtime = target.value
                runtime.loop.endActivity()
                me.value.finish(result, waiter.value, runtime)
            }
        }
    }

    private func finish(_ outcome: Result<FileResult, FSFailure>, _ fiber: Fiber, _ runtime: LuaRuntime) {
        if anchor != LUA_NOREF { luaL_unref(runtime.L, tasker_registryindex(), anchor) }
        var result = outcome
        let module = runtime.module(FSModule.self)
        if cancelled || fiber.finished {
            // The caller is gone: nothing is committed; a temp dir it made
            // is still the run's.
            switch result {
            case .success(.staged(let staged)): staged.discard()
            case .success(.path(let p)) where !keep: module.adopt(tempDir: p)
            default: break
            }
            return
        }
        if case .success(.staged(let staged)) = result {
            if let reason = runtime.stopReason(for: fiber) {
                // Past its deadline or interrupted, its close not yet run.
                staged.discard()
                runtime.finishWait(fiber, .failure(reason))
                return
            }
            result = staged.commit()
        }
        let position = self.position, keep = self.keep
        runtime.finishWait(fiber, .push { [unowned module] co in
            switch result {
            case .failure(let f):
                lua_pushboolean(co, 0)
                module.pushFailure(co, f, position: position)
                return 2
            case .success:
                lua_pushboolean(co, 1)
                return 1 + module.push(co, result, keep: keep)
            }
        })
    }

    func cancel() {
        cancelled = true
        token.cancel()
    }
}

extension FSModule {
    /// A temp dir made for a caller that is gone: removed at the end too.
    func adopt(tempDir path: String) { tempDirs.append(path) }
}
