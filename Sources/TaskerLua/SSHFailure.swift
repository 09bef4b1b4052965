import Foundation
import TaskerCore

extension TaskFailure.Kind {
    public static let ssh = Self(rawValue: "ssh")
}

/// Why ssh could not run a command on a host (kind `ssh`): `code` is
/// `connect`, `auth`, `hostkey` or `timeout`. Read from ssh's exit status
/// 255 and the last lines it wrote, which are its own messages. `copy`:
/// `ssh.put`/`ssh.get` reached the host but the copy failed (its detail
/// says what and why).
struct SSHFailure: Error, Sendable {
    enum Code: String, Sendable {
        case connect, auth, hostkey, timeout, copy
    }

    let code: Code
    let host: String
    /// ssh's own words (its last line), or what tasker saw.
    let detail: String

    var message: String {
        switch code {
        case .connect: "cannot reach '\(host)': \(detail)"
        case .auth: "'\(host)' refused the login: \(detail)"
        case .hostkey: "the host key of '\(host)' is not the known one: \(detail)"
        case .timeout: "'\(host)' did not answer in time: \(detail)"
        case .copy: detail
        }
    }

    /// Pushes the error table (kind `ssh`, `code`, `host`; a refused key or
    /// host key stays refused, so it is `permanent` and a retry skips it).
    func push(onto co: OpaquePointer, runtime: LuaRuntime, where position: String?) {
        runtime.pushErrorTable(co, kind: TaskFailure.Kind.ssh.rawValue, message: message, where: position)
        let s = LuaStack(co)
        s.push(code.rawValue)
        s.rawSet(-2, "code")
        s.push(host)
        s.rawSet(-2, "host")
        if code == .auth || code == .hostkey {
            s.push(true)
            s.rawSet(-2, "permanent")
        }
    }

    /// The failure ssh's `stderr` describes, or nil when it does not read
    /// as one of ssh's own (then exit 255 was the command's).
    static func classify(stderr: [UInt8], host: String) -> SSHFailure? {
        let text = String(decoding: stderr.suffix(4096), as: UTF8.self)
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let lower = text.lowercased()
        func has(_ s: String) -> Bool { lower.contains(s) }
        let code: Code
        if has("host key verification failed") || has("remote host identification has changed")
            || has("host key for") && has("has changed") || has("no matching host key") {
            code = .hostkey
        } else if has("permission denied (") || has("too many authentication failures") || has("no supported authentication methods") {
            code = .auth
        } else if has("timed out") || has("not responding") || has("timeout") {
            code = .timeout
        } else if has("connection refused") || has("no route to host") || has("network is unreachable")
            || has("could not resolve hostname") || has("name or service not known") || has("connection closed by")
            || has("connection reset") || has("kex_exchange_identification") || has("broken pipe")
            || has("temporary failure in name resolution") || lines.last?.hasPrefix("ssh:") == true {
            code = .connect
        } else {
            return nil
        }
        let detail = lines.last(where: { !$0.hasPrefix("@") && !$0.hasPrefix("Warning:") }) ?? lines.last ?? "ssh exited with 255"
        return SSHFailure(code: code, host: host, detail: String(SecretMask.shared.mask(detail).prefix(300)))
    }
}
