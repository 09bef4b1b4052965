import ArgumentParser
import Foundation
import TaskerQueue
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

    /// `tasker run …` parsed as `run` alone: the whole tree's parse first
    /// builds and parses the completion-script commands (about 1 ms of a
    /// 9 ms start). Anything but a plain run (help, an unknown option, a
    /// usage error) is left to the whole tree, which says it as always;
    /// `validate` runs once either way (what it prints comes with an
    /// ExitCode, which ends here).
    static func quickRun(_ argv: [String]) throws -> ParsableCommand? {
        guard argv.count > 1, argv[1] == "run" else { return nil }
        // The tree looks for these wherever they are (run alone skips that)
        let treeOnly = ["--generate-completion-script", "--experimental-"]
        if argv.dropFirst(2).contains(where: { word in treeOnly.contains { word.hasPrefix($0) } }) { return nil }
        do {
            let command = try Run.parseAsRoot(Array(argv.dropFirst(2)))
            return command is Run ? command : nil
        } catch {
            // validate said why (misplaced options) and chose the code
            let code = Run.exitCode(for: error)
            if code != .validationFailure && code != .success { throw code }
            return nil
        }
    }

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
        if let problem = ArgumentBytes.problem() {
            StandardError.write("tasker: error: \(problem)\n")
            Foundation.exit(2)
        }
        StoreAhead.start(CommandLine.arguments)
        if let script = CompletionScript.requested(CommandLine.arguments) {
            print(script)
            Foundation.exit(0)
        }
        do {
            let argv = DashedWords.marked(CommandLine.arguments)
            var command = try quickRun(argv) ?? parseAsRoot(Array(argv.dropFirst()))
            if command is Tasker {
                // No subcommand: help, as a usage error.
                StandardError.write((helpMessage() + "\n"))
                Foundation.exit(2)
            }
            try command.run()
        } catch let code as ExitCode {
            // Every run ends so: the parser's own path to it builds its
            // help text first (~0.4 ms of each run's end).
            Foundation.exit(code.rawValue)
        } catch {
            if exitCode(for: error) == .validationFailure {
                StandardError.write((fullMessage(for: error) + "\n"))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
