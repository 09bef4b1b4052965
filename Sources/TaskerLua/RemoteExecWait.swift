import CLua
import Foundation
import TaskerCore

/// Where `host=` sends a command: the destination and how `[task@host]`
/// names it.
struct RemoteTarget: Sendable {
    let destination: SSHDestination
    var acceptNewHostKeys = false
    /// How `[task@host]` and an error's `host` name it: a host object's
    /// `name`, else the string as given.
    var name: String
}

/// `tasker.exec`/`tasker.sh` with `host=`: the command runs through the
/// host's master connection (opened first, shared by the run); results as
/// locally. A cancel or timeout stops the remote process group (see
/// RemoteCommand) and answers once the stop's kill script has seen the
/// remote group gone and the local ssh has ended (should the host not
/// answer, 10 s on): so nothing of it is left when the caller hears.
/// ssh's own failures (exit 255 with its message, or a master that is gone)
/// are kind `ssh`; the command's exit status is kind `exec` as locally.
final class RemoteExecWait: FiberWait {
    let request: ExecRequest
    let target: RemoteTarget
    private let token = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    private var pid: pid_t = 0
    private var exited = false
    private var answered = false
    private var timedOut = false
    private var stopping = false
    private var remoteStopDone = false
    private var endedWhileStopping: ProcessReactor.Finished?
    /// Held while the ended command waits for its stop: a cancelled task
    /// may let go of this wait, and the stop's end must still settle it
    /// (its registration for a second signal is removed there).
    private var keptUntilStopped: RemoteExecWait?
    private var holdsSession = false
    private var timer: LoopTimer?
    private var killTimer: LoopTimer?
    private var backstop: LoopTimer?
    private weak var runtime: LuaRuntime?
    private var fiber: Fiber?

    init(_ request: ExecRequest, target: RemoteTarget) {
        self.request = request
        self.target = target
    }

    private var ssh: SSHModule? { runtime?.module(SSHModule.self) }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        self.runtime = runtime
        self.fiber = fiber
        if let timeout = request.timeout {
            timer = runtime.loop.schedule(after: timeout) { [weak self] in
                guard let self else { return }
                self.timedOut = true
                self.stopRemote()
            }
        }
        ssh?.withMaster(target, loop: runtime.loop, groups: runtime.processGroups) { [weak self] failure in
            guard let self else { return }
            guard let failure else {
                let dest = self.target.destination, ssh = self.ssh
                ssh?.takeSession(dest) { [weak self, weak ssh] in
                    // a session handed to a wait that is gone goes on to the next
                    guard let self else { ssh?.releaseSession(dest); return }
                    self.holdsSession = true
                    self.runCommand()
                }
                return
            }
            // the master is shared: its failure named as this caller named the host
            self.answer(.ssh(SSHFailure(code: failure.code, host: self.target.name, detail: failure.detail)))
        }
    }

    /// Gives the master's session back, once.
    private func releaseSession() {
        guard holdsSession else { return }
        holdsSession = false
        ssh?.releaseSession(target.destination)
    }

    /// The master is up and a session free: the command's own ssh, through it.
    private func runCommand() {
        guard !answered, !stopping, let runtime, let ssh else { return releaseSession() }
        defer { if pid == 0 { releaseSession() } }
        let r = request, groups = runtime.processGroups
        let argv: [String]
        do {
            argv = try ssh.options(acceptNew: target.acceptNewHostKeys) + target.destination.arguments
                + [RemoteCommand.line(argv: r.argv, cwd: r.cwd, env: r.env, token: token)]
        } catch {
            return answer(.local(.failed(error.message)))
        }
        var stdinFD: Int32?
        if let bytes = r.stdin {
            do { stdinFD = try StdinFile.make(bytes) } catch { return answer(.local(.failed("\(error)"))) }
        }
        defer { if let fd = stdinFD { close(fd) } }
        let child: ProcessSpawner.Child
        let stop = target.stopCommand(token: token, ssh: ssh), token = token
        do {
            // the stop is known before the spawn's lock is let go: a second
            // signal's exit, which takes that lock first, sees both or neither
            child = try groups.spawning { () throws(ProcessSpawner.SpawnError) in
                let c = try ProcessSpawner.spawn(argv: argv, env: ProcessSpawner.environment([:]), cwd: nil, stdin: stdinFD)
                if let stop { groups.remoteStarted(token, stop: stop) }
                return c
            }
        } catch {
            return answer(.local(.failed("cannot start ssh: \(error.message)", permanent: error.permanent)))
        }
        pid = child.pid
        groups.started(child.pid)
        runtime.loop.beginActivity()
        let me = LoopBound(self, loop: runtime.loop)
        ProcessReactor.shared.add(child, prefix: "[\(r.label)] ", lineSink: r.stream ? r.streamSink : nil) { finished in
            me.loop.execute {
                let wait = me.value
                groups.leaderExited(child.pid)
                wait.commandEnded(finished)
                wait.runtime?.loop.endActivity()
            }
        }
    }

    private func commandEnded(_ finished: ProcessReactor.Finished) {
        exited = true
        releaseSession()
        killTimer?.cancel()
        // The local ssh ends as soon as the remote shell does, while what
        // it started may still be dying: a stop answers once its kill
        // script has seen the group gone.
        if stopping && !remoteStopDone {
            endedWhileStopping = finished
            keptUntilStopped = self
            return
        }
        settle(finished)
    }

    /// The stop's kill script has ended (or its backstop fired).
    private func remoteStopFinished() {
        guard !remoteStopDone else { return }
        remoteStopDone = true
        if let f = endedWhileStopping {
            endedWhileStopping = nil
            return settle(f)
        }
        terminateLocal()
    }

    private func settle(_ finished: ProcessReactor.Finished) {
        defer { keptUntilStopped = nil }
        runtime?.processGroups.remoteEnded(token)
        backstop?.cancel()
        if timedOut { return answer(.local(.timedOut)) }
        if finished.overflow { return answer(.local(.failed("output over \(ProcessReactor.outputLimit >> 20) MiB"))) }
        if let cwd = request.cwd, let why = RemoteCommand.cwdFailure(code: finished.code, stderr: finished.stderr) {
            // as locally: it could not run there, and trying again cannot help
            return answer(.local(.failed("cwd '\(cwd)': \(why)", permanent: true)))
        }
        let done = ExecOutcome.finished(code: finished.code, stdout: finished.stdout, stderr: finished.stderr)
        guard finished.code == 255, !answered, let runtime, let ssh else { return answer(.local(done)) }
        let dest = target.destination
        if let failure = SSHFailure.classify(stderr: finished.stderr, host: target.name) {
            ssh.masterLost(dest)
            return answer(.ssh(failure))
        }
        // A master that died under a command leaves its client silent: 255
        // is the command's own only if the connection is still there.
        ssh.checkMaster(dest, loop: runtime.loop, groups: runtime.processGroups) { [weak self] alive in
            guard let self else { return }
            if alive { return self.answer(.local(done)) }
            self.ssh?.masterLost(dest)
            self.answer(.ssh(SSHFailure(code: .connect, host: target.name, detail: "the connection was lost while the command ran")))
        }
    }

    private enum Outcome {
        case local(ExecOutcome)
        case ssh(SSHFailure)
    }

    /// Resumes the caller, once.
    private func answer(_ outcome: Outcome) {
        guard !answered, let runtime, let fiber else { return }
        answered = true
        timer?.cancel()
        timer = nil
        let r = request
        let exec = runtime.module(ExecModule.self)
        switch outcome {
        case .local(let o):
            let host = target.name
            runtime.finishWait(fiber, .push { [unowned exec] co in
                let n = exec.pushExec(o, r, onto: co)
                // an exec or timeout error says which host, as an ssh error does
                if lua_toboolean(co, -2) == 0 && lua_type(co, -1) == LUA_TTABLE {
                    LuaStack(co).push(host)
                    LuaStack(co).rawSet(-2, "host")
                }
                return n
            })
        case .ssh(let f):
            runtime.finishWait(fiber, .push { [unowned runtime] co in
                lua_pushboolean(co, 0)
                f.push(onto: co, runtime: runtime, where: r.position)
                return 2
            })
        }
    }

    /// Cancel or timeout: stop the remote group through the master, then
    /// the local ssh if it is still there; before the command started there
    /// is nothing to stop.
    private func stopRemote() {
        guard !stopping, let runtime, let ssh else { return }
        stopping = true
        guard pid != 0 else {
            if timedOut { answer(.local(.timedOut)) }
            return
        }
        guard !exited else { return }
        // its output no longer matters, and the master holds its pipes
        ProcessReactor.shared.finishAtExit(pid)
        backstop = target.stopRemoteGroup(token: token, ssh: ssh, runtime: runtime) { [weak self] in self?.remoteStopFinished() }
    }

    /// SIGTERM to the local ssh, SIGKILL 2 s later (`ProcessStop`).
    private func terminateLocal() {
        guard pid != 0, !exited, killTimer == nil, let runtime else { return }
        killTimer = ProcessStop.terminate(group: pid, on: runtime.loop) { [weak self] in self?.exited == true }
    }

    func cancel() {
        answered = true
        timer?.cancel()
        stopRemote()
    }

    /// A paused task's remote processes stop where they are (SIGSTOP to
    /// the group through the master), and go on at resume.
    func pause() { signalRemote("STOP") }
    func resume() { signalRemote("CONT") }

    private func signalRemote(_ signal: String) {
        guard pid != 0, !exited, !stopping, let runtime, let ssh,
              let argv = try? ssh.options(acceptNew: target.acceptNewHostKeys) + target.destination.arguments
                + [RemoteCommand.signalScript(token: token, signal: signal)] else { return }
        _ = try? SSHRun.start(argv, groups: runtime.processGroups, loop: runtime.loop) { _ in }
    }
}

extension RemoteTarget {
    /// Stops the remote process group of the command run under `token`,
    /// through the host's master; `then` (the local ssh's stop) runs on the
    /// loop once that is done, or at once if it cannot start. Returns the
    /// backstop that runs `then` after 10 s: the host may not answer.
    func stopRemoteGroup(token: String, ssh: SSHModule, runtime: LuaRuntime,
                         then local: @escaping () -> Void) -> LoopTimer? {
        guard let argv = stopCommand(token: token, ssh: ssh) else {
            local()
            return nil
        }
        let then = LoopBound(local, loop: runtime.loop)
        do {
            try SSHRun.start(argv, groups: runtime.processGroups, loop: runtime.loop) { _ in
                then.loop.execute { then.value() }
            }
        } catch {
            local()
        }
        return runtime.loop.schedule(after: 10, local)
    }

    /// The ssh command line that stops the remote process group of `token`.
    func stopCommand(token: String, ssh: SSHModule) -> [String]? {
        guard let options = try? ssh.options(acceptNew: acceptNewHostKeys) else { return nil }
        return options + destination.arguments + [RemoteCommand.killScript(token: token)]
    }

    /// A host given as an address string or as a host object (a table
    /// whose `address` is one, and its `name`).
    private static func addressAndName(_ s: LuaStack, at i: Int32) -> (address: String?, name: String?) {
        guard s.type(i) == LUA_TTABLE else { return (s.string(i), nil) }
        s.rawGet(i, "address")
        s.rawGet(i, "name")
        defer { s.pop(2) }
        return (s.string(-2), s.string(-1))
    }

    /// The host named by the value at `i` (an address string or a host
    /// object); nil when it is nil. A failure's message is what follows the
    /// caller's own words ("bad argument #1 to 'ssh.put'" + message).
    static func read(_ L: OpaquePointer, at i: Int32) -> Result<RemoteTarget?, SSHUsage> {
        let s = LuaStack(L)
        let (address, name) = addressAndName(s, at: i)
        guard s.type(i) != LUA_TNIL, s.type(i) != LUA_TNONE else { return .success(nil) }
        guard let address else {
            return .failure(SSHUsage(message: " (address string or host object expected, got \(s.got(i, expected: "string")))"))
        }
        switch SSHDestination.parse(address) {
        case .failure(let why): return .failure(SSHUsage(message: ": " + why.message))
        case .success(let dest): return .success(RemoteTarget(destination: dest, name: name ?? address))
        }
    }

    /// `host=` (an address string, or a host object from `tasker.hosts`:
    /// a table whose `address` is one) and `accept_new_host_keys=` of the
    /// options table at `t`; nil without `host`. On a host the names of
    /// `env` must be ones a shell can export.
    static func read(_ L: OpaquePointer, options t: Int32, fn: String, env: [String: String]) -> Result<RemoteTarget?, SSHUsage> {
        let s = LuaStack(L)
        func bad(_ key: String, _ expected: String, _ i: Int32) -> Result<RemoteTarget?, SSHUsage> {
            .failure(SSHUsage(message: "bad option '\(key)' to '\(fn)' (\(expected) expected, got \(s.got(i, expected: expected)))"))
        }
        s.rawGet(t, "accept_new_host_keys")
        defer { s.pop() }
        let acceptAt = s.top
        if !s.isNoneOrNil(acceptAt) && s.type(acceptAt) != LUA_TBOOLEAN { return bad("accept_new_host_keys", "boolean", acceptAt) }
        s.rawGet(t, "host")
        defer { s.pop() }
        let at = s.top
        let (address, name) = addressAndName(s, at: at)
        guard s.type(at) != LUA_TNIL else {
            if s.boolean(acceptAt) { return .failure(SSHUsage(message: "option 'accept_new_host_keys' to '\(fn)' needs 'host'")) }
            return .success(nil)
        }
        guard let address else { return bad("host", "address string or host object", at) }
        switch SSHDestination.parse(address) {
        case .failure(let why): return .failure(SSHUsage(message: "bad option 'host' to '\(fn)': \(why.message)"))
        case .success(let dest):
            if let name = env.keys.sorted().first(where: { !RemoteCommand.isName($0) }) {
                return .failure(SSHUsage(message: "bad option 'env' to '\(fn)' (on a host, '\(name)' is not a variable name a shell can set)"))
            }
            return .success(RemoteTarget(destination: dest, acceptNewHostKeys: s.boolean(acceptAt), name: name ?? address))
        }
    }
}
