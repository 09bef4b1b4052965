/// A host as `host=` names it: `[user@]host[:port]` (an IPv6 address with a
/// port in brackets, `[2001:db8::1]:22`), where `host` may be an alias of
/// the ssh_config in use. Checked so that it can never read as an option of
/// ssh's (no leading `-`, no blanks or control characters).
struct SSHDestination: Hashable, Sendable {
    let user: String?
    let host: String
    let port: Int?

    /// `host[:port]` without the user, for `[task@host]` and messages.
    var shown: String {
        guard let port else { return host }
        return (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    /// ssh's arguments naming it, last on its command line.
    var arguments: [String] {
        var out: [String] = []
        if let user { out += ["-l", user] }
        if let port { out += ["-p", String(port)] }
        return out + ["--", host]
    }

    /// The destination `text` names, or why it cannot be one.
    static func parse(_ text: String) -> Result<SSHDestination, SSHUsage> {
        func bad(_ why: String) -> Result<SSHDestination, SSHUsage> {
            .failure(SSHUsage(message: "bad host '\(text)' (\(why); expected [user@]host[:port])"))
        }
        guard !text.isEmpty else { return bad("empty") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
            return bad("blanks or control characters")
        }
        var rest = Substring(text)
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            rest = rest[rest.index(after: at)...]
            guard let u = user, !u.isEmpty, !u.hasPrefix("-") else { return bad("the user is empty or starts with '-'") }
        }
        var host = String(rest)
        var port: Int?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return bad("no closing ']'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { return bad("a port number must follow ']:'") }
                port = p
            }
        } else if rest.filter({ $0 == ":" }).count == 1, let colon = rest.firstIndex(of: ":") {
            host = String(rest[..<colon])
            guard let p = Int(rest[rest.index(after: colon)...]) else { return bad("the port is not a number") }
            port = p
        }
        if let port, !(1...65535).contains(port) { return bad("port \(port) out of range") }
        guard !host.isEmpty, !host.hasPrefix("-") else { return bad("the host is empty or starts with '-'") }
        guard !host.contains(where: { $0 == "[" || $0 == "]" || $0 == "@" || $0 == "/" || $0 == "\\" }) else {
            return bad("it has characters a host name cannot have")
        }
        return .success(SSHDestination(user: user, host: host, port: port))
    }
}

struct SSHUsage: Error {
    let message: String
}
