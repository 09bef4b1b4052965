import Foundation
import Synchronization
import TaskerCore
import TaskerHTTP
import TaskerJournal
import TaskerLua

/// The journal side of `tasker run`: where it lives, what a resume reuses,
/// the `--plan` listing, and the recorder for the new run.
struct RunJournal {
    let place: JournalPlace

    init(state: String?, store: String?) {
        place = JournalPlace(state: state, store: store)
    }

    /// `--resume [RUN] FILE`: RUN is given when the first word is `last` or
    /// is not a file while a file follows it.
    static func splitResume(file: String, args: [String]) -> (run: String?, file: String, args: [String]) {
        guard let next = args.first else { return (nil, file, args) }
        if file == "last" || !FileManager.default.fileExists(atPath: file) {
            return (file, next, Array(args.dropFirst()))
        }
        return (nil, file, args)
    }

    /// The run a resume starts from: `id`, or the newest run of `pipeline`.
    func earlierRun(_ id: String?, pipeline: String) throws(RunJournalError) -> (JournalReader, JournalRun) {
        let reader: JournalReader
        do {
            reader = try place.reader()
        } catch {
            throw RunJournalError("cannot resume: \(error)")
        }
        let found: JournalRun?
        do {
            found = try id.map { try reader.run($0, pipeline: pipeline) } ?? reader.runs(pipeline: pipeline, limit: 1).first
        } catch {
            throw RunJournalError("cannot resume: \(error)")
        }
        guard let run = found else {
            if let id { throw RunJournalError("cannot resume: no run '\(id)' in the journal (see 'tasker runs')") }
            throw RunJournalError("cannot resume: the journal has no earlier run of \(pipeline) (see 'tasker runs')")
        }
        return (reader, run)
    }

    /// What `--resume` found: the `--plan` text, or the values to reuse.
    struct Resumable: Sendable {
        var run: String
        var plan: String?
        var reuse: [String: String] = [:]
    }

    /// The earlier run and what it offers. A run recorded for another
    /// pipeline file is refused unless `fromOther`: its values would be
    /// reused wherever an identity happens to match.
    func resumable(_ id: String?, pipeline: String, fromOther: Bool, plan: Bool) throws -> Resumable {
        let (reader, earlier) = try earlierRun(id, pipeline: pipeline)
        if earlier.pipeline != pipeline && !fromOther {
            throw RunJournalError("cannot resume run \(earlier.id): it was recorded for \(earlier.pipeline), not \(pipeline) (--resume-from-other resumes it anyway)")
        }
        if plan { return Resumable(run: earlier.id, plan: try Self.plan(reader, earlier)) }
        return Resumable(run: earlier.id, reuse: try reader.reusable(from: earlier.id))
    }

    /// How long `--resume` waits for the journal before it gives up.
    static let resumeWait = 30.0

    /// Runs `body` on a thread of its own and waits at most `seconds` for
    /// it; SIGINT, SIGTERM or SIGHUP meanwhile end the process at once
    /// (nothing has started yet).
    static func interruptible<T: Sendable>(seconds: Double, _ place: JournalPlace,
                                           _ body: @escaping @Sendable () throws -> T) throws -> T {
        let box = Mutex<Result<T, Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let r = Result { try body() }
            box.withLock { $0 = r }
            done.signal()
        }.start()
        let queue = DispatchQueue(label: "tasker.resume-signals")
        var sources: [DispatchSourceSignal] = []
        for sig in SignalWatcher.handled {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                StandardError.write("\ntasker: interrupted while reading the journal\n")
                exit(128 + sig)
            }
            source.resume()
            sources.append(source)
        }
        defer {
            for s in sources { s.cancel() }
            for sig in SignalWatcher.handled { signal(sig, SIG_DFL) }
        }
        guard done.wait(timeout: .now() + seconds) == .success, let result = box.withLock({ $0 }) else {
            throw RunJournalError("cannot resume: the journal (\(place)) did not answer within \(Int(seconds)) s (another process may hold it locked)")
        }
        return try result.get()
    }

    /// `--plan`: for each task of the earlier run, `reuse` or `run` and why.
    static func plan(_ reader: JournalReader, _ run: JournalRun) throws -> String {
        let tasks = try reader.tasks(of: run.id).filter { $0.kind == "task" }
        // Names and reasons come from the script: escaped, one task one line.
        let shown = { (s: String) in TerminalText.escape(s) }
        var lines = ["plan: resume run \(run.id) of \(shown(run.pipeline)) (\(tasks.count) task\(tasks.count == 1 ? "" : "s"))"]
        var reuse = 0
        for t in tasks {
            let reason: String?
            if t.state != "succeeded" {
                reason = t.errorKind == "lost" ? "lost (the run ended while it was running)" : t.state
            } else if let why = t.notResumable {
                reason = "not resumable: \(why)"
            } else if t.identity == nil {
                reason = "not resumable: no identity"
            } else {
                reason = nil
            }
            if reason == nil { reuse += 1 }
            lines.append("\(reason == nil ? "reuse" : "run  ")  \(shown(t.name))\(reason.map { "  (\(shown($0)))" } ?? "")")
        }
        lines.append("plan: \(reuse) to reuse, \(tasks.count - reuse) to run again (tasks the new run adds that the old one did not run too)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// What the record of a run holds of its command line (the journal's
    /// row, so `show`, `runs --json` and the report, and the events file's
    /// `run` line): the one place secrets in args and `--var` values are
    /// hidden. The script itself sees the real values.
    static func recorded(args: [String], vars: [String: String]) -> (args: [String], vars: [String: String]) {
        (Redaction.arguments(args), Redaction.variables(vars))
    }
}

struct RunJournalError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
