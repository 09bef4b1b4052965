import Foundation
import Synchronization

/// The process groups a run started (every `exec`/`sh` child leads its
/// own). A shell may leave background children behind (`sleep 60 &`), and a
/// second Ctrl-C cuts the SIGTERM grace short: at the end of the run, and on
/// a second signal, every group still alive is killed. Shared with the
/// signal thread, hence the lock.
public final class ProcessGroups: Sendable {
    private let groups = Mutex(Set<pid_t>())
    /// Whether the run ever started a process (most runs never do: then the
    /// end of the run does not scan /proc).
    private let spawned = Atomic<Bool>(false)

    public init() {}

    func started(_ pgid: pid_t) {
        let closed = groups.withLock { g -> Bool in
            if self.closed.load(ordering: .relaxed) { return true }
            g.insert(pgid)
            return false
        }
        // spawned as the process was ending (a second signal): killed too
        if closed { killpg(pgid, SIGKILL) }
    }

    /// Set by `killAllForExit` under the lock: a group started later is
    /// killed as soon as it is recorded.
    private let closed = Atomic<Bool>(false)

    /// A second signal came: the process is about to exit.
    var isExiting: Bool { closed.load(ordering: .relaxed) }

    /// Who ends the process: nobody yet (0), a second signal's exit (1),
    /// or the run's own end (2). Taken once; the loser does not race the
    /// winner out of the process.
    private let exitOwner = Atomic<Int>(0)

    /// For the thread that would end the process the usual way: if a
    /// second signal's exit is under way (stops still to send), it waits
    /// for that exit (which never returns) instead of cutting it short;
    /// otherwise the process is its to end, and a later second signal
    /// only kills what is left (the run has ended: its stops were sent).
    public func endOrAwaitSignalExit() {
        guard !exitOwner.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged else { return }
        while true { pause() }
    }

    /// Runs `spawn` unless the process is ending: under the lock that
    /// `killAllForExit` takes, so no child is half-started (still in
    /// tasker's own group, where the kill would miss it) when that kills.
    func spawning(_ spawn: () throws(ProcessSpawner.SpawnError) -> ProcessSpawner.Child)
        throws(ProcessSpawner.SpawnError) -> ProcessSpawner.Child {
        spawned.store(true, ordering: .relaxed)
        return try groups.withLock { _ throws(ProcessSpawner.SpawnError) -> ProcessSpawner.Child in
            guard !closed.load(ordering: .relaxed) else {
                throw ProcessSpawner.SpawnError(message: "not started: tasker is exiting")
            }
            return try spawn()
        }
    }

    /// The second signal: no group may outlive the process, also one the
    /// loop thread starts while this runs; and every remote command still
    /// running is sent its stop.
    public func killAllForExit() {
        let ours = exitOwner.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
        groups.withLock { _ in closed.store(true, ordering: .relaxed) }
        // Taken first: the loop goes on meanwhile, and a local ssh killed
        // below would, as it is reaped, take its command's stop away.
        let stops = remoteStops.withLock { s in defer { s.removeAll() }; return Array(s.values) }
        killAll(grace: 0)
        // a child spawned while the first pass scanned /proc
        killAll(grace: 0)
        if ours { sendRemoteStops(stops) }
    }

    /// Remote commands running, by token: the command line (`ssh … kill
    /// script`) that stops each on its host. Killing the local ssh does not
    /// end a remote command (no terminal hangs up), and a stop the first
    /// signal sent may have been killed with the local groups before it
    /// reached the host.
    private let remoteStops = Mutex([String: [String]]())

    func remoteStarted(_ token: String, stop: [String]) { remoteStops.withLock { $0[token] = stop } }
    func remoteEnded(_ token: String) { _ = remoteStops.withLock { $0.removeValue(forKey: token) } }

    /// A shell line that closes the run's ssh masters and removes their
    /// directory (SSHModule keeps it current): what the run's end does,
    /// for an exit at a second signal, where the run has no end.
    private let sshCleanup = Mutex<String?>(nil)

    func setSSHCleanup(_ line: String?) { sshCleanup.withLock { $0 = line } }

    /// Starts every remote stop, not waited for and in no group of the run:
    /// they outlive tasker for the few seconds they take (a stop the host
    /// already got finds nothing left to stop). The masters they go
    /// through are closed once they are done (at most 10 s later).
    private func sendRemoteStops(_ stops: [[String]]) {
        var pids: [pid_t] = []
        for argv in stops {
            guard let child = detached(argv) else { continue }
            pids.append(child)
        }
        guard let cleanup = sshCleanup.withLock({ $0 }) else { return }
        let wait = "i=0; for p in \(pids.map(String.init).joined(separator: " ")); do "
            + "while kill -0 $p 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; done; "
        _ = detached(["/bin/sh", "-c", wait + cleanup])
    }

    private func detached(_ argv: [String]) -> pid_t? {
        guard let child = try? ProcessSpawner.spawn(argv: argv, env: ProcessSpawner.environment([:]), cwd: nil,
                                                    stdin: .null, stdout: .null, stderr: .null) else { return nil }
        if child.pidfd >= 0 { close(child.pidfd) }
        return child.pid
    }

    /// The leader exited: forget the group unless members are left.
    func leaderExited(_ pgid: pid_t) {
        guard killpg(pgid, 0) != 0 else { return }
        groups.withLock { _ = $0.remove(pgid) }
    }

    /// Groups with processes still alive: the ones recorded, and those of
    /// tasker's own children (a child may start before its group is
    /// recorded, which happens on another thread).
    public var alive: [pid_t] {
        guard spawned.load(ordering: .relaxed) else { return [] }
        let recorded = groups.withLock { $0 }
        return Array(recorded.union(Self.childGroups())).filter { killpg($0, 0) == 0 }
    }

    /// Process groups led by or holding a child of this process, other than
    /// tasker's own (read from /proc; empty where there is none).
    static func childGroups() -> Set<pid_t> {
        let me = getpid(), mine = getpgrp()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var found: Set<pid_t> = []
        for name in entries where name.first?.isNumber == true {
            guard let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // after "pid (comm)": state ppid pgrp ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, let ppid = pid_t(fields[1]), let pgrp = pid_t(fields[2]) else { continue }
            if ppid == me && pgrp != mine && pgrp > 1 { found.insert(pgrp) }
        }
        return found
    }

    /// SIGTERM to every live group, then SIGKILL to those still alive after
    /// `grace` seconds (0: SIGKILL at once).
    public func killAll(grace: Double) {
        var live = alive
        guard !live.isEmpty else { return }
        if grace > 0 {
            for g in live { killpg(g, SIGTERM) }
            let end = Date().addingTimeInterval(grace)
            while !live.isEmpty && Date() < end {
                usleep(10_000)
                live = live.filter { killpg($0, 0) == 0 }
            }
        }
        for g in live { killpg(g, SIGKILL) }
        groups.withLock { $0.removeAll() }
    }
}
