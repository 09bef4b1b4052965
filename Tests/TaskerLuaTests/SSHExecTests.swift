import Foundation
import SSHTestHosts
import Testing

/// `host=` on tasker.exec and tasker.sh against real sshd hosts (network
/// namespaces as root; see SSHTestHosts), through the system ssh.
@Suite(.enabled(if: SSHTestHosts.installed, "openssh-server is not installed (scripts/install-deps installs it)"))
struct SSHExecTests {
    /// Lua that counts, on `host`, live processes whose command line is
    /// exactly `args` (zombies left for init do not count).
    static let leftovers = """
        local function leftovers(host, args)
          local out = tasker.sh("ps -eo stat=,args= | awk '$1 !~ /^Z/ { $1 = \\"\\"; sub(/^ /, \\"\\"); if ($0 == \\"" .. args .. "\\") n++ } END { print n + 0 }'",
            {host = host}).stdout
          return tonumber(out)
        end

        """

    @Test func execAndShOnEveryHostWithTheLocalOptions() async throws {
        let fleet = try await SSHTestHosts.get()
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local hs = {}
            for i = 1, \(fleet.hosts.count) do
              local host = "h" .. i
              hs[i] = tasker.add{name = host, run = function()
                local addr = tasker.exec{"sh", "-c", "ip -4 -o addr show scope global | awk '{print $4}'", host = host}.stdout
                local sh = tasker.sh("printf '%s|%s|%s' \\"$X\\" \\"$(pwd)\\" \\"$(cat)\\"", {host = host, env = {X = "it's \\"quoted\\""},
                                     cwd = "/tmp", stdin = "from stdin"})
                return addr:gsub("\\n", "") .. " " .. sh.stdout
              end}
            end
            for i, v in ipairs(tasker.all(hs)) do print(v) end
            local r = tasker.exec{"printf", "%s\\n", "a b", "$HOME", "it's", host = "h1"}
            print(r.code, r.ok, r.stdout)
            local hostile = "$(touch /tmp/tk-pwned); `touch /tmp/tk-pwned` ' \\" ; | & \\n*"
            print(tasker.exec{"printf", "%s", hostile, host = "h1", cwd = "/"}.stdout == hostile,
                  tasker.sh("printf '%s' \\"$V\\"", {host = "h1", env = {V = hostile}}).stdout == hostile)
            local ok, e = pcall(tasker.sh, "echo broken >&2; exit 3", {host = "h2"})
            print(ok, e.kind, e.code, e.host, e.stderr:match("broken\\n$"))
            print(tasker.sh("exit 255", {host = "h2", check = false}).code)
            """)
        let expected = fleet.hosts.map { h in
            (fleet.namespaces ? "\(h.address)/24" : "") + " it's \"quoted\"|/tmp|from stdin"
        }
        if fleet.namespaces {
            #expect(Array(r.lines.prefix(fleet.hosts.count)) == expected)
        }
        #expect(Array(r.lines.suffix(8)) == ["0\ttrue\ta b", "$HOME", "it's", "", "true\ttrue", "false\texec\t3\th2\tbroken", "", "255"])
        #expect(!FileManager.default.fileExists(atPath: "/tmp/tk-pwned"))
        #expect(r.exitCode == 0, "\(r.diagnostics)")
    }

    /// 40 commands at once to one host share its one master connection
    /// (sshd logs one login), 10 sessions at a time, stderr clean.
    @Test func manyCommandsAtOnceShareOneConnection() async throws {
        let own = try await SSHTestHosts.make(count: 1)
        defer { own.destroy() }
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(own.configFile)"}
            local hs = {}
            for i = 1, 40 do
              hs[i] = tasker.add(function() local x = tasker.exec{"echo", i, host = "h1"}; return x end)
            end
            -- stderr may hold what the login shell's rc files say (this
            -- machine's root runs pyenv there), but nothing of ssh's own
            local n = 0
            for i, x in ipairs(tasker.all(hs)) do
              if x.stdout == i .. "\\n" and not x.stderr:find("multiplexing") and not x.stderr:find("mux_client") then n = n + 1
              else log.warn("unexpected", {i = i, stdout = x.stdout, stderr = x.stderr}) end
            end
            print(n)
            """)
        #expect(r.lines == ["40"], "\(r.diagnostics)")
        let log = (try? String(contentsOfFile: own.dir + "/h1/sshd.log", encoding: .utf8)) ?? ""
        #expect(log.components(separatedBy: "Accepted publickey").count - 1 == 1, "\(log.suffix(2000))")
    }

    @Test func streamPrefixesLinesWithTaskAndHost() async throws {
        let fleet = try await SSHTestHosts.get()
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local a = tasker.add{name = "deploy", run = function()
              return tasker.sh("echo out-line; echo err-line >&2", {host = "h1", stream = true}).stdout
            end}
            local b = tasker.add{name = "deploy2", run = function()
              return tasker.exec{"echo", "two", host = "h2", stream = true}.stdout
            end}
            print(a:await(), b:await())
            """)
        #expect(r.lines == ["out-line", "\ttwo", ""])
        let streamed = r.diagnostics.split(separator: "\n").map(String.init)
        #expect(streamed.contains("[deploy@h1] out-line"))
        #expect(streamed.contains("[deploy@h1] err-line"))
        #expect(streamed.contains("[deploy2@h2] two"))
    }

    @Test func timeoutAndCancelLeaveNoRemoteProcess() async throws {
        let fleet = try await SSHTestHosts.get()
        let marker = "/tmp/tk-ssh-started-\(UUID().uuidString.prefix(8))"
        // durations of this run only: the hosts share this machine's processes
        // with any other test process, whose sleeps would count here
        let tag = String(Int.random(in: 1000...9999))
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let r = try await runLua(Self.leftovers + """
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            -- the check sees a process that is there
            local pid = tasker.sh("sleep 416.\(tag) </dev/null >/dev/null 2>&1 & echo $!", {host = "h3"}).stdout:gsub("%s", "")
            local seen = leftovers("h3", "sleep 416.\(tag)")
            tasker.sh("kill " .. pid, {host = "h3"})
            print("control", seen)
            local t0 = tasker.now()
            local ok, e = pcall(tasker.sh, "sleep 417.\(tag) & sleep 418.\(tag); echo never", {host = "h3", timeout = 0.5})
            print(ok, e.kind, e.host, tasker.now() - t0 < 8)
            -- answered once the remote group is gone: nothing to wait for
            print(leftovers("h3", "sleep 417.\(tag)"), leftovers("h3", "sleep 418.\(tag)"))
            local h = tasker.add{name = "long", run = function()
              tasker.sh("touch \(marker); sleep 419.\(tag) & sleep 420.\(tag)", {host = "h4"})
            end}
            local deadline = tasker.now() + 20
            while not fs.exists("\(marker)") and tasker.now() < deadline do tasker.sleep(0.02) end
            h:cancel()
            print(h:result())
            -- a cancel does not wait: the remote side goes within seconds
            deadline = tasker.now() + 15
            local left
            repeat left = leftovers("h4", "sleep 419.\(tag)") + leftovers("h4", "sleep 420.\(tag)") until left == 0 or tasker.now() > deadline
            print(left)
            """)
        #expect(r.lines.count == 5, "\(r.lines) \(r.diagnostics) \(r.result.mainError ?? "")")
        let lines = r.lines + Array(repeating: "", count: 5)
        #expect(lines[0] == "control\t1")
        #expect(lines[1] == "false\ttimeout\th3\ttrue")
        #expect(lines[2] == "0\t0")
        #expect(lines[3].hasPrefix("false\tcancelled") || lines[3].hasPrefix("false"), "\(lines[3])")
        #expect(lines[4] == "0", """
            left on the host after the cancel:
            \(SSHTestHosts.run("/bin/sh", ["-c", "ps -eo pid,ppid,pgid,stat,etime,args | grep -F -e '.\(tag)' -e tasker- | grep -v grep; ls -la --time-style=+%T.%N /tmp/.tasker-*"]).1)
            \(r.diagnostics)
            \(fleet.logTail("h4", bytes: 2000))
            """)
    }

    /// A stop's TERM ends the watchdog beside a remote command at once: it
    /// ignored TERM, so every timeout and cancel waited for the group's
    /// KILL, 2 s later. The timeout below is answered well before that.
    @Test func aRemoteTimeoutIsAnsweredWithoutWaitingForTheKill() async throws {
        let fleet = try await SSHTestHosts.get()
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            tasker.sh("true", {host = "h2"})  -- the connection, made beforehand
            local t0 = tasker.now()
            local ok, e = pcall(tasker.sh, "sleep 30", {host = "h2", timeout = 0.3})
            print(ok, e.kind, tasker.now() - t0)
            """)
        let parts = (r.lines.first ?? "").split(separator: "\t")
        #expect(parts.count == 3 && parts[0] == "false" && parts[1] == "timeout", "\(r.lines) \(r.diagnostics)")
        let took = parts.count == 3 ? Double(parts[2]) ?? 99 : 99
        // 2.3 s and more with the watchdog that ignored TERM; a loaded
        // machine's ssh round trips stay far under the difference
        #expect(took < 1.8, "answered after \(took) s")
    }

    /// A `cwd` that is not there is the same error on a host as locally:
    /// kind `exec`, `permanent`, the reason (it was the shell's exit 1, which
    /// a task's retry tried again).
    @Test func aMissingCwdOnAHostIsTheLocalError() async throws {
        let fleet = try await SSHTestHosts.get()
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            for _, host in ipairs({false, "h2"}) do
              local ok, e = pcall(tasker.sh, "echo hi", {cwd = "/no/such/dir", host = host or nil})
              print(ok, e.kind, e.permanent, e.message)
            end
            print(tasker.sh("pwd", {cwd = "/tmp", host = "h2"}).stdout)
            """)
        #expect(r.lines == [
            "false\texec\ttrue\tcannot run '/bin/sh -c echo hi': cwd '/no/such/dir': No such file or directory",
            "false\texec\ttrue\tcannot run '/bin/sh -c echo hi': cwd '/no/such/dir': No such file or directory",
            "/tmp", "",
        ], "\(r.lines) \(r.diagnostics)")
    }

    /// A session that goes away on the host (sshd's process for the
    /// connection ends: the client vanished in a partition, where no stop
    /// reaches the host) takes its command with it: the command outlived
    /// it for good, re-parented to init.
    @Test func aCommandEndsWithTheSessionThatStartedIt() async throws {
        let fleet = try await SSHTestHosts.get()
        let tag = String(Int.random(in: 1000...9999))
        let r = try await runLua(Self.leftovers + """
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local h = tasker.add{name = "orphan", run = function() tasker.sh("sleep 61.\(tag)", {host = "h5"}) end}
            local deadline = tasker.now() + 20
            while leftovers("h5", "sleep 61.\(tag)") == 0 and tasker.now() < deadline do tasker.sleep(0.05) end
            -- the sshd process above the command's shell, as a partition
            -- ends it (the hosts share this machine's processes)
            -- (the command's group is led by the shell sshd started)
            local killed = tasker.sh("p=$(pgrep -f -x 'sleep 61.\(tag)' | head -1); g=$(ps -o pgid= -p $p | tr -d ' '); "
              .. "sshd=$(ps -o ppid= -p $g | tr -d ' '); ps -o args= -p $sshd; kill -9 $sshd", {check = false})
            print(killed.stdout:match("sshd") ~= nil or killed.stdout .. killed.stderr)
            print((h:result()))
            deadline = tasker.now() + 15
            local left
            repeat left = leftovers("h1", "sleep 61.\(tag)") until left == 0 or tasker.now() > deadline
            print(left)
            """)
        #expect(r.lines == ["true", "false", "0"], "\(r.lines) \(r.diagnostics) \(r.result.mainError ?? "")")
        _ = SSHTestHosts.run("/usr/bin/pkill", ["-f", "sleep 61.\(tag)"])
    }

    /// A timeout or cancel that comes before the remote command has started
    /// (its session opens late: a loaded host, slow rc files) still stops
    /// it: the command, once it starts, exits at once (143). Sessions of
    /// this host whose command says "late" wait for a gate file first, and
    /// log how their command ended.
    @Test func aStopBeforeTheCommandStartsKeepsItFromRunning() async throws {
        let dir = "/tmp/tk-ssh-late-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/tmp", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let own = try await SSHTestHosts.make(count: 1, sshdConfig: """
            ForceCommand export TMPDIR=\(dir)/tmp; case "$SSH_ORIGINAL_COMMAND" in *late*) echo waiting >> \(dir)/log; \
            i=0; while [ ! -e \(dir)/gate ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; \
            (eval "$SSH_ORIGINAL_COMMAND"); echo "ended $?" >> \(dir)/log;; *) eval "$SSH_ORIGINAL_COMMAND";; esac
            """)
        defer { own.destroy() }
        // stop files of commands that had ended: one from two hours ago goes, a recent one stays
        _ = SSHTestHosts.run("/usr/bin/touch", ["-d", "2 hours ago", dir + "/tmp/.tasker-0ld.stop"])
        _ = SSHTestHosts.run("/usr/bin/touch", [dir + "/tmp/.tasker-recent.stop"])
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(own.configFile)"}
            local function line(n)  -- the log's nth line, once it is there
              local deadline = tasker.now() + 40
              repeat
                local lines = {}
                for l in (fs.exists("\(dir)/log") and fs.read("\(dir)/log") or ""):gmatch("[^\\n]+") do lines[#lines + 1] = l end
                if lines[n] then return lines[n] end
                tasker.sleep(0.02)
              until tasker.now() > deadline
              return "no line " .. n
            end
            tasker.sh("true", {host = "h1"})  -- the master is up: the command's ssh starts at once
            local t0 = tasker.now()
            local ok, e = pcall(tasker.sh, "sleep 60 # late", {host = "h1", timeout = 2})
            print(ok, e.kind, tasker.now() - t0 < 15)
            fs.write("\(dir)/gate", "")
            print(line(1), line(2))
            fs.remove("\(dir)/gate")
            local h = tasker.add{name = "late", run = function() tasker.sh("sleep 61 # late", {host = "h1"}) end}
            print(line(3))
            h:cancel()
            -- the stop has been: it left its file for the command to find
            local deadline = tasker.now() + 20
            while #fs.glob("\(dir)/tmp/.tasker-*.stop") == 1 and tasker.now() < deadline do tasker.sleep(0.02) end
            fs.write("\(dir)/gate", "")
            print(line(4))
            print(table.concat(fs.glob("\(dir)/tmp/.tasker-*"), " "))
            """)
        #expect(r.lines == ["false\ttimeout\ttrue", "waiting\tended 143", "waiting", "ended 143", "\(dir)/tmp/.tasker-recent.stop"],
                "\(r.diagnostics) \(r.result.mainError ?? "")\n\(own.logTail("h1"))")
    }

    @Test(.timeLimit(.minutes(3)))
    func aHostTakenDownFailsOnlyItsOwnTasksWithKindSSH() async throws {
        let fleet = try await SSHTestHosts.get()
        let own = try await SSHTestHosts.make(count: 1)
        defer { own.destroy() }
        guard own.namespaces, let link = own.hosts[0].link else {
            print("SSHExecTests: no network namespaces: a host cannot be taken down here")
            return
        }
        // One config naming both sets: the shared h1 and this test's own host as `down`.
        let config = own.dir + "/both_config"
        let known = own.dir + "/both_known"
        try (own.hosts[0].hostKeyLine + "\n" + fleet.hosts[0].hostKeyLine + "\n").write(toFile: known, atomically: true, encoding: .utf8)
        let text = own.configText(knownHosts: known, alive: 1, aliveCount: 2, connectTimeout: 2).replacingOccurrences(of: "Host h1", with: "Host down")
            + fleet.configText(knownHosts: known, alive: 1, aliveCount: 2, connectTimeout: 2).components(separatedBy: "\n\n").first! + "\n"
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let marker = "/tmp/tk-ssh-down-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(config)"}
            tasker.sh("true", {host = "down"})
            local doomed = tasker.add{name = "doomed", run = function() tasker.sh("touch \(marker); sleep 30", {host = "down"}) end}
            local fine = tasker.add{name = "fine", run = function()
              while not fs.exists("\(marker)") do tasker.sleep(0.02) end
              tasker.exec{"ip", "link", "set", "\(link)", "down"}
              return tasker.sh("sleep 1; echo still-here", {host = "h1"}).stdout
            end}
            local ok, e = doomed:result()
            print(ok, e.kind, e.code == "connect" or e.code == "timeout", e.host)
            print(fine:await())
            local ok2, e2 = pcall(tasker.sh, "true", {host = "down"})
            print(ok2, e2.kind, e2.code == "connect" or e2.code == "timeout", e2.host)
            """)
        #expect(r.lines == ["false\tssh\ttrue\tdown", "still-here", "", "false\tssh\ttrue\tdown"], "\(r.diagnostics)")
    }

    /// h:pause() stops the remote processes (state T on the host), resume
    /// continues them. (Found under load: dash runs a command with vfork,
    /// and a stop that catches the child before its exec leaves the shell
    /// in D, waiting on it; the group is stopped all the same.)
    @Test func pausingATaskStopsItsRemoteProcesses() async throws {
        let fleet = try await SSHTestHosts.get()
        let pidFile = "/tmp/tk-ssh-pause-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: pidFile) }
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local h = tasker.add{name = "loop", run = function()
              tasker.sh("echo $$ > \(pidFile); while :; do sleep 0.05; done", {host = "h5"})
            end}
            local pid
            local deadline = tasker.now() + 20
            repeat
              tasker.sleep(0.02)
              local f = io.open("\(pidFile)")
              if f then pid = f:read("l"); f:close() end
            until (pid and #pid > 0) or h:state() == "failed" or tasker.now() > deadline
            if not (pid and #pid > 0) then error("no remote pid: " .. tostring(select(2, h:result()))) end
            -- "T" when the command's process group is stopped: every process
            -- in it stopped (T), but for a shell blocked in vfork (D) on a
            -- child the stop caught before its exec; else the states seen
            local function state()
              local states = tasker.sh("g=$(ps -o pgid= -p " .. pid .. " | tr -d ' '); " ..
                "ps -eo pgid=,stat= | awk -v g=\\"$g\\" '$1 == g { print substr($2, 1, 1) }' | sort -u | tr -d '\\\\n'",
                {host = "h5"}).stdout
              return (states:find("T") and not states:find("[^TD]")) and "T" or states
            end
            local function waitFor(want)
              local s, limit = state(), tasker.now() + 30
              while (s == "T") ~= want and tasker.now() < limit do tasker.sleep(0.02); s = state() end
              return s
            end
            h:pause()
            print(waitFor(true))
            h:resume()
            print(waitFor(false) ~= "T")
            h:cancel()
            """)
        #expect(r.lines == ["T", "true"], "\(r.diagnostics) \(r.result.mainError ?? "")\n\(fleet.logTail("h5"))")
    }

    @Test func aChangedHostKeyAnUnknownHostAndARefusedKey() async throws {
        let fleet = try await SSHTestHosts.get()
        let dir = "/tmp/tk-ssh-keys-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // h1 known with h2's key: what a changed host key looks like
        let h1 = fleet.hosts[0], h2 = fleet.hosts[1]
        let wrongKey = h2.hostKeyLine.split(separator: " ").dropFirst().joined(separator: " ")
        let hostPart = h1.hostKeyLine.split(separator: " ")[0]
        try "\(hostPart) \(wrongKey)\n".write(toFile: dir + "/changed", atomically: true, encoding: .utf8)
        try fleet.configText(knownHosts: dir + "/changed").write(toFile: dir + "/changed_config", atomically: true, encoding: .utf8)
        try "".write(toFile: dir + "/empty", atomically: true, encoding: .utf8)
        try fleet.configText(knownHosts: dir + "/empty").write(toFile: dir + "/empty_config", atomically: true, encoding: .utf8)
        _ = SSHTestHosts.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", dir + "/stranger"])
        try fleet.configText(knownHosts: fleet.knownHosts, identity: dir + "/stranger")
            .write(toFile: dir + "/stranger_config", atomically: true, encoding: .utf8)
        let r = try await runLua("""
            local function try(config, opts)
              tasker.configure{ssh_config = "\(dir)/" .. config}
              local ok, e = pcall(tasker.sh, "echo on-host", opts)
              if ok then print("ok", e.stdout) else print(e.kind, e.code, e.host, tostring(e):match("^ssh: ") ~= nil and e.message:match("^ssh: ") == nil, e.permanent) end
            end
            try("changed_config", {host = "h1"})
            try("empty_config", {host = "h1"})
            try("stranger_config", {host = "h2"})
            try("empty_config", {host = "h3", accept_new_host_keys = true})
            """)
        #expect(r.lines == ["ssh\thostkey\th1\ttrue\ttrue", "ssh\thostkey\th1\ttrue\ttrue", "ssh\tauth\th2\ttrue\ttrue", "ok\ton-host", ""],
                "\(r.diagnostics)")
        // trust on first use wrote the key it accepted
        let known = (try? String(contentsOfFile: dir + "/empty", encoding: .utf8)) ?? ""
        #expect(known.contains("ssh-ed25519"))
    }

    @Test func aRefusedConnectionAndInventoryHostObjects() async throws {
        let fleet = try await SSHTestHosts.get()
        let h1 = fleet.hosts[0]
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local ok, e = pcall(tasker.sh, "true", {host = "\(h1.address):1"})
            print(e.kind, e.code, e.host)
            -- `kind: message`, the kind said once
            print(tostring(e):find("^ssh: cannot reach '") ~= nil)
            local closed = tasker.hosts{{name = "nothing-here", ansible_host = "\(h1.address)", ansible_port = 1}}[1]
            local ok2, e2 = pcall(tasker.exec, {"true", host = closed})
            print(e2.kind, e2.code, e2.host, closed.address)
            local inv = tasker.hosts{web = {"h1", "h2"}, db = {{name = "h3", role = "primary"}}}
            for _, h in ipairs(inv:group("web")) do print(h.name, tasker.exec{"echo", h.name, host = h}.stdout) end
            local db = inv:group("db")[1]
            print(tasker.sh("echo $ROLE", {host = db, env = {ROLE = db.vars.role}}).stdout)
            """)
        #expect(r.lines == ["ssh\tconnect\t\(h1.address):1", "true", "ssh\tconnect\tnothing-here\t\(h1.address):1", "h1\th1", "", "h2\th2", "", "primary", ""], "\(r.diagnostics)")
    }

    @Test func aSecretInTheCommandOrEnvStaysMasked() async throws {
        let fleet = try await SSHTestHosts.get()
        let r = try await runLua("""
            tasker.configure{ssh_config = "\(fleet.configFile)"}
            local dir = debug.getinfo(1, "S").source:match("^@(.*)/")
            local token = tasker.secret("TOKEN", {file = dir .. "/token.txt"})
            local ok, e = pcall(tasker.sh, "echo " .. token .. " >&2; exit 4", {host = "h5"})
            print(e.kind, e.message:find(token, 1, true) == nil, e.message:find("***", 1, true) ~= nil)
            """, files: ["token.txt": "s3cr3t-t0ken-value\n"])
        #expect(r.lines == ["exec\ttrue\ttrue"])
    }
}
