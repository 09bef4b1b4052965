import Foundation

/// How long a process waits for PostgreSQL to come back, and how it names
/// the server in messages.
public enum StoreOutage {
    /// Seconds without the server after which a coordinator (and a journal
    /// in the store) gives up: 60, or `TASKER_STORE_OUTAGE_LIMIT` (tests
    /// shorten it; a value that is not a positive number is ignored).
    public static let limit: Double = {
        if let text = ProcessInfo.processInfo.environment["TASKER_STORE_OUTAGE_LIMIT"],
           let v = Double(text), v > 0, v.isFinite { return v }
        return 60
    }()

    /// Reconnects wait 0.1 s, then twice as long each time, up to 5 s.
    static let firstBackoff = 0.1
    static let maxBackoff = 5.0

    /// `url` with its password as `***` (`postgres://user:***@host/db`, and
    /// a `password=` parameter), for messages.
    public static func redacted(_ url: String) -> String {
        var s = url
        if let scheme = s.range(of: "://") {
            let rest = s[scheme.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@"),
               let colon = rest[..<at].firstIndex(of: ":") {
                s.replaceSubrange(rest.index(after: colon)..<at, with: "***")
            }
        }
        // `password=…` as a URL parameter or a key=value connection string.
        var out = ""
        var rest = s[...]
        while let r = rest.range(of: "password", options: .caseInsensitive) {
            out += rest[..<r.upperBound]
            rest = rest[r.upperBound...]
            let afterSpaces = rest.drop { $0 == " " }
            guard afterSpaces.first == "=" else { continue }
            let value = afterSpaces.dropFirst().drop { $0 == " " }
            out += rest[..<value.startIndex]
            let end = value.firstIndex { $0 == "&" || $0 == " " || $0 == "#" } ?? value.endIndex
            out += value.startIndex == end ? "" : "***"
            rest = value[end...]
        }
        return out + rest
    }
}
