import Foundation
import SSHTestHosts
import Testing

/// `host=` from the command line: TASKER_SSH_CONFIG, `[task@host]` stream
/// lines and secrets masked in them, the run ending with its masters closed.
@Suite(.enabled(if: SSHTestHosts.installed, "openssh-server is not installed (scripts/install-deps installs it)"))
struct SSHCLITests {
    @Test func streamedRemoteLinesArePrefixedAndMasked() async throws {
        let fleet = try await SSHTestHosts.get()
        let s = try Scratch(["p.lua": """
            local token = tasker.secret("TK_SSH_TOKEN")
            for _, h in ipairs(tasker.hosts{"h1", "h2"}) do
              tasker.add{name = "say", run = function()
                tasker.sh('echo "token=$T"; echo done >&2', {host = h, env = {T = token}, stream = true})
              end}
            end
            """])
        defer { s.cleanup() }
        let r = try await shell("TASKER_SSH_CONFIG='\(fleet.configFile)' TK_SSH_TOKEN=s3cr3t-over-ssh $TASKER run --no-progress p.lua", in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        for h in ["h1", "h2"] {
            #expect(r.stderr.contains("[say@\(h)] token=***"), "\(r.stderr)")
            #expect(r.stderr.contains("[say@\(h)] done"))
        }
        #expect(!r.stderr.contains("s3cr3t-over-ssh"))
    }

    /// Ctrl-C cancels the running remote commands: once tasker has exited,
    /// none of them (nor their children) runs on its host.
    @Test func anInterruptedRunLeavesNoRemoteProcess() async throws {
        let sleeps = try await RemoteSleeps(hosts: ["h2", "h3"], durations: 43)
        defer { sleeps.scratch.cleanup() }
        let before = try await sleeps.running(4)
        sleeps.run.signal(SIGINT)
        let r = await sleeps.run.finish()
        #expect(r.status == 130, "\(r.stderr)")
        #expect(before == 4)
        #expect(sleeps.count() == 0)
    }

    /// Ctrl-C twice, at once: tasker exits without waiting, and the remote
    /// commands are still stopped on their hosts (the stops are sent as it
    /// exits, and finish after it); then its ssh masters are closed and
    /// their directory removed, as at the end of a run.
    @Test func aSecondSignalStillStopsTheRemoteCommands() async throws {
        let sleeps = try await RemoteSleeps(hosts: ["h4", "h5"], durations: 45)
        defer { sleeps.scratch.cleanup() }
        #expect(try await sleeps.running(4) == 4)
        let dirs = sleeps.sshDirectories()
        #expect(dirs.count == 1 && dirs.allSatisfy { RemoteSleeps.processes(naming: $0) >= 2 }, "\(dirs)")
        sleeps.run.signal(SIGINT)
        usleep(1000)
        sleeps.run.signal(SIGINT)
        let r = await sleeps.run.finish()
        #expect(r.status == 130, "\(r.stderr)")
        var left = sleeps.count()
        let deadline = Date(timeIntervalSinceNow: 20)
        while left != 0 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            left = sleeps.count()
        }
        if left != 0 {
            let fleet = try await SSHTestHosts.get()
            Issue.record("""
                remote commands left running after a second signal; tasker's stderr:
                \(r.stderr)
                \(SSHTestHosts.run("/bin/sh", ["-c", "ps -eo pid,pgid,stat,args | grep -e 'sleep 4[56]' -e ssh | grep -v grep; ls -la /tmp/.tasker-*"]).1)
                \(fleet.logTail("h4", bytes: 1500))
                \(fleet.logTail("h5", bytes: 1500))
                """)
        }
        var masters = dirs.map(RemoteSleeps.processes(naming:)).reduce(0, +)
        while (masters != 0 || dirs.contains(where: { FileManager.default.fileExists(atPath: $0) })) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            masters = dirs.map(RemoteSleeps.processes(naming:)).reduce(0, +)
        }
        #expect(masters == 0, "ssh masters left after a second signal")
        #expect(!dirs.contains(where: { FileManager.default.fileExists(atPath: $0) }), "ssh directory left: \(dirs)")
    }

    /// examples/fleet_df.lua over an inventory of the test hosts and one that refuses connections.
    @Test func theFleetDiskExampleNamesTheUnreachableHost() async throws {
        let fleet = try await SSHTestHosts.get()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = root.appendingPathComponent("examples/fleet_df.lua").path
        let s = try Scratch(["inv.ini": "[web]\nh1\nh2\n[db]\nh3\ngone ansible_host=127.0.0.1 ansible_port=1\n"])
        defer { s.cleanup() }
        let env = "TASKER_SSH_CONFIG='\(fleet.configFile)'"
        let all = try await shell("\(env) $TASKER run --no-progress --var inventory=inv.ini --var max_percent=101 '\(example)'", in: s.dir)
        let lines = all.stdout.split(separator: "\n").map(String.init)
        #expect(all.status == 1, "\(all.stderr)")
        #expect(lines.count == 4)
        for (i, name) in ["h1", "h2", "h3"].enumerated() where i < lines.count {
            #expect(lines[i].range(of: "^\(name) +[0-9]+%$", options: .regularExpression) != nil, "\(lines[i])\n\(all.stderr)\n\(fleet.logTail(name))")
        }
        #expect(lines.last?.range(of: "^gone +unreachable \\(connect\\)$", options: .regularExpression) != nil, "\(all.stdout)")
        let web = try await shell("\(env) $TASKER run --no-progress --var inventory=inv.ini --var group=web '\(example)'", in: s.dir)
        #expect(web.status == 0, "\(web.stderr)")
        #expect(web.stdout.split(separator: "\n").count == 2)
    }

    @Test func aMissingConfigNamedByTheEnvironmentIsAClearError() async throws {
        let s = try Scratch(["p.lua": "local ok, e = pcall(function() tasker.sh('true', {host = 'h1'}) end); print(e.kind, e.where, e.message)"])
        defer { s.cleanup() }
        let r = try await shell("TASKER_SSH_CONFIG=/nonexistent/ssh_config $TASKER run --no-progress p.lua", in: s.dir)
        #expect(r.stdout == "usage\tp.lua:1\tTASKER_SSH_CONFIG names no regular file ('/nonexistent/ssh_config')\n")
    }
}

/// A run of two tasks, each running `sleep` twice on its host (one in the
/// background) for durations unique to this run (a random fraction: no
/// other test, nor another test process, has them); `count` says how many
/// of them run (the hosts share this machine's processes: their namespaces
/// are the network's only).
private struct RemoteSleeps {
    let scratch: Scratch
    let run: Background
    private let pattern: String
    private let config: String

    init(hosts: [String], durations d: Int) async throws {
        let fleet = try await SSHTestHosts.get()
        scratch = try Scratch([:])
        let dir = scratch.dir.path
        let tag = String(Int.random(in: 1000...9999))
        let (a, b) = (hosts[0], hosts[1])
        try """
            for i, h in ipairs{"\(a)", "\(b)"} do
              tasker.add{name = "long " .. h, run = function()
                tasker.sh("touch \(dir)/started-" .. h .. "; sleep \(d)" .. i .. ".\(tag) & sleep \(d + 1)" .. i .. ".\(tag)", {host = h})
              end}
            end
            tasker.add(function()
              while not (fs.exists("\(dir)/started-\(a)") and fs.exists("\(dir)/started-\(b)")) do tasker.sleep(0.02) end
              print("both started"); io.stdout:flush()
            end)
            """.write(toFile: dir + "/p.lua", atomically: true, encoding: .utf8)
        // a copy of the fleet's config: the run's ssh directory is the one
        // whose generated config includes it (`sshDirectories`)
        config = dir + "/ssh_config"
        try FileManager.default.copyItem(atPath: fleet.configFile, toPath: config)
        run = try Background(["run", "--no-progress", "p.lua"], in: scratch.dir, environment: ["TASKER_SSH_CONFIG": config])
        pattern = "^(\(d)|\(d + 1))[12]\\.\(tag)$"
        _ = await run.waitFor("both started")
    }

    func count() -> Int {
        let awk = "ps -eo stat=,args= | awk '$1 !~ /^Z/ && ($2 == \"sleep\") && ($3 ~ /\(pattern)/) { n++ } END { print n + 0 }'"
        return Int(SSHTestHosts.run("/bin/sh", ["-c", awk]).1.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// The run's ssh directories (control sockets, its generated config).
    func sshDirectories() -> [String] {
        let dirs = ((try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []).filter { $0.hasPrefix("tasker-ssh-") }
        return dirs.map { "/tmp/" + $0 }.filter { d in
            ((try? FileManager.default.contentsOfDirectory(atPath: d)) ?? []).contains { f in
                f.hasPrefix("config-") && ((try? String(contentsOfFile: d + "/" + f, encoding: .utf8)) ?? "").contains(config)
            }
        }
    }

    /// ssh processes whose command line names `dir` (its masters).
    static func processes(naming dir: String) -> Int {
        let awk = "ps -eo stat=,comm=,args= | awk -v d='\(dir)/' '$1 !~ /^Z/ && $2 == \"ssh\" && index($0, d) { n++ } END { print n + 0 }'"
        return Int(SSHTestHosts.run("/bin/sh", ["-c", awk]).1.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// How many run once `n` do (the marker file comes before the sleeps),
    /// or after 5 s.
    func running(_ n: Int) async throws -> Int {
        var seen = count()
        for _ in 0..<500 where seen != n {
            try await Task.sleep(for: .milliseconds(10))
            seen = count()
        }
        return seen
    }
}
