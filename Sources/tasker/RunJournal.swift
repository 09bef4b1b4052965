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
        /// Later runs the default went past (see `stoppedEarly`).
        var passedOver: [String] = []
    }

    /// Whether a run stopped before its end: on a usage error (a mistyped
    /// parameter or target), a signal, or a kill. The default `--resume`
    /// goes past it (see `resumable`): the latest such run would otherwise
    /// hide the progress of the run before it.
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
        if id == nil { try goPastRunsThatStoppedEarly(earlier, &found, reader) }
        if plan { found.earlierTasks = try reader.tasks(of: found.run).filter { $0.kind == "task" } }
        return found
    }

    /// The default resume from `latest` on: a resume that stopped early
    /// (`stoppedEarly`) adds what it resumed from, under what it did itself
    /// (it would have reused that had it got there); a run that is no
    /// resume and stopped on a usage error before anything succeeded is
    /// passed over for the one before it.
    private func goPastRunsThatStoppedEarly(_ latest: JournalRun, _ found: inout Resumable,
                                            _ reader: JournalReader) throws {
        var run = latest
        var older: [JournalRun]?
        while Self.stoppedEarly(run), found.passedOver.count < Self.passedOverAtMost {
            let next: JournalRun
            if let from = run.resumedFrom, let earlier = try reader.run(from), earlier.pipeline == latest.pipeline {
                next = earlier
            } else if run.exitCode == 2, found.reuse.isEmpty {
                older = try older ?? reader.runs(pipeline: latest.pipeline, limit: Self.passedOverAtMost + 2)
                guard let i = older!.firstIndex(where: { $0.id == run.id }), i + 1 < older!.count else { return }
                next = older![i + 1]
            } else {
                return
            }
            found.passedOver.append(run.id)
            found.reuse = try reader.reusable(from: next.id).merging(found.reuse) { _, later in later }
            found.run = next.id
            found.pipeline = next.pipeline
            run = next
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
            for name in secretParams {
                if args[i] == "--" + name, i + 1 < args.count {
                    args[i + 1] = "***"
                    i += 1
                    break
                } else if args[i].hasPrefix("--" + name + "=") {
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
