import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Real SSH hosts for the tests: one `sshd` (Debian `openssh-server`) per
/// host. As root, each host is a network namespace with a veth pair
/// (10.A.k.2 inside, 10.A.k.1 outside), so `setLink(k, up: false)` takes
/// it off the network; otherwise each is an sshd on 127.0.0.k and a port of
/// its own (and a host cannot be taken down). Host keys, a client key, a
/// known_hosts file and an ssh_config (`Host h1` … with HostName, Port,
/// User, IdentityFile, UserKnownHostsFile, StrictHostKeyChecking yes) are
/// made per set in a temp directory. `shared` serves every test of the
/// process and goes at exit; `make(count:)` is a set of the caller's own,
/// which it `destroy()`s. Namespaces and sshds of a test process that died
/// are removed by the next one.
public final class SSHTestHosts: Sendable {
    public struct Host: Sendable {
        /// The alias in `configFile` (`h1`, `h2`, …).
        public let name: String
        public let address: String
        public let port: Int
        /// The outside end of the veth pair (nil without namespaces).
        public let link: String?
        public let hostKeyLine: String
    }

    public let hosts: [Host]
    public let dir: String
    /// The ssh_config naming every host.
    public let configFile: String
    public let knownHosts: String
    public let clientKey: String
    /// Whether hosts are network namespaces (else loopback ports).
    public let namespaces: Bool
    private let namespaceNames: [String]
    private let pids: [Int32]

    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    public static let sshd = "/usr/sbin/sshd"
    /// sshd and ssh-keygen are there (scripts/install-deps installs them).
    public static var installed: Bool {
        FileManager.default.isExecutableFile(atPath: sshd) && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh")
    }

    /// Five hosts every test of the process may use (none takes them down).
    public static let shared: Result<SSHTestHosts, StartError> = Result { () throws(StartError) in
        let hosts = try SSHTestHosts(count: 5, tag: "s")
        atexit {
            if case .success(let h) = SSHTestHosts.shared { h.destroy() }
        }
        return hosts
    }

    /// The shared hosts, started on a thread of their own (the first start
    /// takes a moment; cooperative threads are few).
    public static func get() async throws -> SSHTestHosts {
        try await onThread { () throws(StartError) in try shared.get() }
    }

    /// Hosts of the caller's own (for a test that takes one down), each
    /// sshd given `sshdConfig` lines too (a `ForceCommand` that makes
    /// sessions start late, say).
    public static func make(count: Int, sshdConfig: String = "") async throws -> SSHTestHosts {
        try await onThread { () throws(StartError) in try SSHTestHosts(count: count, tag: "i", sshdConfig: sshdConfig) }
    }

    private static func onThread(_ body: @escaping @Sendable () throws(StartError) -> SSHTestHosts) async throws -> SSHTestHosts {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do throws(StartError) { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
            }.start()
        }
    }

    private static let counter = Counter()

    private init(count: Int, tag: String, sshdConfig: String = "") throws(StartError) {
        guard Self.installed else { throw StartError(description: "openssh-server is not installed (scripts/install-deps installs it)") }
        Self.removeLeftovers()
        let serial = Self.counter.next()
        let pid = Int(getpid())
        dir = "/tmp/tkssh-\(pid)-\(tag)\(serial)"
        try? FileManager.default.removeItem(atPath: dir)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        clientKey = dir + "/client"
        knownHosts = dir + "/known_hosts"
        configFile = dir + "/ssh_config"
        guard Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", clientKey]).0 == 0 else {
            throw StartError(description: "ssh-keygen failed")
        }
        try? FileManager.default.copyItem(atPath: clientKey + ".pub", toPath: dir + "/authorized_keys")
        _ = Self.run("/bin/mkdir", ["-p", "/run/sshd"])
        // As root, namespaces; a process that cannot make one says so.
        // TASKER_TEST_SSH_LOOPBACK=1 tries the fallback as root too.
        let loopbackOnly = ProcessInfo.processInfo.environment["TASKER_TEST_SSH_LOOPBACK"] == "1"
        let useNamespaces = getuid() == 0 && !loopbackOnly && Self.run("/usr/sbin/ip", ["netns", "add", "tkh\(pid)\(tag)\(serial)probe"]).0 == 0
        if useNamespaces { _ = Self.run("/usr/sbin/ip", ["netns", "del", "tkh\(pid)\(tag)\(serial)probe"]) } else {
            print("SSHTestHosts: no network namespaces here (not root, or ip netns failed): one sshd per host on 127.0.0.x ports; hosts cannot be taken down")
        }
        namespaces = useNamespaces
        // 10.A.k.0/24 per host, A from the pid and set, so concurrent test processes differ
        let a = 100 + (pid * 7 + serial * 31) % 150
        var hosts: [Host] = [], names: [String] = [], pids: [Int32] = []
        var failure: String?
        for k in 1...count {
            let hostDir = dir + "/h\(k)"
            try? FileManager.default.createDirectory(atPath: hostDir, withIntermediateDirectories: true)
            _ = Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostDir + "/hostkey"])
            let pub = ((try? String(contentsOfFile: hostDir + "/hostkey.pub", encoding: .utf8)) ?? "")
                .split(separator: " ").prefix(2).joined(separator: " ")
            let address: String, port: Int, link: String?
            var prefix: [String] = []
            if useNamespaces {
                let ns = "tkh\(pid)\(tag)\(serial)n\(k)"
                let outside = "tk\(pid % 100000)\(tag)\(serial)o\(k)", inside = "tk\(pid % 100000)\(tag)\(serial)i\(k)"
                address = "10.\(a).\(k).2"
                port = 22
                link = outside
                names.append(ns)
                let ip = "/usr/sbin/ip"
                for args in [["netns", "add", ns], ["link", "add", outside, "type", "veth", "peer", "name", inside],
                             ["link", "set", inside, "netns", ns], ["addr", "add", "10.\(a).\(k).1/24", "dev", outside],
                             ["link", "set", outside, "up"], ["-n", ns, "addr", "add", "\(address)/24", "dev", inside],
                             ["-n", ns, "link", "set", inside, "up"], ["-n", ns, "link", "set", "lo", "up"]] {
                    let (status, out) = Self.run(ip, args)
                    if status != 0 && failure == nil { failure = "ip \(args.joined(separator: " ")): \(out)" }
                }
                prefix = [ip, "netns", "exec", ns]
            } else {
                address = "127.0.0.\(k + 1)"
                port = Self.freePort(address)
                link = nil
            }
            // SHLVL=1: bash, the login shell sshd runs each command with,
            // reads ~/.bashrc when started by sshd at level 1 only. A
            // machine's root may run slow things there (pyenv's rehash
            // takes a lock, and one left by a killed session made every
            // later session wait 60 s for it); the tests' commands need none.
            let config = """
                SetEnv SHLVL=1
                Port \(port)
                ListenAddress \(address)
                HostKey \(hostDir)/hostkey
                AuthorizedKeysFile \(dir)/authorized_keys
                PidFile none
                StrictModes no
                UsePAM no
                PrintMotd no
                PrintLastLog no
                PermitRootLogin prohibit-password
                MaxSessions 100
                MaxStartups 100
                LogLevel VERBOSE
                \(sshdConfig)

                """
            try? config.write(toFile: hostDir + "/sshd_config", atomically: true, encoding: .utf8)
            let argv = prefix + [Self.sshd, "-D", "-e", "-f", hostDir + "/sshd_config"]
            let started = Self.runBackground(argv, log: hostDir + "/sshd.log", pidFile: hostDir + "/sshd.pid")
            pids.append(started)
            hosts.append(Host(name: "h\(k)", address: address, port: port, link: link,
                              hostKeyLine: (port == 22 ? address : "[\(address)]:\(port)") + " " + pub))
        }
        self.hosts = hosts
        self.namespaceNames = names
        self.pids = pids
        if let failure {
            destroy()
            throw StartError(description: failure)
        }
        try? hosts.map(\.hostKeyLine).joined(separator: "\n").appending("\n").write(toFile: knownHosts, atomically: true, encoding: .utf8)
        try? configText(knownHosts: knownHosts).write(toFile: configFile, atomically: true, encoding: .utf8)
        // Ready when each accepts a connection (polled, bounded).
        for h in hosts where !Self.waitForListener(h.address, h.port, seconds: 20) {
            let log = (try? String(contentsOfFile: dir + "/\(h.name)/sshd.log", encoding: .utf8)) ?? ""
            destroy()
            throw StartError(description: "sshd of \(h.name) did not listen on \(h.address):\(h.port): \(log.suffix(1000))")
        }
    }

    /// An ssh_config for these hosts, with `knownHosts` as the known hosts
    /// (a test may give a file of its own: a changed key, none at all) and
    /// `identity` as the key. Keep-alives every `alive` seconds, the
    /// connection given up after `aliveCount` unanswered (lenient by
    /// default: a loaded machine must not drop a master; a test that takes
    /// a host down asks for less). The connect timeout is lenient too: on a
    /// loaded CI machine an sshd took over 5 s to answer.
    public func configText(knownHosts: String, identity: String? = nil, alive: Int = 2, aliveCount: Int = 5,
                           connectTimeout: Int = 30) -> String {
        hosts.map { h in
            """
            Host \(h.name)
              HostName \(h.address)
              Port \(h.port)
              User \(NSUserName())
              IdentityFile \(identity ?? clientKey)
              IdentitiesOnly yes
              UserKnownHostsFile \(knownHosts)
              GlobalKnownHostsFile /dev/null
              StrictHostKeyChecking yes
              ConnectTimeout \(connectTimeout)
              ServerAliveInterval \(alive)
              ServerAliveCountMax \(aliveCount)

            """
        }.joined()
    }

    /// The end of a host's sshd log (VERBOSE), for a failing test to show.
    public func logTail(_ name: String, bytes: Int = 3000) -> String {
        let log = (try? String(contentsOfFile: dir + "/\(name)/sshd.log", encoding: .utf8)) ?? ""
        return "sshd log of \(name):\n" + String(log.suffix(bytes))
    }

    /// Takes a host off the network (its outside link down) or back.
    @discardableResult
    public func setLink(_ host: Host, up: Bool) -> Bool {
        guard let link = host.link else { return false }
        return Self.run("/usr/sbin/ip", ["link", "set", link, up ? "up" : "down"]).0 == 0
    }

    /// Stops every sshd (and what runs under it) and removes the namespaces and files.
    public func destroy() {
        // only if it is still our sshd (a pid is reused once its process is gone)
        for pid in pids where pid > 0 {
            let cmdline = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
            if cmdline.contains(dir) { kill(pid, SIGTERM) }
        }
        for ns in namespaceNames {
            // whatever a test left running on the host
            let (_, out) = Self.run("/usr/sbin/ip", ["netns", "pids", ns])
            for p in out.split(whereSeparator: \.isNewline).compactMap({ Int32($0) }) { kill(p, SIGKILL) }
            _ = Self.run("/usr/sbin/ip", ["netns", "del", ns])
        }
        for h in hosts { if let link = h.link { _ = Self.run("/usr/sbin/ip", ["link", "del", link]) } }
        try? FileManager.default.removeItem(atPath: dir)
        Self.removeStaleGroupFiles()
    }

    /// The hosts share this machine's /tmp: the files where remote commands
    /// keep their process group (tasker removes them as a command ends) are
    /// left by commands killed with their host. Those whose group is gone go.
    private static func removeStaleGroupFiles() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/tmp") else { return }
        for name in names where name.hasPrefix(".tasker-") && (name.hasSuffix(".pgid") || name.hasSuffix(".stop")) {
            let path = "/tmp/" + name
            // a stop's file is for a command that started late or had ended (RemoteCommand)
            if name.hasSuffix(".stop") {
                if let made = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                   made.timeIntervalSinceNow < -60 { try? FileManager.default.removeItem(atPath: path) }
                continue
            }
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            // alive: its leader is there and not a zombie (nothing reaps orphans in some containers)
            if let pgid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
               let stat = try? String(contentsOfFile: "/proc/\(pgid)/stat", encoding: .utf8),
               let close = stat.lastIndex(of: ")"), !stat[close...].hasPrefix(") Z") { continue }
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Namespaces and files of test processes that are gone (killed before
    /// their exit handlers ran).
    private static func removeLeftovers() {
        guard getuid() == 0 else { return }
        let (_, out) = run("/usr/sbin/ip", ["netns", "list"])
        for line in out.split(whereSeparator: \.isNewline) {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix("tkh") else { continue }
            let digits = name.dropFirst(3).prefix { $0.isNumber }
            guard let pid = Int32(digits), kill(pid, 0) != 0 else { continue }
            let (_, pids) = run("/usr/sbin/ip", ["netns", "pids", name])
            for p in pids.split(whereSeparator: \.isNewline).compactMap({ Int32($0) }) { kill(p, SIGKILL) }
            _ = run("/usr/sbin/ip", ["netns", "del", name])
        }
    }

    private static func waitForListener(_ address: String, _ port: Int, seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr(address)
            addr.sin_port = UInt16(port).bigEndian
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            close(fd)
            if ok { return true }
            usleep(20_000)
        }
        return false
    }

    private static func freePort(_ address: String) -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(address)
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Runs a command and waits, its output captured (system(3), with no
    /// descriptor of this process but 0-2: see PostgresTestServer.run).
    @discardableResult
    public static func run(_ path: String, _ args: [String]) -> (Int32, String) {
        let file = "/tmp/tkssh-out-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let status = system(shellLine([path] + args) + " </dev/null >" + file + " 2>&1")
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        return (status == 0 ? 0 : max(1, status >> 8), text)
    }

    /// Starts a daemon in the background (its output to `log`); its pid.
    private static func runBackground(_ argv: [String], log: String, pidFile: String) -> Int32 {
        let status = system(shellLine(argv, background: true) + " </dev/null >" + log + " 2>&1 & echo $! > " + pidFile)
        guard status == 0, let text = try? String(contentsOfFile: pidFile, encoding: .utf8) else { return 0 }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    private static func shellLine(_ argv: [String], background: Bool = false) -> String {
        let closeInherited = #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec "$@""#
        let words = ["/bin/bash", "-c", closeInherited, "bash"] + argv
        return words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    }
}

private final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
