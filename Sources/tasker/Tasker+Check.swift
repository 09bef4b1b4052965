import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua

extension Tasker {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Compile pipelines without running them; print file:line: message per error, and warnings for fields tasker's modules do not have and globals nothing sets."
        )

        @Argument(help: "The files to check.", completion: .file(extensions: ["lua"]))
        var files: [String]

        func run() throws {
            var failed = false
            var fields: [String: Set<String>]?
            var globals: Set<String>?
            for file in files {
                if let error = PipelineRunner.check(path: file) {
                    print(TerminalText.escape(error))
                    failed = true
                    continue
                }
                // Compiles: warnings about fields tasker's modules do not have.
                guard let data = FileManager.default.contents(atPath: file).map(LuaRuntime.withoutShebang) else { continue }
                if fields == nil { fields = UnknownFields.moduleFields() }
                for f in UnknownFields.scan(String(decoding: data, as: UTF8.self), modules: fields!) {
                    let hint = f.suggestion.map { " (did you mean \(f.module).\($0)?)" } ?? ""
                    print(TerminalText.escape("\(file):\(f.line): warning: \(f.module).\(f.field) is not a field of \(f.module)\(hint)"))
                }
                if globals == nil { globals = UndefinedGlobals.runtimeGlobals() }
                for g in UndefinedGlobals.scan(String(decoding: data, as: UTF8.self), path: file, known: globals!) {
                    let hint = g.note.map { "; \($0)" } ?? g.suggestion.map { "; did you mean '\($0)'?" } ?? ""
                    print(TerminalText.escape("\(file):\(g.line): warning: '\(g.name)' is read but never set (nil: a global nothing assigns\(hint))"))
                }
            }
            if failed { throw ExitCode(2) }
        }
    }
}
