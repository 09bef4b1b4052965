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
        var pipeline: String
        var reuse: [String: String] = [:]
        /// For `--plan`: the earlier run's tasks, to say why one runs again.
        var earlierTasks: [JournalTask] = []
        /// Later runs the default went past (see `stoppedEarly`), each as
        /// "id (how it stopped)", for the note on stderr.
        var passedOver: [String] = []
    }

    /// Whether a run stopped before its end: exit 2 (a usage error, or its
    /// main chunk raised), a signal, or a kill. The default `--resume` may
    /// go past it (see `goPastRunsThatStoppedEarly`): the latest such run
    /// would otherwise hide the progress of the run before it.
    static func stoppedEarly(_ run: JournalRun) -> Bool {
        guard let code = run.exitCode else { return false }
        return code == 2 || code == -1 || code == 129 || code == 130 || code == 143
    }

    /// How many later runs the default passes over at most.
    static let passedOverAtMost = 20

    /// The earlier run and what it offers. A run recorded for another
    /// pipeline file is refused unless `fromOther`: its values would be
    /// reused wherever an identity happens to match.
    func resumable(_ id: String?, pipeline: String, fromOther: Bool, plan: Bool) throws -> Resumable {
        let (reader, earlier) = try earlierRun(id, pipeline: pipeline)
        if earlier.pipeline != pipeline && !fromOther {
            throw RunJournalError("cannot resume run \(earlier.id): it was recorded for \(earlier.pipeline), not \(pipeline) (--resume-from-other resumes it anyway)")
        }
        var found = Resumable(run: earlier.id, pipeline: earlier.pipeline, reuse: try reader.reusable(from: earlier.id))
        var merged: [String] = []  // newest first
        if id == nil { try goPastRunsThatStoppedEarly(earlier, &found, &merged, reader) }
        if plan {
            // The earlier run's tasks as the resume sees them: a later run
            // merged in (see below) stands over them, task by task.
            var tasks = try reader.tasks(of: found.run).filter { $0.kind == "task" }
            for later in merged.reversed() {
                var at: [String: Int] = [:]
                for (i, t) in tasks.enumerated() { if let identity = t.identity { at[identity] = i } }
                for t in try reader.tasks(of: later) where t.kind == "task" {
                    if let identity = t.identity, let i = at[identity] { tasks[i] = t } else { tasks.append(t) }
                }
            }
            found.earlierTasks = tasks
        }
        return found
    }

    /// The default resume from `latest` on. A resume that stopped early
    /// (`stoppedEarly`) adds what it resumed from under what it did itself:
    /// it would have reused that had it got there (`merged`). A run that is
    /// no resume and stopped on exit 2 (a usage error: a mistyped parameter
    /// or target) before any task of it started is passed over for the one
    /// before it. Any other run is taken as it is: a fresh run whose tasks
    /// failed is the user's latest word on them.
    private func goPastRunsThatStoppedEarly(_ latest: JournalRun, _ found: inout Resumable, _ merged: inout [String],
                                            _ reader: JournalReader) throws {
        var run = latest
        var older: [JournalRun]?
        while Self.stoppedEarly(run), found.passedOver.count < Self.passedOverAtMost {
            let next: JournalRun
            if let from = run.resumedFrom, let earlier = try reader.run(from), earlier.pipeline == latest.pipeline {
                next = earlier
                merged.append(run.id)
            } else if run.exitCode == 2, found.reuse.isEmpty, try !reader.tasks(of: run.id).contains(where: { $0.attempts > 0 }) {
                older = try older ?? reader.runs(pipeline: latest.pipeline, limit: Self.passedOverAtMost + 2)
                guard let i = older!.firstIndex(where: { $0.id == run.id }), i + 1 < older!.count else { break }
                next = older![i + 1]
            } else {
                break
            }
            found.passedOver.append("\(run.id) (\(Self.howItStopped(run)))")
            found.reuse = try reader.reusable(from: next.id).merging(found.reuse) { _, later in later }
            found.run = next.id
            found.pipeline = next.pipeline
            run = next
        }
    }

    /// What a run that stopped early ended with, in words.
    static func howItStopped(_ run: JournalRun) -> String {
        switch run.exitCode {
        // as `runs` and `show` call it: killed, or its end not recorded
        // (the journal locked or full at its end)
        case .some(-1): "died"
        case .some(129): "hung up"
        case .some(130): "interrupted"
        case .some(143): "terminated"
        case .some(let code): "exit \(code)"
        case .none: "running"
        }
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
        // Plain handlers that exit in the handler: nothing has started yet
        // that needs the signal inbox's orderly stop. Say so and exit.
        _ = interruptedWhileReading.count  // initialised before a handler reads it
        for sig in SignalWatcher.handled {
            signal(sig) { sig in
                interruptedWhileReading.withUnsafeBufferPointer { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
                _exit(128 + sig)
            }
        }
        // A parent may have left them blocked: caught now, they must arrive.
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        for sig in SignalWatcher.handled { sigaddset(&unblocked, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
        defer {
            for sig in SignalWatcher.handled { signal(sig, SIG_DFL) }
        }
        guard done.wait(timeout: .now() + seconds) == .success, let result = box.withLock({ $0 }) else {
            throw RunJournalError("cannot resume: the journal (\(place)) did not answer within \(Int(seconds)) s (another process may hold it locked)")
        }
        return try result.get()
    }

    /// What the record of a run holds of its command line (the journal's
    /// row, so `show`, `runs --json` and the report, and the events file's
    /// `run` line): the one place secrets in args and `--var` values are
    /// hidden. The script itself sees the real values.
    /// `secretParams`: parameters declared `secret = true`; their values
    /// among the args are `***` (the run's row is written before the
    /// script registers them).
    static func recorded(args: [String], vars: [String: String], secretParams: Set<String> = [])
        -> (args: [String], vars: [String: String]) {
        var args = args
        var i = 0
        while i < args.count {
            // the value is a secret from here on: masked wherever else it
            // is (another word, a --var) as the script will mask it
            for name in secretParams {
                if args[i] == "--" + name, i + 1 < args.count {
                    _ = SecretMask.shared.register(args[i + 1])
                    args[i + 1] = "***"
                    i += 1
                    break
                } else if args[i].hasPrefix("--" + name + "=") {
                    _ = SecretMask.shared.register(String(args[i].dropFirst(name.count + 3)))
                    args[i] = "--" + name + "=***"
                }
            }
            i += 1
        }
        return (Redaction.arguments(args).map { SecretMask.shared.mask($0) },
                Redaction.variables(vars).mapValues { SecretMask.shared.mask($0) })
    }

    /// Registers the secrets the pipeline's text asks for by name
    /// (`tasker.secret("API_KEY")`: see `DeclaredParameters.secretSources`),
    /// before the run records its command line: the script registers them
    /// again when it runs.
    static func registerDeclaredSecrets(in file: String) {
        guard let data = FileManager.default.contents(atPath: file) else { return }
        let environment = ProcessInfo.processInfo.environment
        for source in DeclaredParameters(source: Array(data)).secretSources() {
            if let name = source.env, let value = environment[name] { SecretMask.shared.register(value) }
            if let path = source.file, var bytes = FileManager.default.contents(atPath: path).map(Array.init) {
                // as the call reads it: one trailing "\n" or "\r\n" dropped
                if bytes.last == 0x0A {
                    bytes.removeLast()
                    if bytes.last == 0x0D { bytes.removeLast() }
                }
                SecretMask.shared.register(String(decoding: bytes, as: UTF8.self))
            }
        }
    }
}

/// What `RunJournal.interruptible`'s signal handler writes (async-signal-safe: no allocation).
private let interruptedWhileReading: [UInt8] = Array("\ntasker: interrupted while reading the journal\n".utf8)

struct RunJournalError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
