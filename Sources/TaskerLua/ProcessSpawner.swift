import CLuaShim
import Foundation
import Synchronization

/// Starts a child with posix_spawn (vfork-speed on Linux): in its own process
/// group, signals back to their defaults and none blocked, descriptors above
/// 2 closed, stdout and stderr into pipes, stdin from a given descriptor or
/// /dev/null. The program is found on PATH once and remembered, so a run of
/// thousands of `exec{"true"}` does not probe every PATH entry each time.
enum ProcessSpawner {
    struct Child {
        let pid: pid_t
        /// Readable when the child exits (-1 where pidfds are missing).
        let pidfd: Int32
        let stdout: Int32
        let stderr: Int32
    }

    struct SpawnError: Error {
        let message: String
    }

    private static let resolved = Mutex([String: String]())

    /// The path of `program`: as given when it has a slash, else the first
    /// executable match on PATH (remembered per PATH).
    static func resolve(_ program: String, path: String?) -> String? {
        if program.contains("/") { return program }
        let searchPath = path ?? "/usr/local/bin:/usr/bin:/bin"
        let key = searchPath + "\u{0}" + program
        if let known = resolved.withLock({ $0[key] }) { return known }
        for dir in searchPath.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (dir.isEmpty ? "." : String(dir)) + "/" + program
            var st = stat()
            if access(candidate, X_OK) == 0, stat(candidate, &st) == 0, st.st_mode & S_IFMT != S_IFDIR {
                resolved.withLock { $0[key] = candidate }
                return candidate
            }
        }
        return nil
    }

    /// tasker's environment, read once (nothing in a run changes it).
    private static let inherited = ProcessInfo.processInfo.environment
    private static let inheritedList = inherited.map { "\($0.key)=\($0.value)" }

    /// The environment: tasker's own with `updates` applied.
    static func environment(_ updates: [String: String]) -> [String] {
        guard !updates.isEmpty else { return inheritedList }
        var env = inherited
        for (k, v) in updates { env[k] = v }
        return env.map { "\($0.key)=\($0.value)" }
    }

    static func spawn(argv: [String], env: [String], cwd: String?, stdin: Int32?) throws(SpawnError) -> Child {
        let pathValue = env.first { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) }
        guard let program = resolve(argv[0], path: pathValue) else {
            throw SpawnError(message: "no such program on PATH")
        }
        var out: [Int32] = [-1, -1], err: [Int32] = [-1, -1]
        guard pipe(&out) == 0 else { throw SpawnError(message: "cannot make a pipe: \(String(cString: strerror(errno)))") }
        guard pipe(&err) == 0 else {
            close(out[0]); close(out[1])
            throw SpawnError(message: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        // Not inherited by other children (the child's own ends are dup2'ed).
        for fd in out + err { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer {
            close(out[1])
            close(err[1])
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out[1], 1)
        posix_spawn_file_actions_adddup2(&actions, err[1], 2)
        // Descriptors a script opened (io.open) must not leak into children.
        tasker_spawn_closefrom(&actions, 3)
        if let cwd { tasker_spawn_chdir(&actions, cwd) }

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var pid: pid_t = 0
        let rc = withCStrings(argv) { cargv in
            withCStrings(env) { cenv in
                posix_spawn(&pid, program, &actions, &attr, cargv, cenv)
            }
        }
        guard rc == 0 else {
            close(out[0]); close(err[0])
            throw SpawnError(message: String(cString: strerror(rc)))
        }
        return Child(pid: pid, pidfd: tasker_pidfd_open(pid), stdout: out[0], stderr: err[0])
    }

    /// A NULL-terminated array of C strings, valid inside `body`.
    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
