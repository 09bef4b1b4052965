import ArgumentParser
import Foundation
import TaskerLua

@main
struct Tasker: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "tasker",
        abstract: "Run task pipelines written in Lua 5.4.",
        discussion: """
            Exit codes: 0 all tasks succeeded or were skipped (or were cancelled by the script), 1 a task failed,
            2 usage error, the script failed to load or raised, or output could not be written,
            130 interrupted (SIGINT), 143 terminated (SIGTERM), 129 hung up (SIGHUP).
            """,
        version: "tasker \(version) (Lua 5.4)",
        subcommands: [Run.self, Worker.self, Check.self, List.self, Runs.self, Show.self, Report.self]
    )

    /// Like ParsableCommand's, except that usage errors exit 2 (README, The command line),
    /// not the parser's 64.
    static func main() {
        MemoryTuning.apply()
        StandardStreams.prepare()
        // Pause and resume (SIGUSR1/2) mean nothing until a run handles
        // them; their default action would kill tasker meanwhile (at its
        // start, while a resume reads the journal, in a worker).
        signal(SIGUSR1, SIG_IGN)
        signal(SIGUSR2, SIG_IGN)
        do {
            var command = try parseAsRoot()
            if command is Tasker {
                // No subcommand: help, as a usage error.
                StandardError.write((helpMessage() + "\n"))
                Foundation.exit(2)
            }
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                StandardError.write((fullMessage(for: error) + "\n"))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
