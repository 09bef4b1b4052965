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
/// With `diagnosticsFile`, diagnostics are also appended, as they come, to
/// that file beside it: the pipeline can wait for a line to be logged.
func runLua(_ source: String, name: String = "pipeline.lua", files: [String: String] = [:],
            args: [String] = [], vars: [String: String] = [:], concurrency: Int = 16,
            watch: Bool = false, logLevel: Logger.Level = .info, diagnosticsFile: String? = nil) async throws -> LuaRun {
    // Short: Lua shortens chunk names over 60 characters in messages.
    let dir = URL(fileURLWithPath: "/tmp/tk-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    for (file, text) in files.merging([name: source], uniquingKeysWith: { $1 }) {
        try text.write(to: dir.appendingPathComponent(file), atomically: true, encoding: .utf8)
    }
    // chdir-free: run by absolute path, but report the short name in positions
    let run = await runFile(dir.appendingPathComponent(name).path, args: args, vars: vars,
                            concurrency: concurrency, watch: watch, logLevel: logLevel,
                            diagnosticsFile: diagnosticsFile.map { dir.appendingPathComponent($0).path })
    let prefix = dir.path + "/"
    func clean(_ s: String) -> String { s.replacingOccurrences(of: prefix, with: "") }
    var r = run.result
    r.mainError = r.mainError.map(clean)
    r.failed = r.failed.map { ($0.name, clean($0.message)) }
    return LuaRun(output: clean(run.output), diagnostics: clean(run.diagnostics), result: r)
}

/// Runs a pipeline file as it is, capturing what it prints and logs.
func runFile(_ path: String, args: [String] = [], vars: [String: String] = [:], concurrency: Int = 16,
             watch: Bool = false, logLevel: Logger.Level = .info, diagnosticsFile: String? = nil) async -> LuaRun {
    let out = TextSink()
    let diag = TextSink()
    var options = LuaRuntime.Options()
    options.output = { out.append($0) }
    options.diagnostics = { line in
        diag.append(line + "\n")
        if let diagnosticsFile { appendLine(line, to: diagnosticsFile) }
    }
    options.args = args
    options.vars = vars
    options.concurrency = concurrency
    options.watch = watch
    options.logLevel = logLevel
    let result = await PipelineRunner.run(path: path, options: options)
    return LuaRun(output: out.value, diagnostics: diag.value, result: result)
}

/// Appends `line` and a newline to the file at `path` (made if missing) in
/// one write, so a reader never sees half a line.
private func appendLine(_ line: String, to path: String) {
    let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

enum PipelineCheck {
    static func compiles(_ path: String) -> Bool { PipelineRunner.check(path: path) == nil }
}

/// A new directory under the temporary directory, named `prefix-` and a
/// random part, for a test to work in (and remove when done).
func makeScratchDirectory(_ prefix: String) throws -> String {
    let d = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    return d
}
