import ArgumentParser
import Foundation
import TaskerCore
import TaskerJournal
import TaskerLua

/// `tasker show RUN --task NAME [--output]` and `tasker show RUN --output`:
/// one task's record in full, or what tasks' processes wrote. Names and
/// output come from the script and its commands: written escaped, lines
/// kept, so none can drive the terminal.
enum ShowTask {
    static func print(run r: JournalRun, task: String?, output: Bool, reader: JournalReader) throws {
        let all = try reader.tasks(of: r.id)
        let chosen: [JournalTask]
        if let task {
            chosen = all.filter { $0.name == task || String($0.id) == task }
            guard !chosen.isEmpty else {
                StandardError.write("tasker: error: run \(r.id) has no task named '\(TerminalText.escape(task))'\n")
                throw ExitCode(1)
            }
        } else {
            chosen = all.filter { $0.state == "failed" }
        }
        let outputs = output ? try outputsByTask(r.id, reader) : [:]
        var out = StdoutChunks()
        do {
            for (i, t) in chosen.enumerated() {
                if i > 0 { try out.line("") }
                if output {
                    try out.line("== task \(t.id) \(TerminalText.escape(t.name)) (\(t.state))")
                    if let text = outputs[t.id] {
                        try out.write(TerminalText.escape(text, keepNewlines: true) + (text.hasSuffix("\n") ? "" : "\n"))
                    } else {
                        try out.line("(no output recorded: the task ran no process, or the run had --no-journal)")
                    }
                } else {
                    try details(t, &out)
                }
            }
            if chosen.isEmpty { try out.line("run \(r.id) has no failed task") }
            try out.flush()
        } catch let e as StdoutError {
            StandardError.write("tasker: error: \(e)\n")
            throw ExitCode(1)
        }
    }

    private static func outputsByTask(_ run: String, _ reader: JournalReader) throws -> [Int: String] {
        var outputs: [Int: String] = [:]
        for m in try reader.marks(of: run) where m.kind == .output || m.kind == .failedOutput {
            outputs[m.task] = m.detail
        }
        return outputs
    }

    private static func details(_ t: JournalTask, _ out: inout StdoutChunks) throws {
        let state = t.reused ? "reused" : (t.errorKind == "lost" ? "lost" : t.state)
        try out.line("task \(t.id) \(TerminalText.escape(t.name))")
        try out.line("  state     \(state)")
        try out.line("  attempts  \(t.attempts)")
        try out.line("  duration  \(t.duration.map(History.seconds) ?? "-")")
        if t.held > 0 { try out.line("  held      \(History.seconds(t.held))") }
        if !t.after.isEmpty { try out.line("  after     " + t.after.map(String.init).joined(separator: ", ")) }
        if !t.tags.isEmpty { try out.line("  tags      " + t.tags.map { TerminalText.escape($0) }.joined(separator: ", ")) }
        if let identity = t.identity { try out.line("  identity  \(identity)") }
        if let error = t.error {
            try out.line("  error     " + TerminalText.escape(error, keepNewlines: true)
                .split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n            "))
        }
    }
}
