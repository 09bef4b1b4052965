import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua

extension Tasker {
    /// `tasker list FILE [--json]`: what the pipeline accepts (as `tasker
    /// run FILE --help` shows it), its tasks not run.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Show a pipeline's description, parameters and targets without running it."
        )

        @Argument(help: "The pipeline file.", completion: .file(extensions: ["lua"]))
        var file: String

        @Flag(name: .long, help: "One JSON object.")
        var json = false

        func run() throws {
            if let why = PipelineRunner.unreadable(path: file) {
                StandardError.write("tasker: error: \(why)\n")
                throw ExitCode(2)
            }
            if let error = PipelineRunner.check(path: file) {
                StandardError.write("tasker: error: \(TerminalText.escape(error))\n")
                throw ExitCode(2)
            }
            let d = PipelineDescription.of(file, args: [], vars: [:])
            print(json ? SecretMask.shared.maskJSON(d.json) : SecretMask.shared.mask(d.text), terminator: "")
        }
    }
}
