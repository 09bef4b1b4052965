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
        "token", "access_token", "refresh_token", "id_token", "auth", "key", "apikey", "api_key", "apitoken",
        "password", "passwd", "pwd", "pass", "passphrase", "secret", "client_secret", "signature", "sig", "session",
        "sessionid", "credential", "credentials", "jwt", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    ]
    static let secretSuffixes = ["_token", "-token", "_key", "-key", "_secret", "-secret",
                                 "_password", "-password", "_signature", "-signature"]
    /// The same words ending a camelCase name (`accessToken`, `clientSecret`).
    static let camelSuffixes = ["Token", "Key", "Secret", "Password", "Signature"]

    public static func isSecretParameter(_ name: String) -> Bool { isNamedSecret(name) || isCamelSecret(name) }

    static func isNamedSecret(_ name: String) -> Bool {
        let n = name.lowercased()
        return secretNames.contains(n) || secretSuffixes.contains(where: { n.hasSuffix($0) })
    }

    /// `accessToken`, `clientSecret`: the word capitalised after the
    /// name's start. Hidden, but not sure to be a secret (`sortKey=name`).
    static func isCamelSecret(_ name: String) -> Bool {
        camelSuffixes.contains { name.hasSuffix($0) && name.count > $0.count }
    }

    /// The URL with `user:password@` and secret query values replaced.
    /// Works on the text, so a malformed URL is redacted too.
    public static func url(_ text: String) -> String { url(text, hiding: { _, _ in }) }

    /// What `hide` is given: each piece of the text replaced by `***`, and
    /// whether it is surely a secret (a URL's password, a secret query
    /// value, the word after `Bearer`) rather than hidden for a name that
    /// looks secret (`--max-tokens 1000`, `sort_key=true`): only sure ones
    /// become secrets of the run (`secrets(arguments:variables:)`).
    typealias Hider = (Substring, _ sure: Bool) -> Void

    static func url(_ text: String, hiding hide: Hider) -> String {
        var s = Substring(text)
        var out = ""
        // scheme://userinfo@host...
        if let schemeEnd = s.range(of: "://") {
            out += s[..<schemeEnd.upperBound]
            s = s[schemeEnd.upperBound...]
            let authorityEnd = s.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? s.endIndex
            if let at = s[..<authorityEnd].lastIndex(of: "@") ?? passwordEnd(s, authorityEnd: authorityEnd) {
                out += "***"
                // `user@`: a user, no secret; `user:password@`: both, and the password alone
                if let colon = s[..<at].firstIndex(of: ":") {
                    hide(s[..<at], true)
                    hide(s[s.index(after: colon)..<at], true)
                }
                s = s[at...]
            }
        }
        let fragmentStart = s.firstIndex(of: "#") ?? s.endIndex
        if let q = s[..<fragmentStart].firstIndex(of: "?") {
            out += s[...q]
            out += parameters(s[s.index(after: q)..<fragmentStart], hiding: hide)
        } else {
            out += s[..<fragmentStart]
        }
        guard fragmentStart < s.endIndex else { return out }
        // `#access_token=…`: a token handed back in the fragment (OAuth)
        let fragment = s[s.index(after: fragmentStart)...]
        return out + "#" + (fragment.contains("=") ? parameters(fragment, hiding: hide) : String(fragment))
    }

    /// `a=1&token=x` with secret-looking values as `***`.
    private static func parameters(_ text: Substring, hiding hide: Hider) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let eq = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<eq]
            let decoded = name.removingPercentEncoding ?? String(name)
            let named = isNamedSecret(decoded)
            guard named || isCamelSecret(decoded) else { return String(pair) }
            hide(pair[pair.index(after: eq)...], named)
            return "\(name)=***"
        }.joined(separator: "&")
    }

    /// A text that should have been a URL and is not (`https//u:pw@h`,
    /// `u:pw@h/x`): without a `://`, whatever comes before its last `@`
    /// could be a password, and is `***`.
    public static func malformedURL(_ text: String) -> String {
        guard !text.contains("://"), let at = text.lastIndex(of: "@") else { return url(text) }
        return url("***" + text[at...])
    }

    /// `user:pa/ss@host`: a password holding `/`, `?` or `#` (unescaped)
    /// ends the authority early, and the `@` comes later. When what follows
    /// the first `:` is not a port, the last `@` ends the password.
    static func passwordEnd(_ s: Substring, authorityEnd: Substring.Index) -> Substring.Index? {
        let authority = s[..<authorityEnd]
        guard !authority.hasPrefix("["), let colon = authority.firstIndex(of: ":"),
              !authority[authority.index(after: colon)...].allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return s.lastIndex(of: "@")
    }

    /// `scheme://host:port`, the port made explicit (80 and 443 by default).
    public static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }
}

/// What tasker records of a run's command line (the journal, the events
/// file's `run` line, so `show` and the report too): the script still gets
/// the real values; the record gets `***` for what looks like a secret.
extension Redaction {
    /// Names of flags and `--var` keys that hold secrets, matched anywhere
    /// in the name, case-insensitively (`GITHUB_TOKEN`, `db_password`,
    /// `apikey`; `monkey` too, the price of catching `sshkey`).
    static let secretParts = ["token", "secret", "passw", "pwd", "bearer", "key", "auth", "credential", "cookie", "dsn"]
    /// Matched only as a whole word of the name (`GITHUB_PAT`, `gh-pat`,
    /// `myPat`): as a substring they would hide `path` and `pattern`.
    static let secretWords: Set<String> = ["pat", "pass", "pw", "sig", "signature", "session"]

    /// Whether a `--var` key or a flag name (without its dashes) names a secret.
    public static func isSecretName(_ name: String) -> Bool {
        let lower = name.lowercased()
        if secretParts.contains(where: { lower.contains($0) }) { return true }
        return words(of: name).contains { secretWords.contains($0) }
    }

    /// `GITHUB_PAT`, `gh-pat`, `myPat` → their lower-cased words.
    static func words(of name: String) -> [String] {
        var words: [String] = [], word = ""
        var previousLower = false
        for c in name {
            if !(c.isLetter || c.isNumber) {
                if !word.isEmpty { words.append(word.lowercased()) }
                word = ""
                previousLower = false
                continue
            }
            if c.isUppercase && previousLower {
                words.append(word.lowercased())
                word = ""
            }
            word.append(c)
            previousLower = c.isLowercase
        }
        if !word.isEmpty { words.append(word.lowercased()) }
        return words
    }

    /// Script arguments as recorded: in each word, URL credentials and
    /// secret query values, `NAME=VALUE` with a secret-looking NAME (also
    /// `--api-token=VALUE`, `password=PW` inside a DSN), and the word after
    /// a bare secret-looking flag (`--token VALUE`), and the word after
    /// `Bearer`, in the same argument or as the next one (`-H Bearer TOKEN`).
    public static func arguments(_ args: [String]) -> [String] { arguments(args, hiding: { _, _ in }) }

    static func arguments(_ args: [String], hiding hide: Hider) -> [String] {
        var out: [String] = []
        out.reserveCapacity(args.count)
        var hideNext = false
        var nextAfterBearer = false
        for arg in args {
            let afterBearerArg = nextAfterBearer
            nextAfterBearer = false
            if hideNext {
                hideNext = false
                if !arg.hasPrefix("--") {
                    out.append("***")
                    hide(Substring(arg), afterBearerArg)
                    continue
                }
            }
            if arg.hasPrefix("-"), !arg.contains("="), arg.count > 1 {
                let name = arg.drop { $0 == "-" }
                if !name.isEmpty, isSecretName(String(name)) { hideNext = true }
            }
            if endsWithBearer(arg) {
                hideNext = true
                nextAfterBearer = true
            }
            out.append(text(arg, hiding: hide))
        }
        return out
    }

    /// `--var` values as recorded: `***` when the key looks secret (an empty
    /// value stays empty: there is nothing to hide), else URL credentials
    /// and `NAME=VALUE` secrets inside the value hidden.
    public static func variables(_ vars: [String: String]) -> [String: String] { variables(vars, hiding: { _, _ in }) }

    static func variables(_ vars: [String: String], hiding hide: Hider) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in vars {
            if isSecretName(k) && !v.isEmpty {
                out[k] = "***"
                hide(Substring(v), false)
            } else {
                out[k] = text(v, hiding: hide)
            }
        }
        return out
    }

    /// What `arguments` and `variables` hide that is surely a secret: a
    /// URL's `user:password` and password, secret query values, the word
    /// after `Bearer`; also percent-decoded. Registered as secrets, they are
    /// masked wherever the script's own messages, logs or values repeat
    /// them. What is hidden for a name that looks secret (`key=prod`,
    /// `--max-tokens 1000`) is hidden in the record only: masking every
    /// "prod" or "1000" of the output (and of stored values) would hide
    /// more than it protects.
    public static func secrets(arguments args: [String], variables vars: [String: String]) -> [String] {
        var found: [String] = []
        let collect: Hider = { piece, sure in
            guard sure else { return }
            let raw = String(piece)
            found.append(raw)
            if let decoded = raw.removingPercentEncoding, decoded != raw { found.append(decoded) }
            // as a form decodes a query value: `+` is a space
            if raw.contains("+"), let form = raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding {
                found.append(form)
            }
        }
        _ = arguments(args, hiding: collect)
        for v in vars.values { _ = text(v, hiding: collect) }
        return found
    }

    /// Free text with its secrets hidden, word by word (words split at
    /// white space): a word `NAME=VALUE` or `--NAME=VALUE` with a
    /// secret-looking NAME becomes `NAME=***`, a word holding `://` is a URL
    /// (`url`), and the word after `Bearer` is `***`.
    public static func text(_ s: String) -> String { text(s, hiding: { _, _ in }) }

    static func text(_ s: String, hiding hide: Hider) -> String {
        let lower = s.lowercased()
        guard s.contains("://") || s.contains("=") || lower.contains("bearer") || lower.contains("authorization:")
                || lower.contains("x-api-key:") || lower.contains("cookie:") else { return s }
        var out = ""
        var rest = Substring(s)
        var state = CredentialState.none
        while !rest.isEmpty {
            let end = rest.firstIndex(where: \.isWhitespace) ?? rest.endIndex
            let word = rest[..<end]
            if !word.isEmpty {
                let bare = word.drop { $0 == "'" || $0 == "\"" }.lowercased()
                switch state {
                case .hideNext:
                    out += "***"
                    hide(word, true)
                    state = .none
                case .afterAuthorization where Self.authorizationSchemes.contains(bare):
                    out += word  // `Authorization: Basic <credential>`: the scheme stays
                    state = .hideNext
                case .afterAuthorization:
                    out += "***"
                    hide(word, true)
                    state = .none
                case .none:
                    out += redactedWord(word, hiding: hide)
                    if bare == "bearer" || bare == "x-api-key:" || bare == "cookie:" {
                        state = .hideNext
                    } else if bare == "authorization:" || bare == "proxy-authorization:" {
                        state = .afterAuthorization
                    }
                }
            }
            rest = rest[end...]
            let next = rest.firstIndex { !$0.isWhitespace } ?? rest.endIndex
            out += rest[..<next]
            rest = rest[next...]
        }
        return out
    }

    /// Where `text` is between words: the next word is a credential (after
    /// `Bearer`, `X-Api-Key:`, `Cookie:`), or may be the scheme before one
    /// (after `Authorization:`).
    private enum CredentialState { case none, hideNext, afterAuthorization }

    /// Words that name how an `Authorization` header's credential is given.
    static let authorizationSchemes: Set<String> = ["bearer", "basic", "token", "digest", "negotiate"]

    /// Whether the last word of `arg` is `Bearer` (any case): the token is
    /// then the next argument.
    private static func endsWithBearer(_ arg: String) -> Bool {
        let trimmed = arg.reversed().drop(while: \.isWhitespace)
        let last = trimmed.prefix { !$0.isWhitespace }
        return last.count == 6 && String(last.reversed()).lowercased() == "bearer"
    }

    private static func redactedWord(_ word: Substring, hiding hide: Hider) -> String {
        let sep = word.range(of: "://")
        if let eq = word.firstIndex(of: "="), sep.map({ eq < $0.lowerBound }) ?? true {
            let name = word[..<eq].drop { $0 == "-" }
            if !name.isEmpty, isSecretName(String(name)) {
                hide(word[word.index(after: eq)...], false)
                return String(word[...eq]) + "***"
            }
        }
        guard sep != nil else { return String(word) }
        // Each URL from its scheme to the next one's (`a=http://…,http://…`);
        // what comes before the first scheme (`--db=`) stays as it is.
        var starts: [Substring.Index] = []
        var from = word.startIndex
        while let r = word[from...].range(of: "://") {
            let start = word[from..<r.lowerBound].lastIndex { !($0.isLetter || $0.isNumber || "+-.".contains($0)) }
                .map { word.index(after: $0) } ?? from
            starts.append(start)
            from = r.upperBound
        }
        var out = String(word[..<starts[0]])
        for (i, start) in starts.enumerated() {
            out += url(String(word[start..<(i + 1 < starts.count ? starts[i + 1] : word.endIndex)]), hiding: hide)
        }
        return out
    }
}
