import Foundation
import TaskerCore

/// How a shell command ended, as Lua's `os.execute` and `pclose` report it.
enum ShellStatus: Sendable {
    case exited(Int32)
    case signaled(Int32)

    /// From a waitpid(2) status (WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out).
    init(waitStatus s: Int32) {
        self = (s & 0x7f) == 0 ? .exited((s >> 8) & 0xff) : .signaled(s & 0x7f)
    }
}

/// `/bin/sh -c command` for `os.execute` and `io.popen`, started the way
/// `exec` starts its children (`ProcessSpawner`: its own process group, so a
/// cancel reaches the shell's children) and watched by the same
/// `ProcessReactor`. stdin and stdout are tasker's own or a pipe (`pipe`
/// holds tasker's end), stderr tasker's. Loop-confined; the loop is busy
/// while the command runs. `cancel()` sends SIGTERM to the group, then
/// SIGKILL 2 s later if it is still there.
final class ShellProcess {
    let pid: pid_t
    /// tasker's end of the pipe (`io.popen`), or -1.
    let pipe: Int32
    private(set) var exited = false
    private let loop: EventLoop
    private var killTimer: LoopTimer?

    /// Starts the command; `done` runs once, on the loop, when it has
    /// exited. Throws when it cannot start (out of descriptors or processes).
    init(command: [UInt8], stdin: ProcessSpawner.Stream = .inherit, stdout: ProcessSpawner.Stream = .inherit,
         runtime: LuaRuntime, done: @escaping (ShellStatus) -> Void) throws(ProcessSpawner.SpawnError) {
        let groups = runtime.processGroups
        fflush(nil)  // what Lua printed so far comes before the command's output
        let child = try groups.spawning { () throws(ProcessSpawner.SpawnError) in
            try ProcessSpawner.spawn(arguments: [Array("/bin/sh".utf8), Array("-c".utf8), command], env: ProcessSpawner.environment([:]),
                                     cwd: nil, stdin: stdin, stdout: stdout, stderr: .inherit)
        }
        pid = child.pid
        pipe = stdin == .pipe ? child.stdin : child.stdout
        loop = runtime.loop
        groups.started(child.pid)
        loop.beginActivity()
        let me = LoopBound(self, loop: loop)
        let done = LoopBound(done, loop: loop)
        // The reactor reaps it; the pipe, if any, is the popen file's.
        let watched = ProcessSpawner.Child(pid: child.pid, pidfd: child.pidfd, stdout: -1, stderr: -1)
        ProcessReactor.shared.add(watched) { finished in
            me.loop.execute {
                let process = me.value
                process.exited = true
                process.killTimer?.cancel()
                process.killTimer = nil
                process.loop.endActivity()
                groups.leaderExited(child.pid)
                done.value(ShellStatus(waitStatus: finished.status))
            }
        }
    }

    /// SIGTERM to the group (continued, should a pause have stopped it),
    /// SIGKILL 2 s later if the command has not exited by then.
    func cancel() {
        guard !exited, killTimer == nil else { return }
        // The reactor's callback holds this object until the exit, so a
        // process that is gone here has exited.
        killTimer = ProcessStop.terminate(group: pid, on: loop) { [weak self] in self?.exited ?? true }
    }
}
