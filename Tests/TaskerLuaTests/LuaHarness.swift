import Foundation
import Logging
import Synchronization
import TaskerCore
import TaskerLua

/// What a pipeline run printed and ended with.
struct LuaRun: Sendable {
    var output: String
    var diagnostics: String
    var result: RunResult

    var lines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast().map { $0 } }
    var exitCode: Int32 { result.exitCode }
}

final class TextSink: Sendable {
    private let text = Mutex("")
    func append(_ s: String) { text.withLock { $0 += s } }
    var value: String { text.withLock { $0 } }
}

/// Writes `source` to a temporary `name` (and any `files` beside it) and runs it.
func runLua(_ source: String, name: String = "pipeline.lua", files: [String: String] = [:],
            args: [String] = [], vars: [String: String] = [:], concurrency: Int = 16,
            watch: Bool = false, logLevel: Logger.Level = .info) async throws -> LuaRun {
    // Short: Lua shortens chunk names over 60 characters in messages.
    let dir = URL(fileURLWithPath: "/tmp/tk-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    for (file, text) in files.merging([name: source], uniquingKeysWith: { $1 }) {
        try text.write(to: dir.appendingPathComponent(file), atomically: true, encoding: .utf8)
    }
    // chdir-free: run by absolute path, but report the short name in positions
    let run = await runFile(dir.appendingPathComponent(name).path, args: args, vars: vars,
                            concurrency: concurrency, watch: watch, logLevel: logLevel)
    let prefix = dir.path + "/"
    func clean(_ s: String) -> String { s.replacingOccurrences(of: prefix, with: "") }
    var r = run.result
    r.mainError = r.mainError.map(clean)
    r.failed = r.failed.map { ($0.name, clean($0.message)) }
    return LuaRun(output: clean(run.output), diagnostics: clean(run.diagnostics), result: r)
}

/// Runs a pipeline file as it is, capturing what it prints and logs.
func runFile(_ path: String, args: [String] = [], vars: [String: String] = [:], concurrency: Int = 16,
             watch: Bool = false, logLevel: Logger.Level = .info) async -> LuaRun {
    let out = TextSink()
    let diag = TextSink()
    var options = LuaRuntime.Options()
    options.output = { out.append($0) }
    options.diagnostics = { diag.append($0 + "\n") }
    options.args = args
    options.vars = vars
    options.concurrency = concurrency
    options.watch = watch
    options.logLevel = logLevel
    let result = await PipelineRunner.run(path: path, options: options)
    return LuaRun(output: out.value, diagnostics: diag.value, result: result)
}

enum PipelineCheck {
    static func compiles(_ path: String) -> Bool { PipelineRunner.check(path: path) == nil }
}
