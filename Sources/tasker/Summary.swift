import Foundation
import TaskerCore
import TaskerLua

/// The end-of-run report on stderr: counts per final state (groups and
/// schedules apart), wall time, each failed task with its error and each
/// cancelled or skipped task with its reason (the first 20 of each, then a
/// count).
/// Names and messages come from the script: written escaped (see
/// `TerminalText`), so none can fake a line or drive the terminal.
struct Summary {
    let result: RunResult
    /// The journal's id for this run, to point at `tasker show` for the
    /// tasks past the limit (nil without a journal).
    var runID: String?
    /// The slowest tasks, longest first (known when the run was recorded).
    var slowest: [(name: String, seconds: Double)] = []
    /// Those worth a mention, in the text and in the JSON summary alike:
    /// a task of a tenth of a second or more.
    var slowestShown: [(name: String, seconds: Double)] { slowest.filter { $0.seconds >= 0.1 } }
    /// `--log-format json`: the summary is one JSON line too.
    var json = false
    /// Longer messages are cut (a 50 MB error string is not a summary).
    static let messageLimit = 2000
    /// Lines of a failed task's error shown after its first (an exit
    /// error's 20 lines of stderr and its heading fit).
    static let errorLines = 24
    /// Failed, cancelled and skipped tasks listed by name, each; past this, a count.
    static let listLimit = 20

    /// The main chunk's error as printed: the traceback (last, as Lua
    /// writes it) keeps its lines, indented; the message's own line breaks
    /// and other control characters are escaped, so no message can print a
    /// line of its own (a forged summary) or move the cursor.
    static func mainErrorText(_ error: String) -> String {
        let marker = "\nstack traceback:\n"
        guard let r = error.range(of: marker, options: .backwards) else { return TerminalText.escape(error) }
        let message = TerminalText.escape(String(error[..<r.lowerBound]))
        let frames = error[r.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).map { line in
            let shown = TerminalText.escape(String(line))
            return shown.hasPrefix("\t") ? shown : "\t" + shown
        }
        return message + "\nstack traceback:\n" + frames.joined(separator: "\n")
    }

    var text: String {
        var lines: [String] = []
        if let error = result.mainError {
            let task = result.mainErrorTask.map { " (from task '\(Self.line($0))')" } ?? ""
            lines.append("tasker: error\(task): \(Self.mainErrorText(Self.cut(error)))")
        }
        // A bad parameter or target: the one line says it all.
        if result.commandLineError { return lines.joined(separator: "\n") + "\n" }
        let total = result.counts.values.reduce(0, +)
        let parts = [TaskState.succeeded, .failed, .cancelled, .skipped].compactMap { state -> String? in
            let n = result.counts[state] ?? 0
            guard n > 0 || state == .succeeded || state == .failed else { return nil }
            if state == .succeeded && result.reused > 0 { return "\(n) succeeded (\(result.reused) reused)" }
            return "\(n) \(state.rawValue)"
        }
        let time = DecimalText.fixed(result.seconds, places: 2) + "s"
        var head = "tasker: \(total) task\(total == 1 ? "" : "s"): \(parts.joined(separator: ", ")) in \(time)"
        let groups = [TaskState.succeeded, .failed, .cancelled, .skipped].compactMap { state -> String? in
            let n = result.groups[state] ?? 0
            return n > 0 ? "\(n) \(state.rawValue)" : nil
        }
        if !groups.isEmpty { head += " (groups and schedules: \(groups.joined(separator: ", ")))" }
        if result.retried > 0 { head += "; \(result.retried) task\(result.retried == 1 ? "" : "s") retried" }
        if result.signal != 0 { head += " (interrupted by \(Signals.name(result.signal)))" }
        lines.append(head)
        for f in result.failed.prefix(Self.listLimit) {
            // The first line of the error, and the next ones (a command's
            // stderr) indented below it: none can pass for a line of ours.
            let message = Self.cut(f.message).split(separator: "\n", omittingEmptySubsequences: false)
            lines.append("  failed \(Self.line(f.name)): \(Self.line(String(message[0])))")
            for more in message.dropFirst().prefix(Self.errorLines) { lines.append("      " + Self.line(String(more))) }
            let hidden = message.count - 1 - Self.errorLines
            if hidden > 0 { lines.append("      … \(hidden) more line\(hidden == 1 ? "" : "s")") }
        }
        if let more = more(result.failed.count, "failed") { lines.append(more) }
        // The reason already says which ("cancelled: …", "skipped: …").
        for (list, state) in [(result.cancelled, "cancelled"), (result.skipped, "skipped")] {
            for c in list.prefix(Self.listLimit) {
                lines.append("  \(Self.line(c.name)): \(Self.line(Self.cut(c.message)))")
            }
            if let more = more(list.count, state) { lines.append(more) }
        }
        // Only worth a line when something took a noticeable time.
        let slow = slowestShown
        if !slow.isEmpty {
            lines.append("  slowest: " + slow.map { "\(Self.line($0.name)) \(Self.duration($0.seconds))" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `  … and 1,436 more failed tasks: tasker show RUN`, or nil when all were listed.
    private func more(_ count: Int, _ state: String) -> String? {
        guard count > Self.listLimit else { return nil }
        let n = count - Self.listLimit
        return "  … and \(Self.grouped(n)) more \(state) task\(n == 1 ? "" : "s")" + (runID.map { ": tasker show \($0)" } ?? "")
    }

    /// `1436` as `1,436`.
    static func grouped(_ n: Int) -> String {
        let digits = Array(String(n))
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(d)
        }
        return out
    }

    /// Script text on one line of the summary.
    static func line(_ s: String) -> String { TerminalText.escape(s) }

    static func duration(_ s: Double) -> String {
        if s < 60 || !(s < 1e15) { return DecimalText.fixed(s, places: 1) + "s" }
        let seconds = Int(s) % 60
        return "\(Int(s) / 60)m\(seconds < 10 ? "0" : "")\(seconds)s"
    }

    static func cut(_ message: String) -> String {
        // Masked before it is cut: a secret cut in half is no longer found.
        let message = SecretMask.shared.mask(message)
        guard message.utf8.count > messageLimit else { return message }
        let kept = String(decoding: message.utf8.prefix(messageLimit), as: UTF8.self)
        return kept + "… (\(message.utf8.count - messageLimit) more bytes)"
    }

    func print() {
        StandardError.write(json ? jsonText : text, json: json)
    }

    /// The summary as one JSON object on a line, as `--log-format json`
    /// writes log lines: `level`, `msg` ("summary"), `ts`, then the counts,
    /// the time and the tasks listed (the first 20 of each, cut as above).
    var jsonText: String {
        var object: [String: JSONValue] = ["level": .string(result.mainError == nil && result.failed.isEmpty ? "info" : "error"),
                                           "msg": .string("summary"), "ts": .string(EventsWriter.timestamp()),
                                           "tasks": .integer(Int64(result.counts.values.reduce(0, +))), "seconds": .double(result.seconds)]
        object["counts"] = Self.byState(result.counts)
        if !result.groups.isEmpty { object["groups"] = Self.byState(result.groups) }
        if result.reused > 0 { object["reused"] = .integer(Int64(result.reused)) }
        if result.retried > 0 { object["retried"] = .integer(Int64(result.retried)) }
        if let error = result.mainError { object["error"] = .string(Self.cut(error)) }
        if let task = result.mainErrorTask { object["error_task"] = .string(task) }
        if result.signal != 0 { object["signal"] = .string(Signals.name(result.signal)) }
        if let runID { object["run"] = .string(runID) }
        for (key, list) in [("failed", result.failed), ("cancelled", result.cancelled), ("skipped", result.skipped)]
            where !list.isEmpty {
            object[key] = .array(list.prefix(Self.listLimit).map { .object([("error", .string(Self.cut($0.message))), ("name", .string($0.name))]) })
            if list.count > Self.listLimit { object[key + "_more"] = .integer(Int64(list.count - Self.listLimit)) }
        }
        if !slowestShown.isEmpty {
            object["slowest"] = .array(slowestShown.map { .object([("name", .string($0.name)), ("seconds", .double($0.seconds))]) })
        }
        // the form and key order of JSONSerialization, which wrote it before
        var w = JSONWriter(.foundation.forTerminal, capacity: 512)
        w.value(.object(object, order: .foundation))
        return w.text + "\n"
    }

    private static func byState(_ counts: [TaskState: Int]) -> JSONValue {
        .object(Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, .integer(Int64($0.value))) }), order: .foundation)
    }
}
