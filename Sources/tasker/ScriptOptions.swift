import ArgumentParser
import TaskerCore
import TaskerHTTP
import TaskerLua

/// What `run` and `worker` both give the script: `--var`, `--log-level`,
/// `--log-format`, checked and applied the same way.
struct ScriptOptions: ParsableArguments {
    @Option(name: .customLong("var"), help: ArgumentHelp("Set tasker.vars.KEY to VALUE.", valueName: "key=value"))
    var vars: [String] = []

    @Option(name: .long, help: "debug, info, warn or error.")
    var logLevel: String = "info"

    @Option(name: .long, help: "Log lines as logfmt (the default) or json (one object per line).")
    var logFormat: String = "logfmt"

    func validate() throws {
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
        guard LineLogHandler.Format(rawValue: logFormat) != nil else {
            throw ValidationError("--log-format must be logfmt or json (got '\(logFormat)')")
        }
    }

    func apply(to options: inout LuaRuntime.Options) {
        options.logLevel = switch logLevel {
        case "debug": .debug
        case "warn": .warning
        case "error": .error
        default: .info
        }
        options.logFormat = LineLogHandler.Format(rawValue: logFormat) ?? .logfmt
        for v in vars {
            let parts = v.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            options.vars[String(parts[0])] = String(parts[1])
        }
        // a URL's password or a secret query value given here is masked in
        // every output, not only in the run's record
        for secret in Redaction.secrets(arguments: [], variables: options.vars) { SecretMask.shared.register(secret) }
    }
}
