import ArgumentParser
import Foundation
import TaskerCore
import TaskerHTTP
import TaskerJournal
import TaskerLua
import TaskerQueue

extension Tasker {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            // Said only when `run` is parsed on its own (Tasker.quickRun):
            // its usage reads `tasker run`, and the parser skips its check
            // for a completion-script request (the tree's parse makes it).
            _superCommandName: "tasker",
            abstract: "Run a pipeline.",
            discussion: "Options go before FILE; the words after FILE are the script's tasker.args."
        )

        @Option(name: .long, help: "How many tasks run at once (this also caps HTTP requests, which tasks make, whatever http.configure{concurrency=} says).")
        var concurrency: Int = 16

        @Flag(name: .long, help: "Reload files loaded with tasker.use when they change.")
        var watch = false

        @OptionGroup var script: ScriptOptions

        @Option(name: .long, help: "Write one JSON object per event to this file ('-': stdout).")
        var events: String?

        @Flag(name: .long, help: "No live status line.")
        var noProgress = false

        @Option(name: .long, help: ArgumentHelp("The journal's directory (default: $TASKER_STATE_DIR, $XDG_STATE_HOME/tasker, ~/.local/state/tasker).", valueName: "dir"))
        var state: String?

        @Flag(name: .long, help: "Record nothing in the journal.")
        var noJournal = false

        @Flag(name: .long, help: "Resume an earlier run (RUN before FILE, default: the latest run of FILE): tasks that succeeded then are not run again.")
        var resume = false

        @Flag(name: .long, help: "With --resume: print what would be reused and what would run, and run nothing.")
        var plan = false

        @Flag(name: .long, help: "With --resume RUN: resume it even though it was recorded for another pipeline file (its values are reused by task identity).")
        var resumeFromOther = false

        @Option(name: .long, help: ArgumentHelp("Write an HTML report of the run to this file.", valueName: "file.html"))
        var report: String?

        @Option(name: .long, help: ArgumentHelp("Queue the defined tasks in PostgreSQL for workers (tasker worker) to run; the run's journal goes there too.", valueName: "postgres://..."))
        var store: String?

        @Option(name: .long, help: "With --store: seconds without this run's heartbeat after which workers cancel its jobs (it heartbeats 6 times per lease).")
        var lease: Double = 60

        @Argument(help: "The pipeline file.", completion: .file(extensions: ["lua"]))
        var file: String

        @Argument(parsing: .captureForPassthrough, help: "Arguments for the script (tasker.args), its targets and parameters.",
                  completion: .custom { words, index, prefix in PipelineDescription.completions(words: words, at: index, prefix: prefix) })
        var scriptArgs: [String] = []

        mutating func validate() throws {
            file = DashedWords.unmarked(file)
            scriptArgs = scriptArgs.map(DashedWords.unmarked)
            // First: with an option after FILE, the others may not say what was meant.
            if let why = MisplacedOptions.message(before: Self.wordsBeforeFile(scriptArgs: scriptArgs),
                                                  file: file, words: scriptArgs,
                                                  declared: { MisplacedOptions.declaredParameters(in: file) }) {
                StandardError.write("tasker: error: \(why)\n")
                throw ExitCode(2)
            }
            guard concurrency >= 1 else {
                throw ValidationError("--concurrency must be at least 1 (got \(concurrency))")
            }
            if plan && !resume { throw ValidationError("--plan goes with --resume") }
            if resumeFromOther && !resume { throw ValidationError("--resume-from-other goes with --resume") }
            if let store { try StoreURL.validate(store) }
            guard lease >= 0.5, lease.isFinite else { throw ValidationError("--lease must be at least 0.5 seconds (got \(lease))") }
            if noJournal && (resume || report != nil) {
                throw ValidationError("--no-journal cannot go with \(resume ? "--resume" : "--report") (both read the journal)")
            }
        }

        /// Whether two paths name one existing file.
        static func isSameFile(_ a: String, _ b: String) -> Bool {
            var sa = stat(), sb = stat()
            return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
        }

        /// The words typed between `run` and FILE.
        static func wordsBeforeFile(scriptArgs: [String]) -> [String] {
            let argv = Array(CommandLine.arguments.dropFirst())
            guard let run = argv.firstIndex(of: "run") else { return [] }
            let fileIndex = argv.count - scriptArgs.count - 1
            return fileIndex > run ? Array(argv[(run + 1)..<fileIndex]) : []
        }

        func run() throws {
            let words = MisplacedOptions.scriptWords(self.scriptArgs)
            let given = Array(words.checked + words.passed)
            let (resumeRun, file, scriptArgs) = resume ? RunJournal.splitResume(file: file, args: given)
                                                       : (nil, file, given)
            // `--events p.lua p.lua`: truncated before it was read
            // and the journal's files: truncated, the history was gone
            var journalFiles: [String] = []
            if store == nil, !noJournal, case .directory(let dir) = JournalPlace(state: state, store: nil) {
                journalFiles = ["", "-wal", "-shm"].map { dir + "/" + Journal.fileName + $0 }
            }
            for (flag, path) in [("--events", events), ("--report", report)] {
                guard let path, path != "-" else { continue }
                if Self.isSameFile(path, file) {
                    StandardError.write("tasker: error: \(flag) '\(TerminalText.escape(path))' is the pipeline file itself (it would be overwritten)\n")
                    throw ExitCode(2)
                }
                if journalFiles.contains(where: { Self.isSameFile(path, $0) }) {
                    StandardError.write("tasker: error: \(flag) '\(TerminalText.escape(path))' is the journal's file (it would be overwritten)\n")
                    throw ExitCode(2)
                }
            }
            // One line with the system's reason, before anything is
            // started or recorded (no summary of a run that never was).
            if let why = PipelineRunner.unreadable(path: file) {
                StandardError.write("tasker: error: \(why)\n")
                throw ExitCode(2)
            }
            // `tasker run FILE --help`: what the pipeline accepts; nothing runs.
            if words.checked.contains("--help") || words.checked.contains("-h") {
                if let error = PipelineRunner.check(path: file) {
                    StandardError.write("tasker: error: \(TerminalText.escape(error))\n")
                    throw ExitCode(2)
                }
                var vars: [String: String] = [:]
                for v in script.vars { let kv = v.split(separator: "=", maxSplits: 1); if kv.count == 2 { vars[String(kv[0])] = String(kv[1]) } }
                let description = PipelineDescription.of(file, args: scriptArgs.filter { $0 != "--help" && $0 != "-h" }, vars: vars)
                print(SecretMask.shared.mask(description.text), terminator: "")
                return
            }
            let journal = RunJournal(state: state, store: store)
            let pipeline = PipelineIdentity.of(file)
            var options = LuaRuntime.Options()
            options.concurrency = concurrency
            options.tearDown = false  // the process exits right after the run
            options.soleRun = true
            options.watch = watch
            options.args = scriptArgs
            options.parameterWords = scriptArgs.count - words.passed.count
            script.apply(to: &options)
            let status: StatusLine? = noProgress || !StatusLine.wanted ? nil : StatusLine()
            if let status {
                options.output = { status.write($0) }
                options.diagnostics = { status.writeError($0 + "\n") }
                options.jsonDiagnostics = { status.writeError($0 + "\n", json: true) }
            }
            let signals = SignalWatcher()
            let events: EventsWriter?
            do {
                events = try self.events.map { try EventsWriter(output: OutputFile(path: $0)) }
            } catch {
                StandardError.write("tasker: error: \(error)\n")
                throw ExitCode(2)
            }
            var resumedFrom: String?
            var planExit: Int32?
            if resume {
                do {
                    let resumeFromOther = resumeFromOther, plan = plan
                    // Off this thread, bounded and interruptible: another
                    // process may hold the journal.
                    let found = try RunJournal.interruptible(seconds: RunJournal.resumeWait, journal.place) {
                        try journal.resumable(resumeRun, pipeline: pipeline, fromOther: resumeFromOther, plan: plan)
                    }
                    options.reuse = found.reuse
                    if !found.passedOver.isEmpty {
                        let one = found.passedOver.count == 1
                        let later = (one ? "the later run " : "the later runs ") + found.passedOver.joined(separator: ", ")
                        StandardError.write("tasker: resuming run \(found.run), with what succeeded in \(later), "
                                            + "which stopped before \(one ? "its" : "their") end\n")
                    }
                    if plan {
                        let (text, code) = ResumePlan.evaluate(file, options: options, earlier: found)
                        print(SecretMask.shared.mask(text), terminator: "")
                        planExit = code
                    }
                    resumedFrom = found.run
                } catch {
                    StandardError.write("tasker: error: \(error)\n")
                    throw ExitCode(2)
                }
            }
            if let planExit {
                if planExit != 0 { throw ExitCode(planExit) }
                return
            }
            let runID = RunID.make()
            RunJournal.registerDeclaredSecrets(in: file)
            for secret in Redaction.secrets(arguments: scriptArgs, variables: [:]) { SecretMask.shared.register(secret) }
            let recorded = RunJournal.recorded(args: scriptArgs, vars: options.vars,
                                               secretParams: MisplacedOptions.declaredParameters(in: file, secretOnly: true))
            var journalWriter: JournalWriter?
            if !noJournal {
                do {
                    let run = JournalRun(id: runID, pipeline: pipeline, args: recorded.args, vars: recorded.vars,
                                         started: Date().timeIntervalSince1970, pid: Int(getpid()), resumedFrom: resumedFrom)
                    journalWriter = try journal.place.writer(run: run)
                    options.identify = true
                } catch {
                    // The work matters more than its record: run without it
                    // (a resume too: it read what to reuse already).
                    StandardError.write("tasker: warning: no journal for this run (\(error)); --no-journal silences this\n")
                    if report != nil {
                        StandardError.write("tasker: error: --report draws the run from its journal, and this run cannot have one\n")
                        throw ExitCode(2)
                    }
                    options.identify = resume  // to match the earlier run's tasks
                }
            }
            var queue: QueueCoordinator?
            if let store {
                do {
                    let q = try QueueCoordinator(url: store, run: runID, lease: lease, resuming: resumedFrom)
                    let say = options.diagnostics
                    q.notice = { say("tasker: warning: \($0)") }
                    queue = q
                    options.remote = q
                } catch {
                    StandardError.write("tasker: error: \(error)\n")
                    throw ExitCode(2)
                }
            }
            defer { queue?.stop() }
            events?.runStarted(id: runID, pipeline: pipeline, args: recorded.args)
            var groups: ProcessGroups?
            var recorder: JournalRecorder?
            let result = PipelineRunner.run(path: file, options: options) { runtime in
                groups = runtime.processGroups
                queue?.onWarning(runtime.warningLog)
                queue?.deliver(on: runtime.loop)
                if let journalWriter { recorder = JournalRecorder(writer: journalWriter, runtime: runtime) }
                if let events {
                    events.runtime = runtime
                    runtime.engine.observers.append(events)
                    runtime.callbacks.reloaded = { file in events.reloaded(file) }
                    runtime.observeRequests { events.request($0) }
                }
                signals.start(runtime)
                if let status {
                    status.attach(runtime.engine)
                    signals.watchResize(status)
                }
            }
            status?.finish()
            // Background children a script left behind (`sh -c "x &"`).
            groups?.killAll(grace: 0.5)
            // A signal from here on stops waiting for the journal (a second
            // one still exits at once).
            let late = LateSignal()
            let abandon = journalWriter?.abandoner
            let earlier = signals.afterRun { sig in
                late.set(sig)
                abandon?()
            }
            // A signal that came as the run ended: what is quick to record
            // still is, a journal that keeps the run waiting is not waited for.
            let journalWait = earlier != 0 ? 0.5 : nil
            // Output that could not be written is an error, not silence.
            var code = result.exitCode
            // A signal that came as the run was ending still ends it as one.
            if signals.received != 0 && code < 128 { code = 128 + signals.received }
            let stdoutError = StandardStreams.stdoutError()
            if (stdoutError != nil || events?.error != nil) && code < 2 { code = 2 }
            events?.runEnded(result, exitCode: code)
            let journalError = if let recorder {
                recorder.finish(result, exitCode: code, waitingAtMost: journalWait)
            } else {
                journalWriter.flatMap { JournalRecorder.close($0, result, exitCode: code, waitingAtMost: journalWait) }
            }
            if let journalError {
                StandardError.write("tasker: warning: run \(runID): \(journalError)\n")
            }
            signals.stop()
            if late.signal != 0 && code < 128 { code = 128 + late.signal }
            Summary(result: result, runID: journalWriter == nil ? nil : runID, slowest: recorder?.slowest ?? [],
                    json: script.logFormat == "json").print()
            if let report, journalWriter != nil {
                do {
                    try ReportCommand.write(runID: runID, place: journal.place, to: report)
                } catch let e as OutputError {
                    // The exit code stays the run's: the report is about it.
                    StandardError.write("tasker: error: \(ReportCommand.message(e))\n")
                } catch {
                    StandardError.write("tasker: error: cannot write the report: \(error)\n")
                }
            }
            for e in [stdoutError, events?.error].compactMap({ $0 }) {
                StandardError.write("tasker: error: \(e)\n")
            }
            if events?.error != nil && code < 2 { code = 2 }
            // The server stayed away past the outage limit: the run failed.
            if let why = queue?.failure {
                StandardError.write("tasker: error: store: \(why)\n")
                if code < 1 { code = 1 }
            }
            // From here a signal ends the process by its default action; one
            // that came before, even in the run's last moments (its byte not
            // read yet when the code above was set), is in the exit code.
            // A second signal as the run ended: its exit sends the remote
            // stops and leaves; ending here would cut that short.
            groups?.endOrAwaitSignalExit()
            signals.restoreDefaults()
            if code < 128, signals.caught != 0 { code = 128 + signals.caught }
            throw ExitCode(code)
        }
    }
}
