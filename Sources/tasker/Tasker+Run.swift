import ArgumentParser
import Foundation
import TaskerCore
import TaskerLua

extension Tasker {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a pipeline.",
            discussion: "Options go before FILE; the words after FILE are the script's tasker.args."
        )

        @Option(name: .long, help: "How many tasks run at once.")
        var concurrency: Int = 16

        @Flag(name: .long, help: "Reload files loaded with tasker.use when they change.")
        var watch = false

        @Option(name: .customLong("var"), help: ArgumentHelp("Set tasker.vars.KEY to VALUE.", valueName: "key=value"))
        var vars: [String] = []

        @Option(name: .long, help: "debug, info, warn or error.")
        var logLevel: String = "info"

        @Option(name: .long, help: "Write one JSON object per event to this file ('-': stdout).")
        var events: String?

        @Flag(name: .long, help: "No live status line.")
        var noProgress = false

        @Argument(help: "The pipeline file.")
        var file: String

        @Argument(parsing: .captureForPassthrough, help: "Arguments for the script (tasker.args).")
        var scriptArgs: [String] = []

        func validate() throws {
            guard concurrency >= 1 else {
                throw ValidationError("--concurrency must be at least 1 (got \(concurrency))")
            }
            for v in vars {
                guard let eq = v.firstIndex(of: "=") else {
                    // Never echo the value: it may be a secret given the wrong way.
                    throw ValidationError("--var expects key=value (got an argument without '=')")
                }
                guard eq != v.startIndex else {
                    throw ValidationError("--var expects key=value (the key is empty)")
                }
            }
            guard ["debug", "info", "warn", "error"].contains(logLevel) else {
                throw ValidationError("--log-level must be debug, info, warn or error (got '\(logLevel)')")
            }
        }

        func run() throws {
            var options = LuaRuntime.Options()
            options.concurrency = concurrency
            options.tearDown = false  // the process exits right after the run
            options.watch = watch
            options.logLevel = switch logLevel {
            case "debug": .debug
            case "warn": .warning
            case "error": .error
            default: .info
            }
            options.args = scriptArgs
            for v in vars {
                let parts = v.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                options.vars[String(parts[0])] = String(parts[1])
            }
            let status: StatusLine? = noProgress || !StatusLine.wanted ? nil : StatusLine()
            if let status { options.output = { status.write($0) } }
            let signals = SignalWatcher()
            let events: EventsWriter?
            do {
                events = try self.events.map { try EventsWriter(output: OutputFile(path: $0)) }
            } catch {
                StandardError.write("tasker: error: \(error)\n")
                throw ExitCode(2)
            }
            let pipeline = URL(fileURLWithPath: file).standardizedFileURL.resolvingSymlinksInPath().path
            events?.runStarted(id: RunID.make(), pipeline: pipeline, args: scriptArgs)
            var groups: ProcessGroups?
            let result = PipelineRunner.run(path: file, options: options) { runtime in
                groups = runtime.processGroups
                if let events {
                    events.runtime = runtime
                    runtime.engine.observers.append(events)
                    runtime.onReload = { file in events.reloaded(file) }
                    runtime.observeRequests { events.request($0) }
                }
                signals.start(runtime)
                status?.attach(runtime.engine)
            }
            status?.finish()
            // Background children a script left behind (`sh -c "x &"`).
            groups?.killAll(grace: 0.5)
            signals.stop()
            // Output that could not be written is an error, not silence.
            var code = result.exitCode
            let stdoutError = StandardStreams.stdoutError()
            if (stdoutError != nil || events?.error != nil) && code < 2 { code = 2 }
            events?.runEnded(result, exitCode: code)
            Summary(result: result).print()
            for e in [stdoutError, events?.error].compactMap({ $0 }) {
                StandardError.write("tasker: error: \(e)\n")
            }
            if events?.error != nil && code < 2 { code = 2 }
            throw ExitCode(code)
        }
    }
}
