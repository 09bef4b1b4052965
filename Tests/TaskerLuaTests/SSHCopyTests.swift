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
            -- a secret in a path stays masked in the error
            local here = debug.getinfo(1, "S").source:match("^@(.*)/")
            local token = tasker.secret("TOKEN", {file = here .. "/token.txt"})
            ok, e = pcall(ssh.put, "h4", dir .. "/src", dir .. "/" .. token .. "/f")
            print(e.kind, e.message:find(token, 1, true) == nil, e.message:find("***", 1, true) ~= nil)
            """, files: ["token.txt": "s3cr3t-t0ken-value\n"])
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
            "ssh\ttrue\ttrue",
        ], "\(r.lines)")
    }

    /// A put cancelled mid-copy leaves the old remote file and, once the
    /// remote side has gone, no temp file; a cancelled get leaves the old
    /// local file and no temp file; so does a local ssh killed mid-put.
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
            -- a replaced file is named by its size (it is 256 MiB of zeros)
            local function shown(s) return (s == nil or #s < 40) and tostring(s) or (#s .. " bytes") end
            fs.write(dir .. "/to/file", "old")
            local h = tasker.add{name = "put", run = function() ssh.put("h5", dir .. "/big", dir .. "/to/file") end}
            local deadline = tasker.now() + 150
            while temps(dir .. "/to") == 0 and tasker.now() < deadline do tasker.sleep(0.02) end
            print("copying", temps(dir .. "/to"))
            h:cancel()
            print(h:result())
            deadline = tasker.now() + 20
            while temps(dir .. "/to") > 0 and tasker.now() < deadline do tasker.sleep(0.05) end
            print(temps(dir .. "/to"), shown(fs.read(dir .. "/to/file")))
            -- the same for a get: the local temp file goes as the task's wait is closed
            fs.write(dir .. "/got", "old")
            h = tasker.add{name = "get", run = function() ssh.get("h5", dir .. "/big", dir .. "/got") end}
            deadline = tasker.now() + 150
            while temps(dir) == 0 and tasker.now() < deadline do tasker.sleep(0.02) end
            print("copying", temps(dir))
            h:cancel()
            print(h:result())
            deadline = tasker.now() + 20
            while temps(dir) > 0 and tasker.now() < deadline do tasker.sleep(0.05) end
            print(temps(dir), shown(fs.read(dir .. "/got")))
            -- the local ssh killed mid-put: the remote side sees its input end early
            fs.mkdir(dir .. "/kill")
            fs.write(dir .. "/kill/file", "old")
            h = tasker.add{name = "killed", run = function() ssh.put("h5", dir .. "/big", dir .. "/kill/file") end}
            deadline = tasker.now() + 150
            while temps(dir .. "/kill") == 0 and tasker.now() < deadline do tasker.sleep(0.02) end
            tasker.exec{"pkill", "-KILL", "-f", "^ssh -F .*" .. dir .. "/kill/file"}
            local ok, e = h:result()
            print(ok, e.kind, e.host, e.code, e.message:match("killed %(signal 9%)$") ~= nil)
            deadline = tasker.now() + 20
            while temps(dir .. "/kill") > 0 and tasker.now() < deadline do tasker.sleep(0.05) end
            print(temps(dir .. "/kill"), shown(fs.read(dir .. "/kill/file")))
            """)
        #expect(r.lines.count == 8, "\(r.lines) \(r.diagnostics) \(r.result.mainError ?? "")")
        let lines = r.lines + Array(repeating: "", count: 8)
        #expect(lines[0] == "copying\t1", "\(r.lines) \(r.diagnostics)")
        #expect(lines[1].hasPrefix("false"), "\(lines[1])")
        #expect(lines[2] == "0\told")
        #expect(lines[3] == "copying\t1")
        #expect(lines[4].hasPrefix("false"), "\(lines[4])")
        #expect(lines[5] == "0\told")
        #expect(lines[6] == "false\tssh\th5\tcopy\ttrue", "\(lines[6])")
        #expect(lines[7] == "0\told")
    }
}
