import ArgumentParser
import Dispatch
import Foundation
import TaskerCore
import TaskerHTTP
import TaskerLua
import TaskerQueue

extension Tasker {
    /// `tasker worker --store URL [--concurrency N] FILE`: runs the defined
    /// tasks a coordinator queues.
    struct Worker: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "worker",
            abstract: "Run the defined tasks queued in PostgreSQL (FILE: the module of tasker.define calls).",
            discussion: "SIGTERM or Ctrl-C: stop claiming and finish what runs; a second one hands the rest back and exits."
        )

        @Option(name: .long, help: ArgumentHelp("The PostgreSQL queue.", valueName: "postgres://..."))
        var store: String

        @Option(name: .long, help: "How many tasks run at once.")
        var concurrency: Int = 16

        @Option(name: .long, help: "Seconds of silence after which others take this worker's claims (it heartbeats 6 times per lease).")
        var lease: Double = 30

        @Option(name: .long, help: ArgumentHelp(
            "How long finished jobs stay in the queue's table after their run ended (0, 90s, 30m, 12h, 7d); "
                + "the run's journal keeps every result either way.", valueName: "duration"))
        var retain: String = "0"

        @OptionGroup var script: ScriptOptions

        @Argument(help: "The file of definitions.")
        var file: String

        @Argument(parsing: .captureForPassthrough, help: "Arguments for the script (tasker.args).")
        var scriptArgs: [String] = []

        mutating func validate() throws {
            file = DashedWords.unmarked(file)
            scriptArgs = scriptArgs.map(DashedWords.unmarked)
            guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1 (got \(concurrency))") }
            guard lease >= 0.5 else { throw ValidationError("--lease must be at least 0.5 seconds (got \(lease))") }
            guard Retention.seconds(retain) != nil else {
                throw ValidationError("--retain takes a duration such as 0, 90s, 30m, 12h or 7d (got '\(retain)')")
            }
            try StoreURL.validate(store)
        }

        func run() throws {
            var options = LuaRuntime.Options()
            options.concurrency = concurrency
            options.tearDown = false
            options.args = scriptArgs
            script.apply(to: &options)
            // as a run does: a URL's password among them is masked in every output
            for secret in Redaction.secrets(arguments: scriptArgs, variables: [:]) { SecretMask.shared.register(secret) }
            let signals = WorkerSignals()
            var failure: String?
            var worker: QueueWorker?
            var groups: ProcessGroups?
            let settings = QueueWorker.Settings(concurrency: concurrency, lease: lease,
                                                retain: Retention.seconds(retain) ?? Retention.defaultSeconds)
            let url = store
            let result = PipelineRunner.run(path: file, options: options) { runtime in
                let jobs = WorkerJobs(runtime: runtime)
                groups = runtime.processGroups
                runtime.engine.observers.append(jobs)
                let loop = runtime.loop
                loop.beginActivity()  // a worker waits for jobs until told to stop
                runtime.callbacks.mainDone = {
                    loop.enqueue {
                        guard !runtime.mainChunkFailed else {
                            loop.endActivity()
                            return
                        }
                        var settings = settings
                        settings.versions = runtime.definedVersions
                        if settings.versions.isEmpty {
                            runtime.logNotice("\(file) defines no task (tasker.define): this worker will claim nothing")
                        }
                        do {
                            let w = try QueueWorker(url: url, settings: settings, loop: loop, runner: jobs)
                            w.log = { runtime.logNotice($0) }
                            jobs.queue = w
                            worker = w
                            runtime.logNotice("worker \(w.id): waiting for jobs (concurrency \(settings.concurrency))")
                            signals.start(loop: loop, drain: {
                                runtime.logNotice("stopping: no new jobs; finishing \(w.runningCount) running")
                                w.drain { loop.endActivity() }
                            }, handBack: w.handBack, groups: runtime.processGroups)
                            w.start()
                        } catch {
                            failure = "\(error)"
                            loop.endActivity()
                        }
                    }
                }
            }
            // a second signal's exit under way: it sends the remote stops and leaves
            groups?.endOrAwaitSignalExit()
            signals.stop()
            worker?.close()
            if let failure {
                StandardError.write("tasker: error: \(failure)\n")
                throw ExitCode(2)
            }
            if let e = result.mainError { StandardError.write(TerminalText.escape(e, keepNewlines: true) + "\n") }
            throw ExitCode(result.mainError == nil ? 0 : result.exitCode)
        }
    }
}

/// SIGTERM, SIGINT, SIGHUP: the first drains the worker, the second hands
/// back what still runs, kills the processes its jobs started and exits at
/// once.
final class WorkerSignals {
    private let inbox = SignalInbox.shared

    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    func start(loop: EventLoop, drain: @escaping () -> Void, handBack: @escaping @Sendable () -> Void,
               groups: ProcessGroups) {
        let target = LoopBound(drain, loop: loop)
        let seen = SignalCount()
        // A signal that came while the worker started (blocked, as the
        // parent's mask may leave it) is pending: the inbox unblocks it
        // once caught, and it counts as received.
        for sig in Self.handled {
            inbox.handle(sig) { sig in
                if seen.n.add(1, ordering: .relaxed).newValue > 1 {
                    handBack()
                    SignalWatcher.exitNow(128 + sig, groups: groups)
                }
                target.loop.execute { target.value() }
            }
        }
    }

    func stop() {
        for sig in Self.handled { inbox.release(sig) }
    }
}

extension StoreURL {
    /// A usage error (exit 2) for a `--store` that is not a PostgreSQL URL,
    /// before libpq sees it.
    static func validate(_ url: String) throws {
        do { try check(url) } catch { throw ValidationError(error.description) }
    }
}
