import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Every program the CLI tests start is a `Child`: posix_spawn, not
// Foundation's Process, which on Linux has three traps for a test process
// that starts many children at once:
//
// - It learns of a child's exit from a socketpair whose child end is not
//   close-on-exec. A child started on another thread in the same instant
//   inherited that end, and while it lived the first child never read as
//   exited: `waitUntilExit` spun forever.
// - The child inherits the signal mask of the thread that starts it, and
//   Swift's concurrency threads block nearly every signal: a child that
//   does not unblock them (a Python server, `sleep`) ignored SIGTERM.
// - To close the descriptors a child should not inherit, it lists
//   /proc/self/fd and copies each entry's whole 256-byte name field: an
//   entry at the end of the directory buffer made it read past the buffer,
//   and the test process died of a segmentation fault (seen under load).
//
// Here the child gets no descriptor but 0-2 (closefrom in the child), an
// empty signal mask and default handlers, a process group of its own (as
// Process gave), and /dev/null for a stream not given; it is reaped here.

/// A program a test started (see above).
final class Child: Sendable {
    let processIdentifier: pid_t
    /// The pipes given, held while the child is: a pipe whose read end
    /// went with its last reader would kill the child at its next write
    /// (as Process holds its standardOutput).
    private let pipes: [Pipe]
    /// Its exit code, or the signal that ended it, once reaped.
    private let reaped = Mutex<Int32?>(nil)

    struct SpawnError: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts `executable` with `arguments` in `directory`. `environment`
    /// nil: this process's. A pipe given for stdout or stderr gets the
    /// child's, and its write end is closed here once the child has it.
    init(_ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String]? = nil,
         stdout: Pipe? = nil, stderr: Pipe? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for (fd, pipe) in [(Int32(1), stdout), (2, stderr)] {
            if let pipe {
                posix_spawn_file_actions_adddup2(&actions, pipe.fileHandleForWriting.fileDescriptor, fd)
            } else {
                posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            }
        }
        _ = Self.closeFrom(&actions, 3)
        if let directory { _ = Self.changeDirectory(&actions, directory.path) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigemptyset(&all)
        for sig in Int32(1)..<32 where sig != SIGKILL && sig != SIGSTOP { sigaddset(&all, sig) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        for pipe in [stdout, stderr].compactMap({ $0 }) { try? pipe.fileHandleForWriting.close() }
        guard status == 0 else {
            throw SpawnError(description: "cannot start \(executable.path): \(String(cString: strerror(status)))")
        }
        processIdentifier = pid
        pipes = [stdout, stderr].compactMap { $0 }
    }

    // glibc's posix_spawn_file_actions_addclosefrom_np and _addchdir_np
    // (2.34, 2.29), which its headers declare only for _GNU_SOURCE: looked
    // up by name. Missing, the test process cannot start children at all.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private static let closeFrom = unsafeBitCast(dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")!, to: CloseFrom.self)
    private static let changeDirectory = unsafeBitCast(dlsym(nil, "posix_spawn_file_actions_addchdir_np")!, to: ChangeDirectory.self)

    /// Its exit code, or the signal that ended it; nil while it runs.
    var exitStatus: Int32? {
        reaped.withLock { known in
            if let known { return known }
            var status: Int32 = 0
            guard waitpid(processIdentifier, &status, WNOHANG) == processIdentifier else { return nil }
            known = status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
            return known
        }
    }
}

/// How long any program a test starts may run: far beyond what the
/// slowest needs on a loaded machine, far below CI's budget.
let exitLimit = 300.0

/// Added to stderr when a child was killed at `exitLimit`.
let killedAtTheLimit = "\n[test harness: killed after \(Int(exitLimit)) s]"

/// Waits for `p` to exit, at most `seconds`; then kills it (SIGKILL).
/// Returns its status and whether it had to be killed: a child that hangs
/// fails its test instead of hanging the suite.
@discardableResult
func waitForExit(_ p: Child, seconds: Double = exitLimit) -> (status: Int32, killed: Bool) {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if let status = p.exitStatus { return (status, false) }
        usleep(10_000)
    }
    kill(p.processIdentifier, SIGKILL)
    while true {
        if let status = p.exitStatus { return (status, true) }
        usleep(10_000)
    }
}
