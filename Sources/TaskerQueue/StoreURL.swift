import Foundation

/// `--store` URLs. libpq's own parse errors repeat the whole string,
/// password included, so a URL is checked before libpq sees it, and any
/// text libpq returns has the URL and its password replaced by `***`.
public enum StoreURL {
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    static let schemes = ["postgres://", "postgresql://"]

    /// Throws why `url` is not a PostgreSQL URL (showing it with the
    /// password as `***`).
    public static func check(_ url: String) throws(Invalid) {
        guard schemes.contains(where: { url.hasPrefix($0) }) else {
            throw Invalid(description: "--store must be a URL starting with postgres:// or postgresql:// (got \(shown(url)))")
        }
        if url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) {
            throw Invalid(description: "--store must not contain spaces or control characters (percent-encode them, "
                          + "e.g. %20); got \(shown(url))")
        }
        guard url.utf8.count <= 8192 else {
            throw Invalid(description: "--store is \(url.utf8.count) bytes long, more than a URL needs (at most 8192)")
        }
    }

    /// `url` quoted for a message, password hidden, control characters
    /// escaped, cut short when very long.
    static func shown(_ url: String) -> String {
        var out = "'"
        for (i, ch) in redacted(url).unicodeScalars.enumerated() {
            if i == 200 {
                out += "…"
                break
            }
            switch ch.value {
            case 0x0a: out += "\\n"
            case 0x0d: out += "\\r"
            case 0x09: out += "\\t"
            case 0..<0x20, 0x7f: out += "\\x" + String(ch.value, radix: 16, uppercase: true).leftPadded(2)
            default: out.unicodeScalars.append(ch)
            }
        }
        return out + "'"
    }

    /// The URL with its password (`user:PASSWORD@`, `password=` in the
    /// query) as `***`. Works on malformed strings too, erring towards
    /// hiding more: everything between the first `:` of the user part and
    /// the last `@` is hidden.
    public static func redacted(_ url: String) -> String {
        var s = Substring(url)
        var out = ""
        if let at = s.lastIndex(of: "@") {
            let head = s[..<at]
            let userStart = head.range(of: "://")?.upperBound
                ?? head.firstIndex(of: ":").map { head.index(after: $0) } ?? head.startIndex
            if let colon = head[userStart...].firstIndex(of: ":") {
                out += head[...colon] + "***"
                s = s[at...]
            }
        }
        out += passwordParametersHidden(s)
        return out
    }

    /// `password=…` (any case, in a query or a key=value string) as `password=***`.
    private static func passwordParametersHidden(_ s: Substring) -> String {
        var out = ""
        var rest = s
        while let r = rest.range(of: "password=", options: .caseInsensitive) {
            out += rest[..<r.upperBound] + "***"
            rest = rest[r.upperBound...]
            let end = rest.firstIndex { $0 == "&" || $0 == " " || $0 == "#" } ?? rest.endIndex
            rest = rest[end...]
        }
        return out + rest
    }

    /// `text` (a libpq message about `url`) with the URL and its password
    /// hidden, whatever part of it the message repeats.
    public static func redact(_ text: String, url: String) -> String {
        var out = text.replacingAll(url, with: redacted(url))
        if let password = password(in: url) {
            // libpq may read a password with an unencoded delimiter as
            // something else (`u:SECRET/x@h`: host `u`, port `SECRET`) and
            // quote only a piece of it: hide the pieces too.
            var pieces = [password, password.removingPercentEncoding ?? password]
            pieces += password.split(whereSeparator: { "/?#:@&=".contains($0) }).map(String.init)
            for piece in pieces.sorted(by: { $0.count > $1.count }) where piece.count >= 3 {
                out = out.replacingAll(piece, with: "***")
            }
        }
        return passwordParametersHidden(Substring(out))
    }

    /// The password part of a URL as written (between `user:` and the last `@`).
    static func password(in url: String) -> String? {
        guard let at = url.lastIndex(of: "@") else { return nil }
        let head = url[..<at]
        let userStart = head.range(of: "://")?.upperBound
            ?? head.firstIndex(of: ":").map { head.index(after: $0) } ?? head.startIndex
        guard let colon = head[userStart...].firstIndex(of: ":") else { return nil }
        return String(head[head.index(after: colon)...])
    }
}

private extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }

    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: target) {
            out += rest[..<r.lowerBound] + replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}
