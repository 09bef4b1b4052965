import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua

extension Tasker {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Compile pipelines without running them; print file:line: message per error."
        )

        @Argument(help: "The files to check.")
        var files: [String]

        func run() throws {
            var failed = false
            for file in files {
                if let error = PipelineRunner.check(path: file) {
                    print(TerminalText.escape(error))
                    failed = true
                }
            }
            if failed { throw ExitCode(2) }
        }
    }
}
