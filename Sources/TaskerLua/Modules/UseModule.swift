import CLua
import CLuaShim
import Foundation
import Logging
import TaskerCore

/// A file loaded with `tasker.use`: what it registered belongs to it.
final class UsedFile {
    let path: String
    let chunkName: String
    var registrations = Registrations()
    /// The files it uses (absolute paths), as it last loaded.
    var uses: Set<String> = []
    var reloadScheduled = false
    /// When the last change event arrived; a reload waits until the file
    /// has been quiet for the debounce.
    var lastChange: UInt64 = 0

    init(path: String, chunkName: String) {
        self.path = path
        self.chunkName = chunkName
    }
}

struct LoadFailure: Error {
    let message: String
}

/// Interceptors and reactors one run of a used file registered.
struct Registrations {
    var interceptors: [LuaInterceptor] = []
    var reactors: [LuaReactor] = []
}

/// `tasker.use(path)` and hot reload: the files it loaded, what each
/// registered, the inotify watcher and the reload count.
final class UseModule: LuaModule {
    unowned let runtime: LuaRuntime
    /// Files loaded with `tasker.use`, by absolute path.
    var usedFiles: [String: UsedFile] = [:]
    /// The used files being loaded, outermost first (one that uses itself
    /// is found here).
    var loading: [UsedFile] = []
    /// While a used file runs: what it registers (not installed yet).
    var staging: Registrations?
    var watcher: FileWatcher?
    /// Successful reloads so far.
    private(set) var reloads = 0

    init(runtime: LuaRuntime) { self.runtime = runtime }

    // The process reactor holds a watcher until it is stopped.
    deinit { watcher?.stop() }

    /// `tasker.use`, added to the `tasker` table.
    func install(in runtime: LuaRuntime) {
        addToTaskerTable([("use", { L in UseModule.this(L!).use(L!) })], in: runtime.L)
    }

    /// Registers an interceptor: staged while a used file runs, else installed.
    func register(_ i: LuaInterceptor) {
        if staging != nil { staging!.interceptors.append(i) } else { i.engine.addInterceptor(i) }
    }

    /// Registers a reactor: staged while a used file runs, else installed.
    func register(_ r: LuaReactor) {
        if staging != nil { staging!.reactors.append(r) } else { r.engine.addReactor(r) }
    }

    /// Seconds to wait after a change before reloading, so that a burst of
    /// writes (an editor's save) makes one reload.
    static let reloadDebounce = 0.02

    /// `tasker.use(path)`: runs a file (relative to the pipeline's directory)
    /// in a fresh environment; with `--watch`, reloads it when it changes.
    func use(_ L: OpaquePointer) -> Int32 {
        guard let raw = LuaStack(L).bytes(1) else { return runtime.argError(L, "tasker.use", 1, "string") }
        guard !raw.contains(0) else { return runtime.usage(L, "bad argument #1 to 'tasker.use' (the path contains a NUL byte)") }
        guard let relative = String(validating: raw, as: UTF8.self) else {
            let at = raw.withUnsafeBytes { UTF8Check.firstInvalidByte($0) } ?? 0
            return runtime.usage(L, "bad argument #1 to 'tasker.use' (the path is not UTF-8: byte 0x\(String(format: "%02X", raw[at])) at \(at + 1))")
        }
        let chunkName = relative.hasPrefix("/") ? relative : (runtime.chunk.scriptDirectory == "." ? relative : runtime.chunk.scriptDirectory + "/" + relative)
        // `..` left to the kernel: after a symlinked directory it is that
        // directory's parent, not the text's (standardizing ran another file)
        let path = FileWatcher.absolute(chunkName)
        // a file that uses itself, or one that uses it: a usage error, not
        // Lua's C stack overflowing through nested loads (looked at first: a
        // reload runs a file that is used already)
        loading.last?.uses.insert(path)
        if Self.sameFile(path, FileWatcher.absolute(runtime.chunk.scriptPath)) {
            // the pipeline itself: its main chunk would run again
            let names = ([runtime.chunk.scriptPath] + loading.map(\.chunkName) + [chunkName]).joined(separator: " -> ")
            return runtime.usage(L, "tasker.use: a cycle of used files (\(names)): the pipeline uses itself")
        }
        if let chain = cycle(to: path) {
            // chain[0] is `path`; the last is a file being loaded
            let rest = chain.dropFirst().map { p in
                usedFiles[p]?.chunkName ?? loading.first { Self.sameFile($0.path, p) }?.chunkName ?? p
            }
            let names = (loading.map(\.chunkName) + [chunkName] + rest).joined(separator: " -> ")
            return runtime.usage(L, "tasker.use: a cycle of used files (\(names))")
        }
        // used already (by this name, or another: a link, `..`, a hard link)
        if usedFiles[path] != nil || usedFiles.values.contains(where: { Self.sameFile($0.path, path) }) { return 0 }
        let file = UsedFile(path: path, chunkName: chunkName)
        let source: [UInt8]
        switch UsedFileReader.read(chunkName) {
        case .success(let bytes): source = bytes
        case .failure(let failure):
            // an engine error like fs.read's, at the caller's line
            return runtime.raise(L, TaskFailure(.fs, "tasker.use: \(failure.message)", position: LuaStack(L).whereString(level: 1)))
        }
        loading.append(file)
        let outcome = runUsedFile(file, source: source, on: L)
        loading.removeLast()
        switch outcome {
        case .failure(let failure):
            // the message at its file:line; the traceback is the caller's
            LuaStack(L).push(failure.message.components(separatedBy: "\nstack traceback:")[0])
            return TASKER_RAISE
        case .success(let registrations):
            file.registrations = registrations
            for i in registrations.interceptors { i.engine.addInterceptor(i) }
            for r in registrations.reactors { r.engine.addReactor(r) }
        }
        usedFiles[path] = file
        if runtime.options.watch { startWatching(file) }
        return 0
    }

    /// Whether two paths lead to one file (links followed, hard links too).
    static func sameFile(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        var x = stat(), y = stat()
        return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino
    }

    /// The files from `path` on through what each uses, back to one being
    /// loaded (the chain of a cycle), or nil.
    private func cycle(to path: String) -> [String]? {
        var seen: Set<String> = []
        func walk(_ p: String) -> [String]? {
            if loading.contains(where: { Self.sameFile($0.path, p) }) { return [p] }
            guard seen.insert(p).inserted, let file = usedFiles[p] else { return nil }
            for next in file.uses.sorted() {
                if let rest = walk(next) { return [p] + rest }
            }
            return nil
        }
        return walk(path)
    }

    /// Loads and runs the file in a fresh environment (reads fall through to
    /// the globals), collecting its registrations instead of installing them.
    private func runUsedFile(_ file: UsedFile, source data: [UInt8], on S: OpaquePointer) -> Result<Registrations, LoadFailure> {
        let base = lua_gettop(S)
        defer { lua_settop(S, base) }
        let status = data.withUnsafeBytes { raw in
            tasker_loadbuffer(S, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count, "@" + file.chunkName)
        }
        guard status == LUA_OK else { return .failure(LoadFailure(message: LuaStack(S).string(-1) ?? "cannot load \(file.chunkName)")) }
        let s = LuaStack(S)
        s.newTable()                      // the environment
        s.newTable(hash: 1)               // its metatable: reads fall through to _G
        lua_rawgeti(S, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawSet(-2, "__index")
        lua_setmetatable(S, -2)
        _ = lua_setupvalue(S, -2, 1)      // the chunk's _ENV
        let saved = staging
        staging = Registrations()
        defer { staging = saved }
        let failed: String?
        if S == runtime.L {
            failed = runtime.callForError(nargs: 0, nresults: 0, context: "loading \(file.chunkName)")
        } else {
            // a table raised reads as it does from the main chunk: where, then JSON
            failed = tasker_pcall_traceback(S, 0, 0) == LUA_OK ? nil : runtime.describeRaised(on: S)
        }
        if let failed { return .failure(LoadFailure(message: failed)) }
        return .success(staging ?? Registrations())
    }

    private func startWatching(_ file: UsedFile) {
        do {
            if watcher == nil {
                let target = LoopBound(self, loop: runtime.loop)
                watcher = try FileWatcher(onChange: { path in
                    target.loop.execute { target.value.fileChanged(path) }
                }, onProblem: { problem in
                    target.loop.execute { target.value.runtime.logger.warning("--watch: \(problem)") }
                })
            }
            try watcher?.watch(file: file.path)
        } catch {
            runtime.logger.error("cannot watch \(file.chunkName): \(error)")
        }
    }

    /// A watched file changed: reload it once it has been quiet for the
    /// debounce (every new event pushes the reload back), so a burst of
    /// writes makes one reload of the finished file.
    func fileChanged(_ path: String) {
        guard !runtime.driver.finishedRun, let file = usedFiles[path] else { return }
        file.lastChange = Monotonic.now()
        guard !file.reloadScheduled else { return }
        file.reloadScheduled = true
        runtime.loop.beginActivity()
        reloadWhenQuiet(file)
    }

    private func reloadWhenQuiet(_ file: UsedFile) {
        let due = file.lastChange &+ Monotonic.nanos(UseModule.reloadDebounce)
        runtime.loop.schedule(at: due) { [unowned self] in
            guard Monotonic.now() >= file.lastChange &+ Monotonic.nanos(UseModule.reloadDebounce) else {
                self.reloadWhenQuiet(file)  // more writes came meanwhile
                return
            }
            self.runtime.loop.endActivity()
            file.reloadScheduled = false
            self.reload(file)
        }
    }

    /// Runs the file again; if it loads, its registrations replace the old
    /// ones in place (by name: held tasks move to the new interceptor),
    /// atomically between two interceptions. If not, the old ones stay.
    func reload(_ file: UsedFile) {
        guard !runtime.driver.finishedRun else { return }
        let old = file.registrations
        let source: [UInt8]
        switch UsedFileReader.read(file.path) {
        case .success(let bytes): source = bytes
        case .failure(let failure) where failure.missing:
            // written, then removed before the reload: no file is no change
            runtime.logger.info("\(file.chunkName) was removed; keeping the previous version until it is back")
            return
        case .failure(let failure):
            // a FIFO swapped in would hold the run's thread in the read
            runtime.logger.warning("reload of \(file.chunkName): \(failure.message); keeping the previous version")
            return
        }
        let registeredSomething = !old.interceptors.isEmpty || !old.reactors.isEmpty
        if registeredSomething, source.isEmpty {
            // Caught between a truncate and a write: wait for the next change.
            runtime.logger.warning("\(file.chunkName) is empty (half-written?); keeping the previous version")
            return
        }
        let new: Registrations
        let oldUses = file.uses
        file.uses = []
        loading.append(file)
        let outcome = runUsedFile(file, source: source, on: runtime.L)
        loading.removeLast()
        switch outcome {
        case .failure(let failure):
            file.uses = oldUses
            if let code = runtime.driver.exitRequested {
                runtime.logger.info("\(file.chunkName) called tasker.exit(\(code)) while reloading; the run ends")
                return
            }
            // one line: the message at its file:line, not the traceback
            let message = failure.message.components(separatedBy: "\nstack traceback:")[0]
            runtime.logger.error("reload of \(file.chunkName) failed; keeping the previous version: \(message)")
            return
        case .success(let r):
            new = r
        }
        if registeredSomething && new.interceptors.isEmpty && new.reactors.isEmpty {
            runtime.logger.warning("\(file.chunkName) now registers no interceptor or reactor (it registered \(old.interceptors.count) and \(old.reactors.count)); the run goes on without them")
        }
        for target in [HookTarget.task, .http] {
            let e = runtime.hooks.engine(for: target)
            swap(old.interceptors.filter { $0.target == target }, for: new.interceptors.filter { $0.target == target },
                 name: \.name, replace: e.replaceInterceptor, remove: e.removeInterceptor, add: e.addInterceptor)
            swap(old.reactors.filter { $0.target == target }, for: new.reactors.filter { $0.target == target },
                 name: \.name, replace: e.replaceReactor, remove: e.removeReactor, add: e.addReactor)
        }
        file.registrations = new
        reloads += 1
        runtime.callbacks.reloaded?(file.chunkName)
        runtime.logger.info("reloaded \(file.chunkName) (\(new.interceptors.count) interceptors, \(new.reactors.count) reactors)")
    }

    /// Old registrations give way to new ones by name: the same name is
    /// replaced in place, a vanished one removed, a new one added at the end.
    private func swap<T>(_ old: [T], for new: [T], name: KeyPath<T, String>, replace: (T, T) -> Void,
                         remove: (T) -> Void, add: (T) -> Void) {
        // Two of one name pair up in order: the first old with the first
        // new, the second with the second (each used once).
        var taken = Set<Int>()
        for o in old {
            if let k = new.indices.first(where: { !taken.contains($0) && new[$0][keyPath: name] == o[keyPath: name] }) {
                taken.insert(k)
                replace(o, new[k])
            } else {
                remove(o)
            }
        }
        for k in new.indices where !taken.contains(k) { add(new[k]) }
    }
}
