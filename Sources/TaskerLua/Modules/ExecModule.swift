import CLua
import CLuaShim
import TaskerCore
import TaskerHTTP
#if canImport(Glibc)
import Glibc
#endif

/// `tasker.exec{"cmd", "arg", …, cwd=, env={}, stdin=, timeout=, check=true}`
/// and `tasker.sh(command [, opts])` (README, Processes). Both wait; they return
/// `{code=, stdout=, stderr=, ok=}`.
final class ExecModule: LuaModule {
    unowned let runtime: LuaRuntime

    /// Every process group the run's `exec`/`sh` calls started.
    let groups = ProcessGroups()
    /// What tasks' processes wrote, for the journal.
    let outputs = TaskOutputs()

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("exec", { L in ExecModule.this(L!).exec(L!) }),
        ("sh", { L in ExecModule.this(L!).sh(L!) }),
    ]

    /// `tasker.exec` and `tasker.sh`, added to the `tasker` table.
    func install(in runtime: LuaRuntime) { addToTaskerTable(Self.functions, in: runtime.L) }

    static let options: Set<String> = ["cwd", "env", "stdin", "timeout", "check", "stream", "host", "accept_new_host_keys"]

    func exec(_ L: OpaquePointer) -> Int32 {
        if lua_type(L, 1) == LUA_TSTRING, let line = LuaStack(L).string(1) {
            return runtime.usage(L, "tasker.exec takes the program and its arguments as a list, "
                + "{\"ls\", \"-la\"}, and runs no shell; for a shell command line use tasker.sh(\(Self.quoted(line)))")
        }
        guard lua_type(L, 1) == LUA_TTABLE else { return runtime.argError(L, "tasker.exec", 1, "table") }
        // `tasker.exec({"ls"}, {cwd = d})` would run without the cwd
        if let extra = TaskerModule.extraArgument(L, after: 1) {
            return runtime.usage(L, "tasker.exec takes one argument, the command with its options, and got "
                                 + "\(LuaStack(L).typeName(extra)) as argument #\(extra); options go in it: tasker.exec{\"ls\", cwd = \"/tmp\"}")
        }
        let s = LuaStack(L)
        var argv: [[UInt8]] = []
        for k in stride(from: 1, through: s.rawLength(1), by: 1) {
            s.rawGet(1, k)
            guard let a = s.bytes(-1) ?? (s.type(-1) == LUA_TNUMBER ? Array(s.describe(-1).utf8) : nil) else {
                return runtime.usage(L, "bad element #\(k) in 'tasker.exec' command (string expected, got \(s.got(-1, expected: "string")))")
            }
            s.pop()
            argv.append(a)
        }
        guard !argv.isEmpty else { return runtime.usage(L, "tasker.exec: the command is empty (give {\"program\", \"arg\", ...})") }
        // A C string ends at NUL: the argument would be cut short silently.
        if let k = argv.firstIndex(where: { $0.contains(0) }) {
            return runtime.usage(L, "bad element #\(k + 1) in 'tasker.exec' command (it contains a NUL byte)")
        }
        return execute(L, argv: argv, options: 1, fn: "tasker.exec")
    }

    /// A command line as a Lua string literal, for a message (secrets
    /// hidden, long lines cut).
    static func quoted(_ line: String) -> String {
        var text = SecretMask.shared.mask(Redaction.text(line))  // before the cut: half a secret is not found
        if text.count > 80 { text = String(text.prefix(77)) + "..." }
        var out = "\""
        for ch in text.unicodeScalars {
            switch ch {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out += TerminalText.isControl(ch) ? "?" : String(ch)
            }
        }
        return out + "\""
    }

    func sh(_ L: OpaquePointer) -> Int32 {
        guard let command = LuaStack(L).bytes(1) else { return runtime.argError(L, "tasker.sh", 1, "string") }
        guard !command.contains(0) else { return runtime.usage(L, "bad argument #1 to 'tasker.sh' (it contains a NUL byte)") }
        guard lua_type(L, 2) <= LUA_TNIL || lua_type(L, 2) == LUA_TTABLE else { return runtime.argError(L, "tasker.sh", 2, "table") }
        if let extra = TaskerModule.extraArgument(L, after: 2) {
            return runtime.usage(L, "tasker.sh takes a command and a table of options, and got \(LuaStack(L).typeName(extra)) as argument #\(extra)")
        }
        return execute(L, argv: [Array("/bin/sh".utf8), Array("-c".utf8), command], options: lua_type(L, 2) == LUA_TTABLE ? 2 : 0,
                       fn: "tasker.sh")
    }

    /// Reads the options from the table at `options` (0: none) and waits.
    private func execute(_ L: OpaquePointer, argv: [[UInt8]], options t: Int32, fn: String) -> Int32 {
        var r = ExecRequest(arguments: argv)
        var remote: RemoteTarget?
        if t != 0 {
            let s = LuaStack(L)
            let o = OptionReader(L: L, table: t, function: fn, known: ExecModule.options)
            if let message = o.unknownOption(skippingIntegers: true) { return runtime.usage(L, message) }
            do {
                // UTF-8: its bytes are not changed on the way (each bad one to U+FFFD)
                r.cwd = try o.read("cwd", "UTF-8 string without a NUL byte") { i in
                    s.bytes(i).flatMap { $0.contains(0) ? nil : String(validating: $0, as: UTF8.self) }
                }
                r.stdin = try o.read("stdin", "string") { i in
                    guard s.type(i) == LUA_TSTRING else { return nil }
                    var len = 0
                    let p = tasker_tostring(L, i, &len)!
                    return Array(UnsafeRawBufferPointer(start: p, count: len))
                }
                r.timeout = try o.read("timeout", "positive number") { s.number($0).flatMap { $0 > 0 && $0.isFinite ? $0 : nil } }
                r.check = try o.read("check", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? true
                r.stream = try o.read("stream", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? false
                // A C string ends at NUL and a name ends at '=': either would
                // hand the child something else than was asked, silently.
                r.env = try o.read("env", "table of UTF-8 strings, names without '=' and nothing with a NUL byte") { i in
                    guard s.type(i) == LUA_TTABLE else { return nil }
                    var env: [String: String] = [:]
                    func text(_ i: Int32) -> String? { s.bytes(i).flatMap { String(validating: $0, as: UTF8.self) } }
                    lua_pushnil(L)
                    while lua_next(L, i) != 0 {
                        guard let k = text(-2), let v = text(-1) ?? (s.type(-1) == LUA_TNUMBER ? s.describe(-1) : nil),
                              !k.isEmpty, !k.utf8.contains(0), !k.utf8.contains(UInt8(ascii: "=")), !v.utf8.contains(0) else {
                            s.pop(2)
                            return nil
                        }
                        env[k] = v
                        s.pop()
                    }
                    return env
                } ?? [:]
            } catch {
                return runtime.usage(L, error.text)
            }
            // a host name whose bytes would be changed names another host
            s.rawGet(t, "host")
            let hostBytes = s.bytes(-1)
            s.pop()
            if let hostBytes, String(validating: hostBytes, as: UTF8.self) == nil {
                return runtime.usage(L, "bad option 'host' to '\(fn)' (a UTF-8 host name expected)")
            }
            switch RemoteTarget.read(L, options: t, fn: fn, env: r.env) {
            case .success(let target): remote = target
            case .failure(let bad): return runtime.usage(L, bad.message)
            }
        }
        if let status = runtime.cannotWait(L, fn) { return status }
        r.task = runtime.driver.current?.taskID
        r.position = LuaStack(L).whereString(level: 1)
        if r.stream {
            r.label = runtime.driver.current?.taskID.map { runtime.engine.name($0) } ?? "main"
            let sink = runtime.options.diagnostics
            // One child line, one line of ours: a `\r` (a progress meter) or
            // ESC must not rewrite the status line or earlier output. A CR
            // ending the line is a CRLF line end, dropped.
            r.streamSink = { line in
                sink(TerminalText.escape(line.hasSuffix("\r") ? String(line.dropLast()) : line))
            }
        }
        if let remote {
            if let problem = runtime.module(SSHModule.self).configProblem() { return runtime.usage(L, problem) }
            // The remote command is one line of text: its bytes would be
            // changed (each bad one to U+FFFD), so it would name other files.
            guard r.isUTF8 else {
                return runtime.usage(L, "\(fn): a command on a host must be UTF-8 (run it here, or name the files in UTF-8)")
            }
            r.label += "@" + remote.name
            return runtime.suspend(L, .wait(RemoteExecWait(r, target: remote)))
        }
        return runtime.suspend(L, .wait(ExecWait(r)))
    }

    /// Lines of stderr an exit error keeps, and bytes at most.
    static let stderrLines = 20
    static let stderrBytes = 4096

    /// `'cmd' exited with code 1: <its stderr's last line> (check = false
    /// …)`, then, when stderr had more, its last 20 lines: a test runner's
    /// real failure comes last, after pages of progress.
    static func exitMessage(_ command: String, code: Int, stderr: [UInt8]) -> String {
        // Masked before it is cut: a secret cut in half is no longer found.
        let stderr = SecretMask.shared.mask(stderr) ?? stderr
        let tail = String(decoding: stderr.suffix(stderrBytes), as: UTF8.self)
        let lines = tail.split(separator: "\n", omittingEmptySubsequences: true)
            .map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
            .filter { !$0.allSatisfy(\.isWhitespace) }
        var message = "'\(command)' exited with code \(code)"
        if let last = lines.last { message += ": \(last.prefix(500))" }
        message += " (check = false returns the code instead)"
        if lines.count > 1 {
            let kept = lines.suffix(stderrLines)
            message += "\nstderr, its last \(kept.count) line\(kept.count == 1 ? "" : "s"):\n" + kept.joined(separator: "\n")
        }
        return message
    }

    /// `true, {code, stdout, stderr, ok}` or `false, err`.
    func pushExec(_ outcome: ExecOutcome, _ r: ExecRequest, onto co: OpaquePointer) -> Int32 {
        let s = LuaStack(co)
        switch outcome {
        case .timedOut:
            lua_pushboolean(co, 0)
            runtime.pushErrorTable(co, kind: "timeout", message: "'\(r.shortDisplay)' exceeded \(formatSeconds(r.timeout ?? 0))", where: r.position)
        case .failed(let why, let permanent):
            lua_pushboolean(co, 0)
            runtime.pushErrorTable(co, kind: "exec", message: "cannot run '\(r.shortDisplay)': \(why)", where: r.position)
            if permanent {
                lua_pushboolean(co, 1)
                s.rawSet(-2, "permanent")
            }
        case .finished(let code, let stdout, let stderr):
            outputs.note(task: r.task, command: r.display, code: code, stdout: stdout, stderr: stderr)
            if r.check && code != 0 {
                lua_pushboolean(co, 0)
                runtime.pushErrorTable(co, kind: "exec", message: Self.exitMessage(r.shortDisplay, code: code, stderr: stderr), where: r.position)
                s.push(code)
                s.rawSet(-2, "code")
                pushBytes(co, stderr)
                s.rawSet(-2, "stderr")
                return 2
            }
            lua_pushboolean(co, 1)
            s.newTable(hash: 4)
            s.push(code)
            s.rawSet(-2, "code")
            pushBytes(co, stdout)
            s.rawSet(-2, "stdout")
            pushBytes(co, stderr)
            s.rawSet(-2, "stderr")
            s.push(code == 0)
            s.rawSet(-2, "ok")
        }
        return 2
    }

    private func pushBytes(_ co: OpaquePointer, _ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(co, $0.baseAddress, $0.count) }
        }
    }
}

/// A process run by `tasker.exec`/`tasker.sh`: a Swift task; its end resumes
/// the fiber on the loop; a cancel sends SIGTERM, then SIGKILL after 2 s.
final class ExecWait: FiberWait {
    let request: ExecRequest
    private var pid: pid_t = 0
    private var exited = false
    private var answered = false
    private var timedOut = false
    private var timer: LoopTimer?
    /// The SIGKILL 2 s after a SIGTERM, cancelled when the child exits
    /// (else the run would wait for it).
    private var killTimer: LoopTimer?
    private weak var runtime: LuaRuntime?
    private var fiber: Fiber?

    init(_ request: ExecRequest) { self.request = request }

    /// Spawns the child (posix_spawn) and hands it to the process reactor;
    /// its end comes back to the loop.
    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        self.runtime = runtime
        self.fiber = fiber
        let r = request, groups = runtime.processGroups
        var stdinFD: Int32?
        if let bytes = r.stdin {
            do { stdinFD = try StdinFile.make(bytes) } catch {
                answer(.failed("\(error)"))
                return
            }
        }
        defer { if let fd = stdinFD { close(fd) } }
        let child: ProcessSpawner.Child
        do {
            child = try groups.spawning { () throws(ProcessSpawner.SpawnError) in
                try ProcessSpawner.spawn(arguments: r.arguments, env: ProcessSpawner.environment(r.env), cwd: r.cwd,
                                         stdin: stdinFD.map { .fd($0) } ?? .null, stdout: .pipe, stderr: .pipe)
            }
        } catch {
            answer(.failed(error.message, permanent: error.permanent))
            return
        }
        pid = child.pid
        groups.started(child.pid)
        runtime.loop.beginActivity()
        let me = LoopBound(self, loop: runtime.loop)
        // the earlier of the command's timeout and its task's
        var deadline = r.task.map { runtime.engine.deadline($0) } ?? 0
        if let t = r.timeout {
            let own = Monotonic.now() &+ Monotonic.nanos(t)
            deadline = deadline == 0 ? own : min(deadline, own)
        }
        ProcessReactor.shared.add(child, prefix: "[\(r.label)] ", lineSink: r.stream ? r.streamSink : nil,
                                  deadline: deadline) { finished in
            me.loop.execute {
                let wait = me.value
                wait.exited = true
                wait.killTimer?.cancel()
                wait.killTimer = nil
                wait.runtime?.loop.endActivity()
                groups.leaderExited(child.pid)
                if wait.timedOut {
                    wait.answer(.timedOut)
                } else {
                    wait.answer(finished.overflow ? .failed("output over \(ProcessReactor.outputLimit >> 20) MiB")
                                                  : .finished(code: finished.code, stdout: finished.stdout, stderr: finished.stderr))
                }
            }
        }
        if let timeout = r.timeout {
            // The caller learns of the timeout once the child is gone.
            timer = runtime.loop.schedule(after: timeout) { [weak self] in
                guard let self else { return }
                self.timedOut = true
                self.terminate()
            }
        }
    }

    /// Resumes the caller, once.
    private func answer(_ outcome: ExecOutcome) {
        guard !answered, let runtime, let fiber else { return }
        answered = true
        timer?.cancel()
        timer = nil
        let r = request
        let module = runtime.module(ExecModule.self)
        runtime.finishWait(fiber, .push { [unowned module] co in module.pushExec(outcome, r, onto: co) })
    }

    /// The task was paused: its processes stop where they are.
    func pause() { if pid != 0 && !exited { killpg(pid, SIGSTOP) } }
    func resume() { if pid != 0 && !exited { killpg(pid, SIGCONT) } }

    /// SIGTERM to the child's group (continued, if a pause stopped it),
    /// SIGKILL 2 s later if it is still there.
    private func terminate() {
        guard pid != 0, !exited, killTimer == nil, let runtime else { return }
        killTimer = ProcessStop.terminate(group: pid, on: runtime.loop) { [weak self] in self?.exited == true }
    }

    func cancel() {
        answered = true
        timer?.cancel()
        terminate()
    }
}
