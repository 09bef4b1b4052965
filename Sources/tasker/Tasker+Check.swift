import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua

extension Tasker {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Compile pipelines without running them; print file:line: message per error, and warnings for fields tasker's modules do not have."
        )

        @Argument(help: "The files to check.")
        var files: [String]

        func run() throws {
            var failed = false
            var fields: [String: Set<String>]?
            for file in files {
                if let error = PipelineRunner.check(path: file) {
                    print(TerminalText.escape(error))
                    failed = true
                    continue
                }
                // Compiles: warnings about fields tasker's modules do not have.
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                if fields == nil { fields = UnknownFields.moduleFields() }
                for f in UnknownFields.scan(String(decoding: data, as: UTF8.self), modules: fields!) {
                    let hint = f.suggestion.map { " (did you mean \(f.module).\($0)?)" } ?? ""
                    print(TerminalText.escape("\(file):\(f.line): warning: \(f.module).\(f.field) is not a field of \(f.module)\(hint)"))
                }
            }
            if failed { throw ExitCode(2) }
        }
    }
}
