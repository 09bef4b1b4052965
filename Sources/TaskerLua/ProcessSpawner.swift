import CLuaShim
import Foundation
import Synchronization

/// Starts a child with posix_spawn (vfork-speed on Linux): in its own process
/// group, signals back to their defaults and none blocked, descriptors above
/// 2 closed. `exec` gives it stdout and stderr into pipes and stdin from a
/// given descriptor or /dev/null; `os.execute` leaves it tasker's own three;
/// `io.popen` pipes one of them. The program is found on PATH once and
/// remembered, so a run of thousands of `exec{"true"}` does not probe every
/// PATH entry each time. Every failure (out of descriptors or processes)
/// is a `SpawnError` with the system's reason.
enum ProcessSpawner {
    struct Child {
        let pid: pid_t
        /// Readable when the child exits (-1 where pidfds are missing).
        let pidfd: Int32
        /// tasker's ends of the pipes (-1 where the child has no pipe).
        var stdin: Int32 = -1
        let stdout: Int32
        let stderr: Int32
    }

    /// What one of the child's standard descriptors is.
    enum Stream: Equatable {
        /// tasker's own.
        case inherit
        /// A pipe whose other end tasker gets (in `Child`).
        case pipe
        /// This descriptor (stdin only), e.g. an unlinked temp file.
        case fd(Int32)
        /// /dev/null (stdin only).
        case null
    }

    struct SpawnError: Error {
        let message: String
        /// The program is not there or cannot be run: another try fails too.
        var permanent = false
    }

    private static let resolved = Mutex([[UInt8]: [UInt8]]())

    /// The path of `program`: as given when it has a slash, else the first
    /// executable match on PATH (remembered per PATH and working directory,
    /// and looked at again when what was remembered is gone). Bytes: a name
    /// or a directory on PATH need not be UTF-8. A relative directory on
    /// PATH (an empty one is `.`) is the child's: under `cwd` when given, as
    /// the program is started after the child's chdir.
    static func resolve(_ program: [UInt8], path: [UInt8]?, cwd: String? = nil) -> [UInt8]? {
        if program.contains(0x2F) { return program }
        let searchPath = path ?? Array("/usr/local/bin:/usr/bin:/bin".utf8)
        let base: [UInt8]? = cwd.map { Array($0.utf8) + [0x2F] }
        let key = searchPath + [0] + program + [0] + (base ?? [])
        func runnable(_ candidate: [UInt8]) -> Bool {
            let seen = candidate.first == 0x2F ? candidate : (base ?? []) + candidate
            var st = stat()
            return Files.withCPath(seen) { access($0, X_OK) == 0 && stat($0, &st) == 0 } && st.st_mode & S_IFMT != S_IFDIR
        }
        if let known = resolved.withLock({ $0[key] }), runnable(known) { return known }
        for dir in searchPath.split(separator: 0x3A, omittingEmptySubsequences: false) {
            let candidate = (dir.isEmpty ? [0x2E] : Array(dir)) + [0x2F] + program
            if runnable(candidate) {
                resolved.withLock { $0[key] = candidate }
                return candidate
            }
        }
        return nil
    }

    /// tasker's environment as the process got it, read once (nothing in a
    /// run changes it): bytes, as a value or a name need not be UTF-8 (read
    /// as text, each bad byte became U+FFFD in every child's copy).
    private static let inheritedList: [[UInt8]] = {
        var out: [[UInt8]] = []
        var p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ
        while let entry = p.pointee {
            out.append(Array(UnsafeRawBufferPointer(start: entry, count: strlen(entry))))
            p += 1
        }
        return out
    }()

    /// The environment: tasker's own with `updates` applied.
    static func environment(_ updates: [String: String]) -> [[UInt8]] {
        guard !updates.isEmpty else { return inheritedList }
        let names = Set(updates.keys.map { Array($0.utf8) })
        var env = inheritedList.filter { !names.contains(Array($0.prefix { $0 != 0x3D })) }
        for (k, v) in updates { env.append(Array("\(k)=\(v)".utf8)) }
        return env
    }

    /// `exec`'s child: stdout and stderr into pipes, stdin from `stdin` or /dev/null.
    static func spawn(argv: [String], env: [[UInt8]], cwd: String?, stdin: Int32?) throws(SpawnError) -> Child {
        try spawn(arguments: argv.map { Array($0.utf8) }, env: env, cwd: cwd, stdin: stdin.map { .fd($0) } ?? .null,
                  stdout: .pipe, stderr: .pipe)
    }

    static func spawn(argv: [String], env: [[UInt8]], cwd: String?,
                      stdin: Stream, stdout: Stream, stderr: Stream) throws(SpawnError) -> Child {
        try spawn(arguments: argv.map { Array($0.utf8) }, env: env, cwd: cwd, stdin: stdin, stdout: stdout, stderr: stderr)
    }

    /// `arguments` as bytes, handed to the program as they are (a script's
    /// strings need not be UTF-8: a file name in Latin-1 stays that name).
    static func spawn(arguments argv: [[UInt8]], env: [[UInt8]], cwd: String?,
                      stdin: Stream, stdout: Stream, stderr: Stream) throws(SpawnError) -> Child {
        let pathValue = env.first { $0.starts(with: Array("PATH=".utf8)) }.map { Array($0.dropFirst(5)) }
        guard let program = resolve(argv[0], path: pathValue, cwd: cwd) else {
            throw SpawnError(message: "no such program on PATH", permanent: true)
        }
        // pipes[k]: (child's end, tasker's end) for standard descriptor k.
        var pipes: [(child: Int32, mine: Int32)?] = [nil, nil, nil]
        func closeAll(mine: Bool) {
            for p in pipes.compactMap({ $0 }) {
                close(p.child)
                if mine { close(p.mine) }
            }
        }
        for (k, stream) in [stdin, stdout, stderr].enumerated() where stream == .pipe {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else {
                let reason = String(cString: strerror(errno))
                closeAll(mine: true)
                throw SpawnError(message: "cannot make a pipe: \(reason)")
            }
            // Not inherited by other children (the child's own end is dup2'ed).
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            pipes[k] = k == 0 ? (ends[0], ends[1]) : (ends[1], ends[0])
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (k, stream) in [stdin, stdout, stderr].enumerated() {
            switch stream {
            case .inherit: break
            case .pipe: posix_spawn_file_actions_adddup2(&actions, pipes[k]!.child, Int32(k))
            case .fd(let fd): posix_spawn_file_actions_adddup2(&actions, fd, Int32(k))
            case .null: posix_spawn_file_actions_addopen(&actions, Int32(k), "/dev/null", k == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
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
        var rc: Int32 = 0
        // ETXTBSY: a program just written (fs.write, then exec) is still
        // open for writing in a child another thread is starting at that
        // moment, until that child execs; a few tries a millisecond or two
        // apart outlast it
        for attempt in 0..<4 {
            rc = withCStrings(argv) { cargv in
                withCStrings(env) { cenv in
                    Files.withCPath(program) { posix_spawn(&pid, $0, &actions, &attr, cargv, cenv) }
                }
            }
            guard rc == ETXTBSY, attempt < 3 else { break }
            usleep(useconds_t(1000 << attempt))
        }
        guard rc == 0 else {
            closeAll(mine: true)
            var reason = String(cString: strerror(rc))
            // The child's chdir fails with the same codes as the program:
            // say which it was.
            if let cwd, rc == ENOENT || rc == EACCES || rc == ENOTDIR, chdirFails(cwd) { reason = "cwd '\(cwd)': \(reason)" }
            throw SpawnError(message: reason, permanent: rc == ENOENT || rc == EACCES || rc == ENOEXEC || rc == ENOTDIR)
        }
        closeAll(mine: false)
        return Child(pid: pid, pidfd: tasker_pidfd_open(pid), stdin: pipes[0]?.mine ?? -1,
                     stdout: pipes[1]?.mine ?? -1, stderr: pipes[2]?.mine ?? -1)
    }

    /// Whether `dir` is not a directory this process could enter.
    private static func chdirFails(_ dir: String) -> Bool {
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return true }
        return access(dir, X_OK) != 0
    }

    /// A NULL-terminated array of C strings, valid inside `body`.
    private static func withCStrings<R>(_ strings: [[UInt8]], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { bytes in
            let p = malloc(bytes.count + 1)!.assumingMemoryBound(to: CChar.self)  // freed below
            bytes.withUnsafeBytes { raw in
                if let base = raw.baseAddress { UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: raw.count) }
            }
            p[bytes.count] = 0
            return p
        }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
