import ArgumentParser
import Foundation
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

        @Option(name: .long, help: "Write one JSON object per event to this file.")
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
            for v in vars where !v.contains("=") {
                throw ValidationError("--var expects key=value (got '\(v)')")
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
                events = try self.events.map(EventsWriter.init(path:))
            } catch {
                throw ValidationError("cannot write the events file '\(self.events ?? "")'")
            }
            let result = PipelineRunner.run(path: file, options: options) { runtime in
                if let events {
                    runtime.engine.observers.append(events)
                    runtime.onReload = { file in events.reloaded(file) }
                }
                signals.start(runtime)
                status?.attach(runtime.engine)
            }
            status?.finish()
            signals.stop()
            fflush(nil)  // Lua's print writes through C stdio
            Summary(result: result).print()
            throw ExitCode(result.exitCode)
        }
    }
}
