import CLua
import Foundation
import TaskerCore

/// `ssh.put(host, local, remote [, {mode=}])` and `ssh.get(host, remote,
/// local)`: one ssh through the host's master streams the file (RemoteCopy
/// has the remote side); the receiving side writes a temp name in the
/// target's directory and renames it only once the SHA-256 of what arrived
/// is the sender's. The local hash is `sha256sum`'s, run as a child, so a
/// big file never stalls the loop. Every failure is kind `ssh` with `host`
/// (code `copy` when the connection was fine but the copy was not). A
/// cancel cuts the stream and stops the remote side (put: TERM to its group,
/// whose trap removes the temp file) and removes a local temp file (get).
final class SSHCopyWait: FiberWait {
    enum Direction {
        case put(mode: Int?)
        case get
    }

    let target: RemoteTarget
    let direction: Direction
    let local: String
    let remote: String
    private let token = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    private var pid: pid_t = 0
    private var exited = false
    private var answered = false
    private var holdsSession = false
    /// get: the local temp file until it is renamed or removed.
    private var localTemp: String?
    private var killTimer: LoopTimer?
    private var backstop: LoopTimer?
    private weak var runtime: LuaRuntime?
    private var fiber: Fiber?

    /// The script's line that called it, for its errors.
    private let position: String?

    init(target: RemoteTarget, direction: Direction, local: String, remote: String, position: String?) {
        self.position = position
        self.target = target
        self.direction = direction
        self.local = local
        self.remote = remote
    }

    private var ssh: SSHModule? { runtime?.module(SSHModule.self) }
    private var fn: String { if case .put = direction { "ssh.put" } else { "ssh.get" } }
    private var shown: String {
        if case .put = direction { "'\(local)' to \(target.name):\(remote)" } else { "\(target.name):\(remote) to '\(local)'" }
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        self.runtime = runtime
        self.fiber = fiber
        switch direction {
        case .put(let mode):
            var st = stat()
            guard stat(local, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
                return fail("no such regular file")
            }
            let finalMode = mode ?? Int(st.st_mode & 0o7777)
            hashLocal(local) { [weak self] sum in
                guard let self else { return }
                guard let sum else { return self.fail("cannot read '\(self.local)' (sha256sum failed)") }
                self.connect { self.runPut(sha256: sum, mode: finalMode) }
            }
        case .get:
            connect { [weak self] in self?.runGet() }
        }
    }

    /// `then` once the host's master is up and a session of it is ours.
    private func connect(_ then: @escaping () -> Void) {
        guard let runtime, let ssh, !answered else { return }
        ssh.withMaster(target, loop: runtime.loop, groups: runtime.processGroups) { [weak self] failure in
            guard let self else { return }
            if let failure { return self.answer(SSHFailure(code: failure.code, host: self.target.name, detail: failure.detail)) }
            let dest = self.target.destination, ssh = self.ssh
            ssh?.takeSession(dest) { [weak self, weak ssh] in
                guard let self, !self.answered else { ssh?.releaseSession(dest); return }
                self.holdsSession = true
                then()
            }
        }
    }

    private func releaseSession() {
        guard holdsSession else { return }
        holdsSession = false
        ssh?.releaseSession(target.destination)
    }

    private func runPut(sha256: String, mode: Int) {
        let fd = open(local, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return fail("cannot open '\(local)': \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        runSSH(RemoteCopy.put(remote: remote, sha256: sha256, mode: mode, token: token), stdin: .fd(fd), stdout: .pipe) { [weak self] finished in
            self?.ended(finished) { self?.answerDone() }
        }
    }

    private func runGet() {
        var st = stat()
        if stat(local, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { return fail("'\(local)' is a directory") }
        let (dir, base) = Self.split(local)
        let temp = "\(dir)/.\(base).tasker-\(token)"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else { return fail("cannot write '\(temp)': \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        localTemp = temp
        runSSH(RemoteCopy.get(remote: remote), stdin: .null, stdout: .fd(fd)) { [weak self] finished in
            self?.ended(finished) { self?.verifyGet(finished) }
        }
    }

    /// The remote side succeeded: the local copy's hash must be the one it sent.
    private func verifyGet(_ finished: ProcessReactor.Finished) {
        guard let temp = localTemp else { return }
        guard let sent = RemoteCopy.reportedHash(finished.stderr) else { return fail("the host sent no SHA-256") }
        hashLocal(temp) { [weak self] sum in
            guard let self, !self.answered, let temp = self.localTemp else { return }
            guard sum == sent else { return self.fail("the copy's SHA-256 differs from the remote file's (it changed or the copy was cut short)") }
            // past its deadline or cancelled, its wait not yet closed: nothing is replaced
            if let runtime = self.runtime, let fiber = self.fiber, let reason = runtime.stopReason(for: fiber) {
                self.removeLocalTemp()
                self.answered = true
                return runtime.finishWait(fiber, .failure(reason))
            }
            guard rename(temp, self.local) == 0 else {
                return self.fail("cannot rename '\(temp)' to '\(self.local)': \(String(cString: strerror(errno)))")
            }
            self.localTemp = nil
            self.answerDone()
        }
    }

    private func runSSH(_ line: String, stdin: ProcessSpawner.Stream, stdout: ProcessSpawner.Stream,
                        done: @escaping (ProcessReactor.Finished) -> Void) {
        guard let runtime, let ssh else { return releaseSession() }
        let argv: [String]
        do { argv = try ssh.options(acceptNew: target.acceptNewHostKeys) + target.destination.arguments + [line] } catch {
            return fail(error.message)
        }
        let me = LoopBound(done, loop: runtime.loop)
        do {
            pid = try SSHRun.start(argv, stdin: stdin, stdout: stdout, groups: runtime.processGroups, loop: runtime.loop) { finished in
                me.loop.execute { me.value(finished) }
            }
        } catch {
            fail("cannot start ssh: \(error.message)")
        }
    }

    /// The copy's ssh ended: ssh's own failures (255) become theirs, a
    /// remote script's failure becomes `copy`; success goes on to `then`.
    private func ended(_ finished: ProcessReactor.Finished, then: @escaping () -> Void) {
        exited = true
        releaseSession()
        killTimer?.cancel()
        backstop?.cancel()
        guard !answered, let runtime, let ssh else { return }
        if finished.code == 0 { return then() }
        let dest = target.destination
        let signal = finished.status & 0x7f
        if signal != 0 && signal != 0x7f { return fail("the local ssh was killed (signal \(signal))") }
        guard finished.code == 255 else { return fail(RemoteCopy.reason(finished.stderr) ?? "the remote side exited with \(finished.code)") }
        if let failure = SSHFailure.classify(stderr: finished.stderr, host: target.name) {
            ssh.masterLost(dest)
            return answer(failure)
        }
        ssh.checkMaster(dest, loop: runtime.loop, groups: runtime.processGroups) { [weak self] alive in
            guard let self else { return }
            if !alive { self.ssh?.masterLost(dest) }
            self.fail(alive ? "the remote side exited with 255" : "the connection was lost during the copy")
        }
    }

    /// `sha256sum` of `path` (hex), or nil; on the loop.
    private func hashLocal(_ path: String, _ then: @escaping (String?) -> Void) {
        guard let runtime else { return }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return then(nil) }
        defer { close(fd) }
        let me = LoopBound(then, loop: runtime.loop)
        do {
            try SSHRun.start(["sha256sum"], stdin: .fd(fd), groups: runtime.processGroups, loop: runtime.loop) { finished in
                let hex = String(decoding: finished.stdout.prefix(64), as: UTF8.self)
                let ok = finished.code == 0 && hex.count == 64
                me.loop.execute { me.value(ok ? hex : nil) }
            }
        } catch {
            then(nil)
        }
    }

    private func fail(_ why: String) {
        answer(SSHFailure(code: .copy, host: target.name, detail: SecretMask.shared.mask("\(fn) \(shown): \(why)")))
    }

    private func removeLocalTemp() {
        if let temp = localTemp { unlink(temp) }
        localTemp = nil
    }

    private func answerDone() {
        guard !answered, let runtime, let fiber else { return }
        answered = true
        runtime.finishWait(fiber, .push { co in
            lua_pushboolean(co, 1)  // resumed fine, and the result: true
            lua_pushboolean(co, 1)
            return 2
        })
    }

    private func answer(_ f: SSHFailure) {
        removeLocalTemp()
        releaseSession()
        guard !answered, let runtime, let fiber else { return }
        answered = true
        runtime.finishWait(fiber, .push { [unowned runtime] co in
            lua_pushboolean(co, 0)
            f.push(onto: co, runtime: runtime, where: self.position)
            return 2
        })
    }

    /// The caller is gone: stop the copy; nothing is renamed after this.
    func cancel() {
        answered = true
        removeLocalTemp()
        guard pid != 0, !exited, let runtime, let ssh else { return releaseSession() }
        // The stream is cut at once (what arrived then no longer matches the
        // hash, so nothing is renamed), not only after the remote stop has
        // made its way: on a loaded machine that took long enough for a
        // whole file to arrive and replace the old one after the cancel.
        ProcessReactor.shared.finishAtExit(pid)  // the master holds its pipes
        terminateLocal()
        guard case .put = direction else { return }
        backstop = target.stopRemoteGroup(token: token, ssh: ssh, runtime: runtime) {}
    }

    /// SIGTERM to the local ssh, SIGKILL 2 s later (`ProcessStop`).
    private func terminateLocal() {
        guard pid != 0, !exited, killTimer == nil, let runtime else { return }
        killTimer = ProcessStop.terminate(group: pid, on: runtime.loop) { [weak self] in self?.exited == true }
    }

    /// A path's directory and last component.
    static func split(_ path: String) -> (String, String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }
}
