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

    @Test func aMissingConfigNamedByTheEnvironmentIsAClearError() async throws {
        let s = try Scratch(["p.lua": "local ok, e = pcall(function() tasker.sh('true', {host = 'h1'}) end); print(e.kind, e.where, e.message)"])
        defer { s.cleanup() }
        let r = try await shell("TASKER_SSH_CONFIG=/nonexistent/ssh_config $TASKER run --no-progress p.lua", in: s.dir)
        #expect(r.stdout == "usage\tp.lua:1\tTASKER_SSH_CONFIG names no regular file ('/nonexistent/ssh_config')\n")
    }
}
