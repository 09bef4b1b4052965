import Foundation
import SSHTestHosts
import Testing

/// examples/rolling_restart.lua and the master cap on the shared sshd hosts.
@Suite(.enabled(if: SSHTestHosts.installed, "openssh-server is not installed (scripts/install-deps installs it)"))
struct RollingSSHCLITests {
    /// Batches of two over five hosts, two of them unhealthy and one budget
    /// failure: the second failure stops the roll, the fifth host is never
    /// touched and is named with the reason.
    @Test func theRollingRestartExampleStopsAfterTooManyFailures() async throws {
        let fleet = try await SSHTestHosts.get()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = root.appendingPathComponent("examples/rolling_restart.lua").path
        let s = try Scratch(["inv.ini": "[web]\nh1\nh2\nh3\nh4\nh5\n", "broken-h2": "", "broken-h4": ""])
        defer { s.cleanup() }
        let env = "TASKER_SSH_CONFIG='\(fleet.configFile)'"
        let vars = "--var inventory=inv.ini --var group=web --var batch=40% --var max_failures=1 --var tries=1 "
            + "--var restart='echo {host} >> \(s.dir.path)/restarted' --var check='test ! -e \(s.dir.path)/broken-{host}'"
        let r = try await shell("\(env) $TASKER run --no-progress \(vars) '\(example)'", in: s.dir)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(lines == [
            "h1               restarted, healthy",
            "h2               FAILED: not healthy after 1 check(s)",
            "h3               restarted, healthy",
            "h4               FAILED: not healthy after 1 check(s)",
            "h5               not restarted: rolling: too many failures (2 > 1)",
        ], "\(r.stdout) \(r.stderr)")
        let restarted = try String(contentsOfFile: s.dir.path + "/restarted", encoding: .utf8)
        #expect(restarted.split(separator: "\n").sorted() == ["h1", "h2", "h3", "h4"])
        #expect(r.stderr.contains("h5") && r.stderr.contains("rolling: too many failures (2 > 1)"), "\(r.stderr)")
        // all healthy: every host, exit 0
        let ok = try await shell("rm broken-*; \(env) $TASKER run --no-progress \(vars) '\(example)'", in: s.dir)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.split(separator: "\n").count == 5)
    }

    /// With one master allowed, commands to three hosts at once take turns
    /// (an idle master is closed for the next host) and all succeed.
    @Test func aCapOfOneMasterServesEveryHost() async throws {
        let fleet = try await SSHTestHosts.get()
        let s = try Scratch(["p.lua": """
            tasker.configure{ssh_connections = 1}
            local hs = {}
            for i = 1, 3 do
              hs[i] = tasker.add{name = "h" .. i, run = function()
                local out = {}
                for k = 1, 3 do out[k] = tasker.sh("echo " .. k, {host = "h" .. i}).stdout:gsub("%s", "") end
                return table.concat(out)
              end}
            end
            print(table.concat(tasker.all(hs), " "))
            print(pcall(tasker.configure, {ssh_connections = 0}))
            """])
        defer { s.cleanup() }
        let r = try await shell("TASKER_SSH_CONFIG='\(fleet.configFile)' $TASKER run --no-progress p.lua", in: s.dir)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "123 123 123", "\(r.stdout) \(r.stderr)")
        #expect(lines.count == 2 && lines[1].hasPrefix("false"), "\(lines)")
    }
}
