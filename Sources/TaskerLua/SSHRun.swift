import Foundation
import TaskerCore

/// The ssh processes tasker runs for itself (opening a master, checking or
/// closing one, stopping a remote command): spawned like `exec`'s children
/// and reaped by the process reactor, the loop kept busy meanwhile.
enum SSHRun {
    /// Starts `argv` (stdin /dev/null unless given, output captured unless
    /// stdout is given a descriptor) and returns its pid; `done` comes on
    /// the reactor's thread.
    @discardableResult
    static func start(_ argv: [String], stdin: ProcessSpawner.Stream = .null, stdout: ProcessSpawner.Stream = .pipe,
                      groups: ProcessGroups, loop: EventLoop,
                      done: @escaping @Sendable (ProcessReactor.Finished) -> Void) throws(ProcessSpawner.SpawnError) -> pid_t {
        let child = try groups.spawning { () throws(ProcessSpawner.SpawnError) in
            try ProcessSpawner.spawn(argv: argv, env: ProcessSpawner.environment([:]), cwd: nil,
                                     stdin: stdin, stdout: stdout, stderr: .pipe)
        }
        groups.started(child.pid)
        loop.beginActivity()
        ProcessReactor.shared.add(child) { finished in
            groups.leaderExited(child.pid)
            done(finished)
            loop.execute { loop.endActivity() }
        }
        return child.pid
    }

    /// Runs `argv` with no output and waits for it, at most 2 s (then it is
    /// killed): for `ssh -O exit` as the run ends, when the loop no longer
    /// turns.
    static func runBriefly(_ argv: [String]) {
        guard let child = try? ProcessSpawner.spawn(argv: argv, env: ProcessSpawner.environment([:]), cwd: nil,
                                                    stdin: .null, stdout: .null, stderr: .null) else { return }
        if child.pidfd >= 0 { close(child.pidfd) }
        var status: Int32 = 0
        for _ in 0..<200 {
            if waitpid(child.pid, &status, WNOHANG) != 0 { return }
            usleep(10_000)
        }
        kill(child.pid, SIGKILL)
        _ = waitpid(child.pid, &status, 0)
    }

    /// The last non-blank line of `bytes`, for a message.
    static func lastLine(_ bytes: [UInt8]) -> String? {
        String(decoding: bytes.suffix(2048), as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.last { !$0.isEmpty }
    }
}
