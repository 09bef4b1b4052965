/// The lines ssh sends for `ssh.put` and `ssh.get` (see SSHCopyWait). Each
/// runs under `sh -c` with its paths as positional words, so no path is
/// ever parsed by a shell.
enum RemoteCopy {
    /// Hashes stdin or a file, whichever tool the host has.
    private static let hash = "if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < \"$1\"); else h=$(shasum -a 256 < \"$1\"); fi"

    /// Receives stdin into a temp name beside `remote` (same directory, so
    /// the rename is atomic), checks its SHA-256 against `sha256`, sets
    /// `mode`, renames it over `remote`. Whatever goes wrong removes the
    /// temp file first: a TERM from a cancel (the group id is written as a
    /// command's is, for RemoteCommand.killScript), and a local ssh that
    /// dies (stdin ends early: the hash differs). The old file is untouched
    /// until the rename.
    static func put(remote: String, sha256: String, mode: Int, token: String) -> String {
        let f = RemoteCommand.pidFile(token)
        let script = """
            \(RemoteCommand.start(token: token))f=$1; \
            case $f in */*) d=${f%/*}; [ -n "$d" ] || d=/;; *) d=.;; esac; \
            if [ -d "$f" ]; then rm -f \(f); echo "tasker: '$f' is a directory" >&2; exit 3; fi; \
            t="$d/.${f##*/}.tasker-\(token)"; \
            trap 'rm -f "$t" \(f); exit 143' TERM INT HUP PIPE; \
            umask 077; \
            if ! cat > "$t"; then rm -f "$t" \(f); exit 3; fi; \
            sum() { \(hash.replacingOccurrences(of: "$1", with: "$t")); echo "${h%% *}"; }; \
            if [ "$(sum)" != "$2" ]; then rm -f "$t" \(f); echo "tasker: the copy's SHA-256 differs from the local file's (it changed or the copy was cut short)" >&2; exit 4; fi; \
            if ! chmod "$3" "$t" || ! mv -f "$t" "$f"; then rm -f "$t" \(f); exit 5; fi; \
            rm -f \(f)
            """
        return "exec sh -c " + [script, "sh", remote, sha256, String(mode, radix: 8)].map(RemoteCommand.quote).joined(separator: " ")
    }

    /// Writes `remote` to stdout, then its SHA-256 as the last line of
    /// stderr (`tasker-sha256 HEX`).
    static func get(remote: String) -> String {
        let script = """
            if [ -d "$1" ]; then echo "tasker: '$1' is a directory" >&2; exit 3; fi; \
            \(hash) || exit 3; \
            cat < "$1" || exit 3; \
            echo "tasker-sha256 ${h%% *}" >&2
            """
        return "exec sh -c " + [script, "sh", remote].map(RemoteCommand.quote).joined(separator: " ")
    }

    /// The hash `get` reported on `stderr`.
    static func reportedHash(_ stderr: [UInt8]) -> String? {
        let text = String(decoding: stderr.suffix(512), as: UTF8.self)
        guard let line = text.split(whereSeparator: \.isNewline).last(where: { $0.hasPrefix("tasker-sha256 ") }) else { return nil }
        let hex = line.dropFirst("tasker-sha256 ".count)
        return hex.count == 64 ? String(hex) : nil
    }

    /// The words the remote script wrote about a failure, for a message.
    static func reason(_ stderr: [UInt8]) -> String? {
        SSHRun.lastLine(stderr).map { $0.hasPrefix("tasker: ") ? String($0.dropFirst(8)) : $0 }
    }
}
