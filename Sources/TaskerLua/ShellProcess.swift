import Foundation
import Subprocess
import TaskerCore
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// How a shell command ended, as Lua's `os.execute` and `pclose` report it.
enum ShellStatus: Sendable {
    case exited(Int32)
    case signaled(Int32)
    case failed(String)
}

/// `/bin/sh -c command` for `os.execute` and `io.popen`: its own process
/// group (so a cancel reaches the shell's children), stdin and stdout
/// either tasker's own or the given pipe ends, stderr tasker's. Runs in a
/// Swift task; `cancel()` sends SIGTERM to the group, then SIGKILL after 2 s.
final class ShellProcess: Sendable {
    private let task: Task<Void, Never>

    /// `stdin`/`stdout`: a pipe end the child gets (closed here after the
    /// spawn), or nil for tasker's own. `done` runs once, on any thread.
    init(command: String, stdin: Int32?, stdout: Int32?, groups: ProcessGroups,
         done: @escaping @Sendable (ShellStatus) -> Void) {
        task = Task {
            done(await ShellProcess.run(command, stdin: stdin, stdout: stdout, groups: groups))
        }
    }

    func cancel() { task.cancel() }

    private static func run(_ command: String, stdin: Int32?, stdout: Int32?, groups: ProcessGroups) async -> ShellStatus {
        var platform = PlatformOptions()
        platform.processGroupID = 0
        platform.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: .seconds(2))]
        let configuration = Configuration(executable: .path(FilePath("/bin/sh")), arguments: Arguments(["-c", command]),
                                          environment: .inherit, platformOptions: platform)
        // tasker's own stdin/stdout/stderr go to the child as duplicates that
        // the library may close and register as it likes: handing it fd 1
        // itself broke later pipes when fd 1 was a pipe.
        let input: FileDescriptorInput = .fileDescriptor(FileDescriptor(rawValue: stdin ?? dup(0)), closeAfterSpawningProcess: true)
        let output: FileDescriptorOutput = .fileDescriptor(FileDescriptor(rawValue: stdout ?? dup(1)), closeAfterSpawningProcess: true)
        let errors: FileDescriptorOutput = .fileDescriptor(FileDescriptor(rawValue: dup(2)), closeAfterSpawningProcess: true)
        var leader: pid_t = 0
        groups.willSpawn()
        defer { if leader != 0 { groups.leaderExited(leader) } }
        do {
            let result = try await Subprocess.run(configuration, input: input, output: output, error: errors) { execution in
                leader = execution.processIdentifier.value
                groups.started(leader)
            }
            switch result.terminationStatus {
            case .exited(let c): return .exited(Int32(c))
            case .signaled(let s): return .signaled(Int32(s))
            }
        } catch is CancellationError {
            return .signaled(SIGTERM)
        } catch {
            return .failed("\(error)")
        }
    }
}
