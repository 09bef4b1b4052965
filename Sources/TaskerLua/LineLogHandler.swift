import Foundation
import Logging

/// Writes one line per log record: time (UTC), level, the task it came
/// from, the message and its fields sorted by key, with secrets shown as `***`.
///
///     04:41:12.345 INFO  [fetch] got 3 items count=3 url=https://example
public struct LineLogHandler: LogHandler {
    /// Header names whose values never appear in logs or events.
    public static let secretKeys: Set<String> = ["authorization", "cookie", "proxy-authorization", "x-api-key"]

    private let sink: @Sendable (String) -> Void
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]

    public init(level: Logger.Level, sink: @escaping @Sendable (String) -> Void) {
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let task = fields.removeValue(forKey: "task").map { "[\($0)] " } ?? ""
        var line = "\(LineLogHandler.timestamp()) \(LineLogHandler.name(event.level)) \(task)\(event.message)"
        for key in fields.keys.sorted() {
            let value = LineLogHandler.secretKeys.contains(key.lowercased()) ? "***" : "\(fields[key]!)"
            line += " \(key)=\(value)"
        }
        sink(line)
    }

    static func name(_ level: Logger.Level) -> String {
        switch level {
        case .trace: "TRACE"
        case .debug: "DEBUG"
        case .info: "INFO "
        case .notice: "NOTE "
        case .warning: "WARN "
        case .error: "ERROR"
        case .critical: "CRIT "
        }
    }

    static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var tm = tm()
        var seconds = tv.tv_sec
        gmtime_r(&seconds, &tm)
        return String(format: "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, Int(tv.tv_usec / 1000))
    }
}
