import CLua
import CLuaShim
import Foundation
import TaskerCore

/// Hosts over SSH, through the system OpenSSH client (`host=` on
/// `tasker.exec`/`tasker.sh`; see RemoteExecWait). Owns what a run shares
/// across remote commands: `tasker.configure{ssh_config=, accept_new_host_keys=}`
/// (or `TASKER_SSH_CONFIG`), the run's private 0700 directory of control
/// sockets, and one master connection per destination, opened by the first
/// command to it (the others wait for it) and closed with `ssh -O exit`
/// when the run ends. Loop-confined.
final class SSHModule: LuaModule {
    unowned let host: any ModuleHost
    private var scriptDirectory: () -> String = { "." }
    /// The user's ssh_config (absolute), nil: their own ~/.ssh/config.
    private(set) var configFile: String?
    private var configured = false
    var acceptNewHostKeys = false
    /// The run's directory (0700): control sockets and the config tasker
    /// passes with -F; made at the first remote command.
    private var dir: String? { didSet { publishExitCleanup() } }
    private var generatedConfig: (path: String, includes: String?)?
    private var masters: [SSHDestination: Master] = [:] { didSet { publishExitCleanup() } }
    private var processGroups: ProcessGroups?

    /// A destination's master: being opened (with the commands waiting for
    /// it) or open.
    private enum Master {
        case opening([(SSHFailure?) -> Void])
        case open
    }

    /// Idle time after which a master left behind (tasker killed) exits.
    static let persist = "60"

    init(host: any ModuleHost) { self.host = host }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("configure", { L in SSHModule.this(L!).configure(L!) }),
    ]

    /// The `ssh` global.
    static let library: [(String, tasker_SwiftFunction)] = [
        ("get", { L in SSHModule.this(L!).copy(L!, put: false) }),
        ("put", { L in SSHModule.this(L!).copy(L!, put: true) }),
    ]

    func install(in runtime: LuaRuntime) {
        scriptDirectory = { [unowned runtime] in runtime.chunk.scriptDirectory }
        processGroups = runtime.processGroups
        addToTaskerTable(Self.functions, in: runtime.L)
        pushTable(Self.library, in: runtime.L)
        setGlobal("ssh", in: runtime.L)
    }

    /// `ssh.put(host, local, remote [, {mode=}])`, `ssh.get(host, remote, local)`:
    /// true, or raises kind `ssh` (see SSHCopyWait).
    func copy(_ L: OpaquePointer, put: Bool) -> Int32 {
        let fn = put ? "ssh.put" : "ssh.get"
        let s = LuaStack(L)
        let target: RemoteTarget
        switch RemoteTarget.read(L, at: 1) {
        case .failure(let why): return host.usage(L, "bad argument #1 to '\(fn)'" + why.message)
        case .success(nil): return host.argError(L, fn, 1, "address string or host object")
        case .success(let t?): target = t
        }
        for i: Int32 in 2...3 {
            guard lua_type(L, i) == LUA_TSTRING, let path = s.string(i), !path.isEmpty, !path.utf8.contains(0) else {
                return host.argError(L, fn, i, "non-empty path")
            }
        }
        var mode: Int?
        if put, !s.isNoneOrNil(4) {
            guard lua_type(L, 4) == LUA_TTABLE else { return host.argError(L, fn, 4, "table") }
            let o = OptionReader(L: L, table: 4, function: fn, known: ["mode"])
            if let message = o.unknownOption() { return host.usage(L, message) }
            s.rawGet(4, "mode")
            if !s.isNoneOrNil(-1) {
                guard let m = Self.mode(L, -1) else {
                    s.pop()
                    return host.usage(L, "bad option 'mode' to '\(fn)' (permission bits expected, as 420, \"644\" or \"0644\")")
                }
                mode = m
            }
            s.pop()
        } else if !put, !s.isNoneOrNil(4) {
            return host.usage(L, "ssh.get takes no options (host, remote, local)")
        }
        if let problem = configProblem() { return host.usage(L, problem) }
        if let status = host.cannotWait(L, fn) { return status }
        let (local, remote) = put ? (s.string(2)!, s.string(3)!) : (s.string(3)!, s.string(2)!)
        return host.suspend(L, .wait(SSHCopyWait(target: target, direction: put ? .put(mode: mode) : .get, local: local, remote: remote,
                                                    position: LuaStack(L).whereString(level: 1))))
    }

    /// Permission bits: an integer, or an octal string.
    private static func mode(_ L: OpaquePointer, _ i: Int32) -> Int? {
        let m: Int?
        if lua_type(L, i) == LUA_TNUMBER { m = LuaStack(L).integer(i) }
        else if lua_type(L, i) == LUA_TSTRING, let text = LuaStack(L).string(i) { m = Int(text, radix: 8) }
        else { m = nil }
        guard let m, (0...0o7777).contains(m) else { return nil }
        return m
    }

    /// `tasker.configure{ssh_config=PATH, accept_new_host_keys=bool}`.
    func configure(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TTABLE else { return host.argError(L, "tasker.configure", 1, "table") }
        let s = LuaStack(L)
        let o = OptionReader(L: L, table: 1, function: "tasker.configure", known: ["ssh_config", "accept_new_host_keys", "ssh_connections"])
        if let message = o.unknownOption() { return host.usage(L, message) }
        do {
            if let path = try o.read("ssh_config", "string", { s.string($0) }) {
                guard let full = resolve(path) else {
                    return host.usage(L, "bad option 'ssh_config' to 'tasker.configure' (no regular file '\(path)')")
                }
                configFile = full
                configured = true
                envProblem = nil
            }
            if let accept = try o.read("accept_new_host_keys", "boolean", { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil }) {
                acceptNewHostKeys = accept
            }
            if let cap = try o.read("ssh_connections", "integer >= 1", { s.integer($0).flatMap { $0 >= 1 ? $0 : nil } }) {
                maxMasters = cap
            }
        } catch {
            return host.usage(L, error.text)
        }
        return 0
    }

    /// `path` as an absolute path to a regular file (a relative one beside
    /// the pipeline first, then from the current directory), or nil.
    private func resolve(_ path: String) -> String? {
        let cwd = FileManager.default.currentDirectoryPath
        let candidates = path.hasPrefix("/") ? [path] : [scriptDirectory() + "/" + path, cwd + "/" + path]
        for c in candidates {
            var st = stat()
            if stat(c, &st) == 0, st.st_mode & S_IFMT == S_IFREG {
                return c.hasPrefix("/") ? c : cwd + "/" + c
            }
        }
        return nil
    }

    // MARK: ssh's command line

    /// ssh's options for every command of the run. The -F file tasker
    /// writes includes the user's config first (its values win: ssh keeps
    /// the first it reads), then defaults for what a fleet needs: a connect
    /// timeout, and keep-alives, so a host that vanishes mid-command fails
    /// its commands instead of hanging them.
    func options(acceptNew: Bool) throws(SSHSetupError) -> [String] {
        let dir = try runDirectory()
        if let problem = configProblem() { throw SSHSetupError(message: problem) }
        if generatedConfig == nil || generatedConfig!.includes != configFile {
            let path = dir + "/config-\(UUID().uuidString.prefix(8))"
            let include = configFile.map { "Include \(Self.configWord($0))" } ?? "Include ~/.ssh/config /etc/ssh/ssh_config"
            let text = "\(include)\nHost *\n  ConnectTimeout 10\n  ServerAliveInterval 3\n  ServerAliveCountMax 3\n"
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw SSHSetupError(message: "cannot write ssh's config in '\(dir)'")
            }
            generatedConfig = (path, configFile)
        }
        return ["ssh", "-F", generatedConfig!.path, "-T",
                "-o", "BatchMode=yes",
                "-o", "ControlMaster=auto", "-o", "ControlPath=\(dir)/%C", "-o", "ControlPersist=\(Self.persist)",
                "-o", "StrictHostKeyChecking=\(acceptNew || acceptNewHostKeys ? "accept-new" : "yes")",
                "-o", "LogLevel=ERROR"]
    }

    /// Why the config `TASKER_SSH_CONFIG` names cannot be used, read at the
    /// first remote command unless `tasker.configure` named one (a usage
    /// error at that command's line); nil when it is fine or not set.
    func configProblem() -> String? {
        if !configured, let env = ProcessInfo.processInfo.environment["TASKER_SSH_CONFIG"], !env.isEmpty {
            configured = true
            configFile = resolve(env)
            envProblem = configFile == nil ? "TASKER_SSH_CONFIG names no regular file ('\(env)')" : nil
        }
        return envProblem
    }

    private var envProblem: String?

    /// A path as one word of ssh_config (quoted when it has blanks).
    private static func configWord(_ path: String) -> String {
        path.contains(where: { $0 == " " || $0 == "\t" }) ? "\"\(path)\"" : path
    }

    /// The run's 0700 directory, short (a socket's path must fit in 108
    /// bytes, and %C is 40 of them), so under /tmp whatever TMPDIR says.
    private func runDirectory() throws(SSHSetupError) -> String {
        if let dir { return dir }
        var template = Array("/tmp/tasker-ssh-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw SSHSetupError(message: "cannot make a directory for ssh's sockets: \(String(cString: strerror(errno)))")
        }
        let made = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        dir = made
        return made
    }

    // MARK: masters

    /// Calls `then` once `dest` has a master connection (nil) or with why
    /// it could not get one. The first caller opens it (`ssh -f -N`: its
    /// foreground part exits once logged in, or with ssh's reason); callers
    /// meanwhile wait for that outcome instead of racing to connect.
    func withMaster(_ target: RemoteTarget, loop: EventLoop, groups: ProcessGroups,
                    then: @escaping (SSHFailure?) -> Void) {
        let dest = target.destination
        switch masters[dest] {
        case .open?:
            then(nil)
            return
        case .opening(let waiting)?:
            masters[dest] = .opening(waiting + [then])
            return
        case nil:
            guard makeRoom(loop: loop, groups: groups) else {
                waitingForRoom.append((target, loop, groups, then))
                return
            }
            masters[dest] = .opening([then])
        }
        let argv: [String]
        do { argv = try options(acceptNew: target.acceptNewHostKeys) + ["-f", "-N"] + dest.arguments } catch {
            opened(dest, SSHFailure(code: .connect, host: target.name, detail: error.message))
            return
        }
        let me = LoopBound(self, loop: loop)
        do {
            try SSHRun.start(argv, groups: groups, loop: loop) { finished in
                me.loop.execute {
                    let failure = finished.code == 0 ? nil
                        : SSHFailure.classify(stderr: finished.stderr, host: target.name)
                          ?? SSHFailure(code: .connect, host: target.name, detail: SSHRun.lastLine(finished.stderr) ?? "ssh exited with \(finished.code)")
                    me.value.opened(dest, failure)
                }
            }
        } catch {
            opened(dest, SSHFailure(code: .connect, host: target.name, detail: "cannot start ssh: \(error.message)"))
        }
    }

    private func opened(_ dest: SSHDestination, _ failure: SSHFailure?) {
        guard case .opening(let waiting)? = masters[dest] else { return }
        masters[dest] = failure == nil ? .open : nil
        for w in waiting { w(failure) }
        if failure != nil { admitWaiting() }
    }

    // MARK: the cap on masters

    /// Masters open at once (`tasker.configure{ssh_connections=}`).
    private(set) var maxMasters = 64
    /// Commands to a new host while every master is busy, in arrival order.
    private var waitingForRoom: [(RemoteTarget, EventLoop, ProcessGroups, (SSHFailure?) -> Void)] = []

    /// Whether another master may open: under the cap, or once an idle
    /// one (no command running through it) is closed to make room.
    private func makeRoom(loop: EventLoop, groups: ProcessGroups) -> Bool {
        guard masters.count >= maxMasters else { return true }
        guard let idle = masters.first(where: { if case .open = $0.value { sessions[$0.key] == nil } else { false } })?.key else {
            return false
        }
        close(idle, groups: groups, loop: loop)
        return true
    }

    /// `ssh -O exit` for `dest`'s master, in the background; it counts as
    /// gone at once.
    private func close(_ dest: SSHDestination, groups: ProcessGroups, loop: EventLoop) {
        masters[dest] = nil
        guard let argv = try? options(acceptNew: false) + ["-O", "exit"] + dest.arguments else { return }
        _ = try? SSHRun.start(argv, groups: groups, loop: loop) { _ in }
    }

    /// A master went idle or away: the first command waiting for room goes.
    private func admitWaiting() {
        guard !waitingForRoom.isEmpty else { return }
        let (target, loop, groups, then) = waitingForRoom[0]
        guard masters[target.destination] != nil || masters.count < maxMasters
                || masters.contains(where: { if case .open = $0.value { sessions[$0.key] == nil } else { false } }) else { return }
        waitingForRoom.removeFirst()
        withMaster(target, loop: loop, groups: groups, then: then)
        admitWaiting()
    }

    /// Commands at once over one master: sshd's default `MaxSessions`;
    /// past it a session is refused and ssh would open a connection of its
    /// own (and say so on the command's stderr).
    static let sessionsPerMaster = 10
    private var sessions: [SSHDestination: (active: Int, waiting: [() -> Void])] = [:]

    /// Calls `start` once a session of `dest`'s master is free; whoever is
    /// started holds it until `releaseSession` (also if it does not run).
    func takeSession(_ dest: SSHDestination, _ start: @escaping () -> Void) {
        var entry = sessions[dest] ?? (0, [])
        if entry.active < Self.sessionsPerMaster {
            entry.active += 1
            sessions[dest] = entry
            start()
        } else {
            entry.waiting.append(start)
            sessions[dest] = entry
        }
    }

    func releaseSession(_ dest: SSHDestination) {
        guard var entry = sessions[dest] else { return }
        if entry.waiting.isEmpty {
            entry.active -= 1
            sessions[dest] = entry.active == 0 ? nil : entry
            if entry.active == 0 { admitWaiting() }
        } else {
            let next = entry.waiting.removeFirst()
            sessions[dest] = entry
            next()
        }
    }

    /// The master of `dest` is gone (a command saw the connection drop):
    /// the next command opens a new one.
    func masterLost(_ dest: SSHDestination) {
        if case .open? = masters[dest] { masters[dest] = nil }
        admitWaiting()
    }

    /// Whether `dest`'s master still answers (`ssh -O check`), on the loop.
    func checkMaster(_ dest: SSHDestination, loop: EventLoop, groups: ProcessGroups, then: @escaping (Bool) -> Void) {
        guard let argv = try? options(acceptNew: false) + ["-O", "check"] + dest.arguments else { return then(false) }
        let me = LoopBound(then, loop: loop)
        do {
            try SSHRun.start(argv, groups: groups, loop: loop) { finished in me.loop.execute { me.value(finished.code == 0) } }
        } catch {
            then(false)
        }
    }

    /// What `runEnded` does, as one shell line, for ProcessGroups to run
    /// should tasker exit at a second signal (no run end then): without it
    /// the masters stayed ControlPersist's 60 s and the directory for good.
    private func publishExitCleanup() {
        guard let processGroups else { return }
        guard let dir else { return processGroups.setSSHCleanup(nil) }
        // masters exist only once `options` made the config: no file is made here
        let exits = generatedConfig == nil ? [] : masters.keys.compactMap { dest in
            (try? options(acceptNew: false)).map { ($0 + ["-O", "exit"] + dest.arguments).map(RemoteCommand.quote).joined(separator: " ") }
        }
        processGroups.setSSHCleanup((exits.map { $0 + " >/dev/null 2>&1" } + ["rm -rf " + RemoteCommand.quote(dir)]).joined(separator: "; "))
    }

    /// Closes every master (`ssh -O exit`, waited for briefly) and removes
    /// the directory.
    func runEnded() {
        // At a second signal the stops still to be sent go through the
        // masters: the exit's own cleanup closes them once those are done.
        if processGroups?.isExiting == true { return }
        for dest in masters.keys {
            guard let argv = try? options(acceptNew: false) + ["-O", "exit"] + dest.arguments else { continue }
            SSHRun.runBriefly(argv)
        }
        masters = [:]
        if let dir { try? FileManager.default.removeItem(atPath: dir) }
        dir = nil
        generatedConfig = nil
    }
}

struct SSHSetupError: Error {
    let message: String
}
