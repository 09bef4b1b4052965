import Foundation

/// What tasker shows of a URL or header wherever it prints one (messages,
/// the summary, logs, events): credentials and secret-looking query values
/// become `***`.
///
///     Redaction.url("https://alice:pw@h/x?token=abc&q=1")  // "https://***@h/x?token=***&q=1"
public enum Redaction {
    /// Header names whose values are secrets.
    public static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization", "x-api-key"]

    static let secretNames: Set<String> = [
        "token", "access_token", "refresh_token", "id_token", "auth", "key", "apikey", "api_key",
        "password", "passwd", "pwd", "secret", "client_secret", "signature", "sig", "session",
        "sessionid", "credential", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    ]
    static let secretSuffixes = ["_token", "-token", "_key", "-key", "_secret", "-secret",
                                 "_password", "-password", "_signature", "-signature"]

    public static func isSecretParameter(_ name: String) -> Bool {
        let n = name.lowercased()
        return secretNames.contains(n) || secretSuffixes.contains { n.hasSuffix($0) }
    }

    /// The URL with `user:password@` and secret query values replaced.
    /// Works on the text, so a malformed URL is redacted too.
    public static func url(_ text: String) -> String {
        var s = Substring(text)
        var out = ""
        // scheme://userinfo@host...
        if let schemeEnd = s.range(of: "://") {
            out += s[..<schemeEnd.upperBound]
            s = s[schemeEnd.upperBound...]
            let authorityEnd = s.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? s.endIndex
            if let at = s[..<authorityEnd].lastIndex(of: "@") {
                out += "***"
                s = s[at...]
            }
        }
        guard let q = s.firstIndex(of: "?") else { return out + s }
        out += s[...q]
        s = s[s.index(after: q)...]
        let fragmentStart = s.firstIndex(of: "#") ?? s.endIndex
        let query = s[..<fragmentStart]
        out += query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let eq = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<eq]
            let decoded = name.removingPercentEncoding ?? String(name)
            return isSecretParameter(decoded) ? "\(name)=***" : String(pair)
        }.joined(separator: "&")
        return out + s[fragmentStart...]
    }

    /// `scheme://host:port`, the port made explicit (80 and 443 by default).
    public static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }
}
