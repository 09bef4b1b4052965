import Foundation
import Logging
import TaskerCore

/// Writes one line per log record, logfmt by default: UTC date and time,
/// level, the task it came from, the message and its fields sorted by key;
/// values with spaces, quotes or `=` quoted; tables as JSON; secrets as `***`.
/// One call is one line: a message or value holding a line break or another
/// control character is written escaped (a message in quotes, as a value
/// is), so a script's text can neither forge a second line nor drive the
/// terminal.
///
///     2026-11-22T04:41:12.345Z WARN [fetch] slow response ms=1200 url="https://x/a b" ids=[1,2]
///
/// With `format: .json`, one JSON object per line instead:
///
///     {"level":"warn","msg":"slow response","task":"fetch","ts":"2026-11-22T04:41:12.345Z","fields":{"ms":1200}}
public struct LineLogHandler: LogHandler {
    public enum Format: String, Sendable {
        case logfmt, json
    }

    /// Header names whose values never appear in logs or events (and a
    /// response's cookies, logged as its headers).
    public static let secretKeys: Set<String> = ["authorization", "cookie", "proxy-authorization", "x-api-key", "set-cookie"]

    /// Whether a log field's (or a header's) value is written as `***`:
    /// those above, and keys that name a credential (`x-auth-token`,
    /// `private-token`, `password`, `client_secret`, `api_key`).
    public static func isSecretKey(_ key: String) -> Bool {
        let k = key.lowercased()
        if secretKeys.contains(k) || k.hasSuffix("token") || k.contains("secret") || k.contains("passw") { return true }
        // the name without its separators: `private_key`, `privateKey`, `ssh-key`
        let bare = String(k.filter { $0 != "_" && $0 != "-" && $0 != "." })
        return secretNames.contains(bare) || secretEndings.contains { bare.hasSuffix($0) }
    }

    /// Whole names (without separators) that hold a credential.
    static let secretNames: Set<String> = [
        "pwd", "pass", "passphrase", "auth", "bearer", "jwt", "dsn", "credential", "credentials", "session",
        "sessionid", "signature", "sig", "cookie",
    ]
    /// Endings that do (`sort_key` and `cache_key` do not).
    static let secretEndings = ["apikey", "privatekey", "sshkey", "accesskey", "secretkey", "signingkey", "passphrase"]

    private let sink: @Sendable (String) -> Void
    private let jsonSink: @Sendable (String) -> Void
    private let format: Format
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]

    /// `sink` takes logfmt lines; `jsonSink` JSON ones, which it masks so
    /// that they stay JSON (by default the same sink).
    public init(level: Logger.Level, format: Format = .logfmt, sink: @escaping @Sendable (String) -> Void,
                jsonSink: (@Sendable (String) -> Void)? = nil) {
        self.logLevel = level
        self.format = format
        self.sink = sink
        self.jsonSink = jsonSink ?? sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let task = fields.removeValue(forKey: "task").map { "\($0)" }
        switch format {
        case .logfmt: sink(logfmtLine(event, task: task, fields: fields))
        // masked as JSON here (a secret in a number would break the line),
        // and by a sink that masks as JSON too (the plain mask, finding a
        // secret across a quote, broke the line)
        case .json: jsonSink(SecretMask.shared.maskJSON(jsonLine(event, task: task, fields: fields)))
        }
    }

    private func logfmtLine(_ event: LogEvent, task: String?, fields: Logger.Metadata) -> String {
        var line = "\(Self.timestamp()) \(Self.name(event.level))"
        if let task { line += " [\(TerminalText.escape(task, keepTabs: false))]" }
        line += " \(Self.message("\(event.message)"))"
        for key in fields.keys.sorted() {
            line += " \(Self.quoted(key))="
            if Self.isSecretKey(key) {
                line += "***"
            } else if case .stringConvertible(let v as LogJSON) = fields[key]! {
                line += TerminalText.escapingC1(json: v.text)
            } else {
                line += Self.quoted("\(fields[key]!)")
            }
        }
        return line
    }

    private func jsonLine(_ event: LogEvent, task: String?, fields: Logger.Metadata) -> String {
        var w = JSONWriter(.tasker.forTerminal, capacity: 128)
        w.beginObject()
        w.key("level")
        w.string(Self.name(event.level).lowercased())
        w.key("msg")
        w.string("\(event.message)")
        if let task {
            w.key("task")
            w.string(task)
        }
        w.key("ts")
        w.string(Self.timestamp())
        if !fields.isEmpty {
            w.key("fields")
            w.beginObject()
            for key in fields.keys.sorted() {
                w.key(key)
                if Self.isSecretKey(key) {
                    w.string("***")
                } else if case .stringConvertible(let v as LogJSON) = fields[key]! {
                    w.raw(TerminalText.escapingC1(json: v.text))
                } else {
                    w.string("\(fields[key]!)")
                }
            }
            w.endObject()
        }
        w.endObject()
        return w.text
    }

    /// A logfmt value: bare when it can be, else in double quotes.
    static func quoted(_ s: String) -> String {
        let needsQuotes = s.isEmpty || s.unicodeScalars.contains {
            $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || TerminalText.isControl($0)
        }
        return needsQuotes ? json(s) : s
    }

    /// A logfmt message: as it is, or quoted like a value when it holds a
    /// control character (a tab excepted).
    static func message(_ s: String) -> String {
        s.unicodeScalars.contains { TerminalText.isControl($0) && $0 != "\t" } ? json(s) : s
    }

    /// A JSON string literal, control characters (C1 and DEL too) escaped.
    static func json(_ s: String) -> String { TerminalText.jsonQuoted(s) }

    static func name(_ level: Logger.Level) -> String {
        switch level {
        case .trace: "TRACE"
        case .debug: "DEBUG"
        case .info: "INFO"
        case .notice: "NOTE"
        case .warning: "WARN"
        case .error: "ERROR"
        case .critical: "CRIT"
        }
    }

    /// `2026-11-22T04:41:12.345Z`.
    static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var tm = tm()
        var seconds = tv.tv_sec
        gmtime_r(&seconds, &tm)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(tm.tm_year) + 1900, Int(tm.tm_mon) + 1, Int(tm.tm_mday),
                      Int(tm.tm_hour), Int(tm.tm_min), Int(tm.tm_sec), Int(tv.tv_usec / 1000))
    }
}

/// A field value that is JSON text already (a Lua table, a number, a
/// boolean): written as it is in both formats.
public struct LogJSON: CustomStringConvertible, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }
    public var description: String { text }
}
