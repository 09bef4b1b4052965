import Foundation

/// The command line ssh sends for `tasker.exec`/`tasker.sh` on a host, and
/// the one that stops it. ssh hands a command to the user's login shell as
/// one string, so every word is single-quoted (`'` as `'\''`) and the whole
/// runs under `sh -c`, whatever that shell is.
///
/// sshd starts each session's command in a new session, so the shell it
/// runs leads a process group holding the command and its children. The
/// wrapper writes that group's id to a file named by a token of this run;
/// a cancel or timeout runs `killScript` through the same master, which
/// signals the whole group (TERM, then KILL after 2 s): a local ssh that
/// dies leaves the remote side running, since no terminal hangs up.
///
/// A stop can come before the command has started (its session opens
/// late on a loaded host, or the login shell's rc files are slow): then
/// the stop leaves a second file, and the command, which writes its group
/// id first and looks for that file next, exits at once. Each side writes
/// before it looks, so one of them always sees the other.
enum RemoteCommand {
    static func quote(_ s: String) -> String {
        "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Where the group id is kept on the host.
    static func pidFile(_ token: String) -> String { "\"${TMPDIR:-/tmp}/.tasker-\(token).pgid\"" }

    /// Left by a stop that found no group id: the command is not to start.
    static func stopFile(_ token: String) -> String { "\"${TMPDIR:-/tmp}/.tasker-\(token).stop\"" }

    /// How every command run under `token` begins: its group id written,
    /// then an exit if a stop came first.
    static func start(token: String) -> String {
        let f = pidFile(token), s = stopFile(token)
        return "echo $$ > \(f); if [ -e \(s) ]; then rm -f \(f) \(s); exit 143; fi; "
    }

    /// A watchdog beside the command, in its group: when the session that
    /// started it goes away (sshd's process for the connection exits: the
    /// client vanished in a partition, and a stop cannot reach the host),
    /// it ends the group as a stop would (TERM, KILL after 2 s). The TERM it
    /// sends does not end it, so that the KILL follows; a stop's TERM does
    /// at once (it ignored TERM at first, and every stop then waited for
    /// it the whole 2 s). It holds none of the session's pipes, and is
    /// killed when the command ends. The session is gone
    /// when the shell has gone or its parent is no longer the one it
    /// started with (where /proc tells: a parent that died unreaped still
    /// answers a signal), else when that parent cannot be signalled.
    static let watchdog = "( sending=; trap '[ -n \"$sending\" ] || exit 0' TERM; "
        + "while :; do if [ -d /proc/self ]; then [ -r /proc/$$/stat ] || break; "
        + "read -r _ _ _ pp _ < /proc/$$/stat; [ \"$pp\" = \"$PPID\" ] || break; else kill -0 $PPID 2>/dev/null || break; fi; "
        + "sleep 1; done; "
        + "sending=1; kill -s TERM -- -$$ 2>/dev/null; sleep 2; kill -s KILL -- -$$ 2>/dev/null ) </dev/null >/dev/null 2>&1 & tasker_watchdog_=$!; "

    /// What the host writes last on stderr when the command's `cwd` is not
    /// there: the command never ran (`cwdFailure`).
    static let cwdMark = "tasker: cannot enter the cwd: "

    /// The reason a command could not start in its `cwd` on the host, from
    /// what it wrote (exit 1 and `cwdMark`), or nil.
    static func cwdFailure(code: Int, stderr: [UInt8]) -> String? {
        guard code == 1 else { return nil }
        let text = String(decoding: stderr, as: UTF8.self)
        guard let line = text.split(separator: "\n").last, line.hasPrefix(cwdMark) else { return nil }
        return String(line.dropFirst(cwdMark.count))
    }

    /// `argv` run on the host in `cwd` with `env` added.
    static func line(argv: [String], cwd: String?, env: [String: String], token: String) -> String {
        let f = pidFile(token)
        var script = start(token: token)
        if let cwd {
            // said as locally: the reason, and a mark the client knows
            let d = quote(cwd)
            script += "cd \(d) 2>/dev/null || { rm -f \(f); if [ ! -e \(d) ]; then r='No such file or directory'; "
                + "elif [ ! -d \(d) ]; then r='Not a directory'; else r='Permission denied'; fi; "
                + "printf '%s%s\\n' \(quote(Self.cwdMark)) \"$r\" >&2; exit 1; }; "
        }
        for (k, v) in env.sorted(by: { $0.key < $1.key }) { script += "export \(k)=\(quote(v)); " }
        script += watchdog
        script += argv.map(quote).joined(separator: " ")
        script += "; s=$?; kill -s KILL $tasker_watchdog_ 2>/dev/null; rm -f \(f); exit $s"
        return "exec sh -c " + quote(script)
    }

    /// Ends the command of `token` and its children: without a group id
    /// yet, leaves the stop file and looks again (the command may have
    /// written it meanwhile). A command that had already ended never takes
    /// its stop file, so stop files over an hour old go then. The group id
    /// file goes only after the kill: a second stop at the same time (a
    /// second signal's) finds it and signals a group that is gone, rather
    /// than leave a stop file. TERM (and CONT, should it be stopped), KILL
    /// after 2 s if any is left. Zombies
    /// do not count (where nothing reaps orphans, as in some containers,
    /// they stay in the group): `ps` tells them apart where it exists.
    static func killScript(token: String) -> String {
        let f = pidFile(token), s = stopFile(token)
        let script = """
            alive() { if command -v ps >/dev/null 2>&1; then \
            ps -eo pgid=,stat= | awk -v p="$p" '$1 == p && $2 !~ /^Z/ { f = 1 } END { exit !f }'; \
            else kill -0 -$p 2>/dev/null; fi; }; \
            sweep() { find "${TMPDIR:-/tmp}/" -maxdepth 1 -name '.tasker-*.stop' -mmin +60 -exec rm -f {} + 2>/dev/null; }; \
            if [ ! -e \(f) ]; then : > \(s); [ -e \(f) ] || { sweep; exit 0; }; rm -f \(s); fi; \
            i=0; while [ ! -s \(f) ] && [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done; \
            p=$(cat \(f) 2>/dev/null); \
            case "$p" in ''|*[!0-9]*) rm -f \(f); exit 0;; esac; \
            kill -s TERM -- -$p 2>/dev/null; kill -s CONT -- -$p 2>/dev/null; \
            i=0; while alive && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; \
            kill -s KILL -- -$p 2>/dev/null; rm -f \(f); exit 0
            """
        return "exec sh -c " + quote(script)
    }

    /// Sends `signal` (STOP, CONT) to the command's group, if it runs.
    static func signalScript(token: String, signal: String) -> String {
        let f = pidFile(token)
        return "exec sh -c " + quote("p=$(cat \(f) 2>/dev/null); case \"$p\" in ''|*[!0-9]*) exit 0;; esac; kill -s \(signal) -- -$p 2>/dev/null; exit 0")
    }

    /// An environment variable name a shell can export.
    static func isName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else { return false }
        return s.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }
}
