import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL for the tests: a cluster made with `initdb` in a temp
/// directory (as the `postgres` user when the tests run as root: initdb
/// refuses root), listening on 127.0.0.1 on a free port. One per test
/// process, started on first use and stopped when the process exits; each
/// test takes a database of its own (`freshDatabase`).
public final class PostgresTestServer: Sendable {
    public let port: Int
    public let dataDir: String
    private let root: String
    private let stopCommand: [String]
    /// pg_ctl as the server's user, and the options it starts the server with.
    private let pgCtl: [String]
    private let options: String
    /// The server, or why it did not start.
    public static let shared: Result<PostgresTestServer, StartError> = Result { () throws(StartError) in try PostgresTestServer() }

    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    private static func binDir() -> String? {
        let base = "/usr/lib/postgresql"
        guard let versions = try? FileManager.default.contentsOfDirectory(atPath: base) else { return nil }
        for v in versions.sorted(by: >) where FileManager.default.isExecutableFile(atPath: "\(base)/\(v)/bin/initdb") {
            return "\(base)/\(v)/bin"
        }
        return nil
    }

    /// A server of the caller's own (`isolated()`), or the shared one.
    private init(root: String, removeAtExit: Bool) throws(StartError) {
        guard let bin = Self.binDir() else {
            throw StartError(description: "PostgreSQL is not installed (scripts/install-deps installs it)")
        }
        self.root = root
        try? FileManager.default.removeItem(atPath: root)
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw StartError(description: "cannot create \(root): \(error)")
        }
        dataDir = root + "/data"
        let asRoot = getuid() == 0
        if asRoot { _ = Self.run("/bin/chown", ["postgres:postgres", root]) }
        let prefix = asRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : []
        func pg(_ tool: String, _ args: [String]) -> (Int32, String) {
            let all = prefix + ["\(bin)/\(tool)"] + args
            return Self.run(all[0], Array(all.dropFirst()))
        }
        let (s1, o1) = pg("initdb", ["-D", dataDir, "-A", "trust", "-U", "tasker", "--no-sync", "-E", "UTF8"])
        guard s1 == 0 else {
            throw StartError(description: "initdb failed: \(o1)")
        }
        let ctl = prefix + ["\(bin)/pg_ctl", "-D", dataDir]
        pgCtl = ctl
        stopCommand = ctl + ["-m", "immediate", "stop"]
        // A free port can be taken by another test's server between the
        // probe and the bind: then another port.
        var started: (port: Int, options: String)?
        var failure = ""
        for _ in 1...4 where started == nil {
            let port = Self.freePort()
            let options = "-p \(port) -k \(root) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200"
            let all = ctl + ["-o", options, "-l", root + "/log", "-w", "start"]
            let (status, output) = Self.run(all[0], Array(all.dropFirst()))
            if status == 0 { started = (port, options) } else { failure = output }
        }
        guard let started else {
            let log = (try? String(contentsOfFile: root + "/log", encoding: .utf8)) ?? ""
            throw StartError(description: "pg_ctl start failed: \(failure)\(log.suffix(2000))")
        }
        port = started.port
        options = started.options
        guard removeAtExit else { return }
        // The server goes when the tests go (it is theirs alone).
        atexit {
            guard case .success(let server) = PostgresTestServer.shared else { return }
            server.destroy()
        }
    }

    private convenience init() throws(StartError) {
        try self.init(root: "/tmp/tasker-pg-\(getpid())", removeAtExit: true)
    }

    /// A server of the caller's own, for a test that stops or restarts it
    /// (the shared one serves every other test at the same time). The
    /// caller `destroy()`s it.
    public static func isolated() async throws -> PostgresTestServer {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do throws(StartError) {
                    let root = "/tmp/tasker-pg-\(getpid())-\(UUID().uuidString.prefix(8).lowercased())"
                    continuation.resume(returning: try PostgresTestServer(root: root, removeAtExit: false))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    private func pgCtlRun(_ args: [String]) -> (Int32, String) {
        let all = pgCtl + args
        return Self.run(all[0], Array(all.dropFirst()))
    }

    /// `pg_ctl restart -m fast`: every connection is closed, the server is
    /// back once this returns.
    @discardableResult
    public func restart() -> Bool { pgCtlRun(["-o", options, "-l", root + "/log", "-m", "fast", "-w", "restart"]).0 == 0 }

    /// The end of the server's log (for a failing test's message).
    public func logTail(_ bytes: Int = 3000) -> String {
        String(((try? String(contentsOfFile: root + "/log", encoding: .utf8)) ?? "").suffix(bytes))
    }

    /// `pg_ctl stop -m fast`, and `start` again.
    @discardableResult
    public func stop() -> Bool { pgCtlRun(["-m", "fast", "-w", "stop"]).0 == 0 }

    /// Stops (`SIGSTOP`) or continues (`SIGCONT`) the server and all its
    /// processes: a server that keeps its connections and answers nothing.
    public func freeze(_ frozen: Bool) {
        guard let first = try? String(contentsOfFile: dataDir + "/postmaster.pid", encoding: .utf8)
            .split(separator: "\n").first, let pid = Int32(first) else { return }
        let sig = frozen ? SIGSTOP : SIGCONT
        if frozen { kill(pid, sig) }
        _ = Self.run("/usr/bin/pkill", [frozen ? "-STOP" : "-CONT", "-P", String(pid)])
        if !frozen { kill(pid, sig) }
    }

    /// `pg_ctl stop -m immediate`: a crash, as far as the data goes (what
    /// was committed without a flush may be lost).
    @discardableResult
    public func crash() -> Bool { pgCtlRun(["-m", "immediate", "-w", "stop"]).0 == 0 }

    @discardableResult
    public func start() -> Bool { pgCtlRun(["-o", options, "-l", root + "/log", "-w", "start"]).0 == 0 }

    /// Starts the server on its Unix socket only: clients of `url()` (TCP)
    /// still find it away, while `psqlOnSocket` can change what it holds.
    @discardableResult
    public func startOnSocketOnly() -> Bool {
        pgCtlRun(["-o", options + " -c listen_addresses=''", "-l", root + "/log", "-w", "start"]).0 == 0
    }

    /// `psql` through the Unix socket (see `startOnSocketOnly`).
    public func psqlOnSocket(_ sql: String) -> String {
        Self.run("\(Self.binDir()!)/psql", ["-qAt", "-h", root, "-p", "\(port)", "-U", "tasker", "-d", "postgres", "-c", sql]).1
    }

    /// Stops the server at once and removes its files.
    public func destroy() {
        let c = stopCommand
        _ = Self.run(c[0], Array(c.dropFirst()))
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The server; fails the calling test with why it could not start.
    public static func get() throws(StartError) -> PostgresTestServer { try shared.get() }

    /// The same, and a new empty database, from an async test: the waiting
    /// (seconds for the first start) happens on a thread of its own, not on
    /// one of the few cooperative threads every other test needs to move.
    public static func freshDatabase() async throws -> (server: PostgresTestServer, url: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let server = try get()
                    continuation.resume(returning: (server, server.freshDatabase()))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    public func url(database: String = "postgres") -> String {
        "postgres://tasker@127.0.0.1:\(port)/\(database)"
    }

    /// A new empty database; its URL.
    public func freshDatabase() -> String {
        let name = "t_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        let bin = Self.binDir()!
        _ = Self.run("\(bin)/psql", ["-q", "-h", "127.0.0.1", "-p", "\(port)", "-U", "tasker", "-d", "postgres",
                                     "-c", "CREATE DATABASE \(name)"])
        return url(database: name)
    }

    /// Runs SQL with psql and returns its unaligned output (tests look).
    public func psql(_ url: String, _ sql: String) -> String {
        Self.run("\(Self.binDir()!)/psql", ["-qAt", url, "-c", sql]).1
    }

    /// Ports handed out in this process: a stopped server's port is free
    /// again, and another test's new server must not take it (the first
    /// test's clients, reconnecting, would find a stranger's cluster there:
    /// seen as a run that outlived its server's stop, its jobs queued again
    /// on the other test's server).
    private static let handedOut = Mutex<Set<Int>>([])

    private static func freePort() -> Int {
        while true {
            let port = probePort()
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
    }

    private static func probePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Runs a command through the shell and waits (system(3), not
    /// Foundation's Process: the server pg_ctl starts inherits a descriptor
    /// Process watches, and Process would wait for the server to end).
    ///
    /// The command keeps no descriptor of this process but 0-2. system(3)
    /// forks with every descriptor open at that moment, and Foundation's
    /// pipes are not close-on-exec: a pipe another test had just made for a
    /// child's output would stay open in the server until the test process
    /// ends, and that test would wait for its end forever. bash, not sh:
    /// dash cannot name a descriptor above 9.
    @discardableResult
    public static func run(_ path: String, _ args: [String]) -> (Int32, String) {
        let file = NSTemporaryDirectory() + "tasker-pg-out-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let closeInherited = #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec "$@""#
        let words = ["/bin/bash", "-c", closeInherited, "bash", path] + args
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let status = system(quoted.joined(separator: " ") + " </dev/null >" + file + " 2>&1")
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        return (status == 0 ? 0 : max(1, status >> 8), text)
    }
}
