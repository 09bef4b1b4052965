import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua
import TaskerJournal

extension Tasker {
    /// `tasker runs [FILE] [--limit N] [--json]`, `tasker runs --prune --keep N`.
    struct Runs: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "runs",
            abstract: "List recorded runs, newest first (or prune old ones).")

        @Argument(help: "Only runs of this pipeline file.")
        var file: String?

        @Option(name: .long, help: "At most this many runs.")
        var limit: Int = 20

        @Flag(name: .long, help: "A JSON array of runs.")
        var json = false

        @Flag(name: .long, help: "Delete all but the newest --keep runs.")
        var prune = false

        @Option(name: .long, help: "With --prune: how many runs to keep.")
        var keep: Int?

        @OptionGroup var journal: JournalOptions

        func validate() throws {
            if prune && keep == nil { throw ValidationError("--prune needs --keep N") }
            if !prune && keep != nil { throw ValidationError("--keep goes with --prune (tasker runs --prune --keep N); to list fewer runs: --limit N") }
            if let keep, keep < 0 { throw ValidationError("--keep must be 0 or more (got \(keep))") }
            if limit < 1 { throw ValidationError("--limit must be at least 1 (got \(limit))") }
        }

        func run() throws {
            let reader = try journal.reader()
            if prune {
                let n: Int
                do {
                    n = try reader.prune(keep: keep ?? 0)
                } catch {
                    // a read-only or full journal: said as other journal errors are
                    StandardError.write("tasker: error: cannot prune the journal: \(error)\n")
                    throw ExitCode(2)
                }
                print("pruned \(n) run\(n == 1 ? "" : "s")")
                return
            }
            let pipeline = file.map(PipelineIdentity.of)
            // A run still going has no counts yet (they are written at its
            // end): they are counted from its tasks as recorded so far.
            let runs = try reader.runs(pipeline: pipeline, limit: limit).map { try History.withLiveCounts($0, reader) }
            if json {
                print(History.json(runs))
                return
            }
            if runs.isEmpty {
                var why = ""
                if let file, !FileManager.default.fileExists(atPath: file) {
                    why = " (there is no \(file) here: runs are found by the file's real path, so give its path from this directory)"
                }
                print("no runs recorded\(file.map { " of \(TerminalText.escape($0))" } ?? "")\(TerminalText.escape(why))")
                return
            }
            print(History.pad(["RUN", "STARTED", "DURATION", "EXIT", "TASKS", "PIPELINE"], [12, 20, 9, 7, 30]))
            for r in runs {
                print(History.pad([r.id, History.localTime(r.started), r.duration.map(History.seconds) ?? "-",
                                   r.exitCode.map { $0 < 0 ? "died" : String($0) } ?? "running",
                                   History.counts(r.counts), TerminalText.escape(r.pipeline)], [12, 20, 9, 7, 30]))
            }
        }
    }

    /// `tasker show RUN|last [FILE] [--json]`.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one recorded run and its tasks.")

        @Argument(help: ArgumentHelp("A run id, or 'last'.", valueName: "run"))
        var runID: String

        @Argument(help: ArgumentHelp("With 'last': the last run of this pipeline file.", valueName: "file"))
        var file: String?

        @Flag(name: .long, help: "One JSON object.")
        var json = false

        @Option(name: .long, help: ArgumentHelp("Only the tasks with this name (or id): every field, the whole error.", valueName: "name"))
        var task: String?

        @Flag(name: .long, help: "What the tasks' processes wrote (tasker.exec, tasker.sh; the last MiB of each): of --task, else of every failed task.")
        var output = false

        @OptionGroup var journal: JournalOptions

        func run() throws {
            let reader = try journal.reader()
            let r = try History.withLiveCounts(try History.run(runID, of: file, in: reader), reader)
            if task != nil || output {
                if json {
                    StandardError.write("tasker: error: --json lists the whole run; --task and --output print text\n")
                    throw ExitCode(2)
                }
                return try ShowTask.print(run: r, task: task, output: output, reader: reader)
            }
            // Each task is written as it is read: a run of 100,000s of
            // tasks streams out in little memory.
            var out = StdoutChunks()
            do {
                if json {
                    try out.write(HistoryJSON.opening(History.runObject(r, order: .string)))
                    var first = true
                    var line = ""
                    try reader.forEachTask(of: r.id) { t in
                        line = first ? "\n    " : ",\n    "
                        first = false
                        HistoryJSON.task(t, into: &line)
                        try out.write(line)
                    }
                    try out.write(first ? "]\n}\n" : "\n  ]\n}\n")
                } else {
                    try out.line("run \(r.id)  \(TerminalText.escape(r.pipeline))")
                    try out.line("started \(History.localTime(r.started))  duration \(r.duration.map(History.seconds) ?? "-")  exit \(r.exitCode.map { $0 < 0 ? "died" : String($0) } ?? "running")  \(History.counts(r.counts))")
                    if let from = r.resumedFrom { try out.line("resumed from \(from)") }
                    if !r.args.isEmpty { try out.line("args " + r.args.map { TerminalText.escape($0) }.joined(separator: " ")) }
                    // as recorded: secret-looking values were masked then
                    if !r.vars.isEmpty {
                        try out.line("vars " + r.vars.sorted { $0.key < $1.key }
                            .map { "\(TerminalText.escape($0.key))=\(TerminalText.escape($0.value))" }.joined(separator: " "))
                    }
                    try out.line(History.pad(["ID", "STATE", "ATTEMPTS", "DURATION", "HELD", "NAME", "ERROR"], [5, 10, 8, 9, 7, 24]))
                    try reader.forEachTask(of: r.id) { t in
                        let state = t.reused ? "reused" : (t.errorKind == "lost" ? "lost" : t.state)
                        try out.line(History.pad([String(t.id), state, String(t.attempts), t.duration.map(History.seconds) ?? "-",
                                                  t.held > 0 ? History.seconds(t.held) : "-", TerminalText.escape(t.name),
                                                  t.error.map { TerminalText.escape(String($0.split(separator: "\n").first ?? "")) } ?? ""],
                                                 [5, 10, 8, 9, 7, 24]))
                    }
                }
                try out.flush()
            } catch let e as StdoutError {
                StandardError.write("tasker: error: \(e)\n")
                throw ExitCode(1)
            }
        }
    }
}

/// Shared by `runs`, `show` and `report`.
enum History {
    /// The run `id` (or `last`), or exit 2 saying there is none.
    /// Run `id`; `last` with a pipeline `file` is that file's newest run.
    static func run(_ id: String, of file: String? = nil, in reader: JournalReader) throws -> JournalRun {
        if file != nil, id != "last" {
            StandardError.write("tasker: error: a pipeline file goes with 'last' only (a run id names one run already)\n")
            throw ExitCode(2)
        }
        let pipeline = file.map(PipelineIdentity.of)
        let found: JournalRun?
        do {
            found = try reader.run(id, pipeline: pipeline)
        } catch let e as AmbiguousRunID {
            StandardError.write("tasker: error: \(TerminalText.escape(e.description))\n")
            throw ExitCode(2)
        }
        guard let r = found else {
            if let pipeline {
                StandardError.write("tasker: error: no run of \(TerminalText.escape(pipeline)) in the journal (see 'tasker runs')\n")
            } else {
                StandardError.write("tasker: error: no run '\(TerminalText.escape(id))' in the journal (see 'tasker runs')\n")
            }
            throw ExitCode(2)
        }
        return r
    }

    /// A run's fields for `runs --json` and `show --json`; its objects'
    /// keys in `order` (each output keeps the order it had).
    static func runObject(_ r: JournalRun, order: JSONKeyOrder) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["id": .string(r.id), "pipeline": .string(r.pipeline), "started": .string(isoTime(r.started)),
                                      "counts": .object(r.counts.mapValues { .integer(Int64($0)) }, order: order),
                                      "args": .strings(r.args), "vars": .object(r.vars.mapValues(JSONValue.string), order: order)]
        o["duration"] = r.duration.map(JSONValue.double) ?? .null
        o["exit_code"] = r.exitCode.map { .integer(Int64($0)) } ?? .null
        if let from = r.resumedFrom { o["resumed_from"] = .string(from) }
        return o
    }

    /// `runs --json`: an array of runs in the layout and order Foundation's
    /// JSONSerialization gave it (`.prettyPrinted`, `.sortedKeys`).
    static func json(_ runs: [JournalRun]) -> String {
        var w = JSONWriter(.foundation.prettyPrinted)
        w.value(.array(runs.map { .object(runObject($0, order: .foundation), order: .foundation) }))
        return w.text
    }

    static func isoTime(_ t: Double) -> String {
        var secs = time_t(t)
        var parts = tm()
        gmtime_r(&secs, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec),
                      Int((t - floor(t)) * 1000))
    }

    static func localTime(_ t: Double) -> String {
        var secs = time_t(t)
        var parts = tm()
        localtime_r(&secs, &parts)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    static func seconds(_ s: Double) -> String {
        s < 1 ? String(format: "%.0fms", s * 1000) : (s < 600 ? String(format: "%.2fs", s) : String(format: "%.0fm", s / 60))
    }

    /// A run still going has no counts yet (they are written at its end):
    /// they are counted from its tasks as recorded so far.
    static func withLiveCounts(_ r: JournalRun, _ reader: JournalReader) throws -> JournalRun {
        // no end: still going, or died and not settled yet (its disk full),
        // whose tasks still running count as failed, as settling makes them
        guard r.ended == nil, r.counts.isEmpty else { return r }
        let died = r.exitCode.map { $0 < 0 } ?? false
        var live = r
        try reader.forEachTask(of: r.id) { t in
            guard t.kind == "task" else { return }
            live.counts[died && t.state == "running" ? "failed" : t.state, default: 0] += 1
            if t.reused { live.counts["reused", default: 0] += 1 }
        }
        return live
    }

    static func counts(_ c: [String: Int]) -> String {
        let order = ["running", "succeeded", "reused", "failed", "cancelled", "skipped"]
        let parts = order.compactMap { k in c[k].flatMap { $0 > 0 ? "\($0) \(k)" : nil } }
        let text = parts.isEmpty ? "no tasks" : parts.joined(separator: ", ")
        // The run could not record everything (a locked journal, a full disk).
        guard let missing = c["unrecorded"], missing > 0 else { return text }
        return text + " (journal incomplete: \(missing) not recorded)"
    }

    /// Columns padded to `widths` (the last column as it is).
    static func pad(_ cells: [String], _ widths: [Int]) -> String {
        var out = ""
        for (i, c) in cells.enumerated() {
            if i < widths.count {
                out += c
                let n = c.count
                if n < widths[i] { out += String(repeating: " ", count: widths[i] - n) }
                out += "  "
            } else {
                out += c
            }
        }
        return out
    }
}
