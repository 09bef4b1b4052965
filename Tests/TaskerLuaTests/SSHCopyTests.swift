import Foundation
import SSHTestHosts
import Testing

/// `ssh.put` and `ssh.get` against the shared sshd hosts (which see this
/// machine's files, so the test reads the remote side directly).
@Suite(.enabled(if: SSHTestHosts.installed, "openssh-server is not installed (scripts/install-deps installs it)"))
struct SSHCopyTests {
    /// Lua: the names in `dir` that are a copy's temp files.
    static let temps = """
        local function temps(dir)
          local n = 0
          for _, name in ipairs(fs.list(dir)) do if name:find(".tasker-", 1, true) then n = n + 1 end end
          return n
        end

        """

    @Test func putAndGetRoundTripAtomicallyWithModeAndHostileNames() async throws {
        let fleet = try await SSHTestHosts.get()
        let dir = "/tmp/tk-copy-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/remote dir", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runLua(Self.temps + """
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local dir = "\(dir)"
            local body = ("bytes \\0 and \\255 and 'quotes' $(x)\\n"):rep(5000)
            fs.write(dir .. "/src", body)
            local remote = dir .. "/remote dir/it's $(here) `too`"
            fs.write(remote, "old")
            print(ssh.put("h2", dir .. "/src", remote, {mode = "0640"}))
            print(fs.read(remote) == body, string.format("%o", fs.stat(remote).mode & 4095))
            print(ssh.get("h3", remote, dir .. "/back"))
            print(fs.read(dir .. "/back") == body)
            -- a host object names the host in errors
            local inv = tasker.hosts{g = {{name = "web", ansible_host = "h4"}}}
            local ok, e = pcall(ssh.put, inv[1], dir .. "/src", dir .. "/no such dir/f")
            print(ok, e.kind, e.code, e.host, e.message:match("no such dir") ~= nil)
            ok, e = pcall(ssh.get, "h4", dir .. "/missing", dir .. "/m")
            print(ok, e.kind, e.code, e.host, fs.exists(dir .. "/m"))
            ok, e = pcall(ssh.put, "h4", dir .. "/missing", remote)
            print(ok, e.kind, e.code, e.message)
            ok, e = pcall(ssh.put, "h4", dir .. "/src", dir .. "/remote dir")
            print(ok, e.kind, e.code, e.message:match("is a directory") ~= nil)
            print(temps(dir), temps(dir .. "/remote dir"), fs.read(remote) == body)
            for _, bad in ipairs{
              function() ssh.put("h4", dir .. "/src", remote, {mode = "rw"}) end,
              function() ssh.put("h4", dir .. "/src", remote, {mdoe = 1}) end,
              function() ssh.put(nil, dir .. "/src", remote) end,
              function() ssh.get("-oProxyCommand=x", "a", "b") end,
              function() ssh.get("h4", "", "b") end,
            } do
              local ok, e = pcall(bad)
              print(ok, e.kind, e.where)
            end
            """)
        #expect(r.exitCode == 0, "\(r.diagnostics) \(r.result.mainError ?? "")")
        #expect(r.lines == [
            "true", "true\t640", "true", "true",
            "false\tssh\tcopy\tweb\ttrue",
            "false\tssh\tcopy\th4\tfalse",
            "false\tssh\tcopy\tssh.put '\(dir)/missing' to h4:\(dir)/remote dir/it's $(here) `too`: no such regular file",
            "false\tssh\tcopy\ttrue",
            "0\t0\ttrue",
            "false\tusage\tpipeline.lua:28", "false\tusage\tpipeline.lua:29", "false\tusage\tpipeline.lua:30",
            "false\tusage\tpipeline.lua:31", "false\tusage\tpipeline.lua:32",
        ], "\(r.lines)")
    }

    /// A put cancelled mid-copy leaves the old remote file and, once the
    /// remote side has gone, no temp file.
    @Test(.timeLimit(.minutes(3)))
    func aCancelledPutLeavesTheOldFile() async throws {
        let fleet = try await SSHTestHosts.get()
        let dir = "/tmp/tk-copy-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/to", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // sparse: cheap to make, long enough to copy to be caught mid-way
        #expect(FileManager.default.createFile(atPath: dir + "/big", contents: nil))
        #expect(truncate(dir + "/big", 256 << 20) == 0)
        let r = try await runLua(Self.temps + """
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local dir = "\(dir)"
            fs.write(dir .. "/to/file", "old")
            local h = tasker.add{name = "put", run = function() ssh.put("h5", dir .. "/big", dir .. "/to/file") end}
            local deadline = tasker.now() + 150
            while temps(dir .. "/to") == 0 and tasker.now() < deadline do tasker.sleep(0.02) end
            print("copying", temps(dir .. "/to"))
            h:cancel()
            print(h:result())
            deadline = tasker.now() + 20
            while temps(dir .. "/to") > 0 and tasker.now() < deadline do tasker.sleep(0.05) end
            print(temps(dir .. "/to"), fs.read(dir .. "/to/file"))
            """)
        #expect(r.lines.count == 3, "\(r.lines) \(r.diagnostics) \(r.result.mainError ?? "")")
        let lines = r.lines + Array(repeating: "", count: 3)
        #expect(lines[0] == "copying\t1", "\(r.lines) \(r.diagnostics)")
        #expect(lines[1].hasPrefix("false"), "\(lines[1])")
        #expect(lines[2] == "0\told")
    }
}
