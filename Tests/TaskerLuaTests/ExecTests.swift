import Testing

/// README, Processes: tasker.exec and tasker.sh with real processes.
@Suite struct ExecTests {
    @Test func runsWithoutAShellCapturingOutputCodeAndOk() async throws {
        let r = try await runLua("""
            local out = tasker.exec{"printf", "%s|%s", "a b", "$HOME"}
            print(out.code, out.ok, out.stdout, out.stderr == "")
            local sh = tasker.sh("echo to-out; echo to-err >&2; exit 0")
            print(sh.stdout, sh.stderr)
            """)
        #expect(r.lines == ["0\ttrue\ta b|$HOME\ttrue", "to-out", "\tto-err", ""])
    }

    @Test func cwdEnvAndStdin() async throws {
        let r = try await runLua("""
            print(tasker.exec{"pwd", cwd = "/tmp"}.stdout)
            local e = tasker.sh('echo "$TASKER_T|${PATH:+path-kept}"', {env = {TASKER_T = "set"}})
            print(e.stdout)
            print(tasker.exec{"tr", "a-z", "A-Z", stdin = "shout\\n"}.stdout)
            """)
        #expect(r.lines == ["/tmp", "", "set|path-kept", "", "SHOUT", ""])
    }

    /// A cwd that is not there is named as the reason (not the program);
    /// an env name with '=' or a NUL anywhere is a usage error (it would be
    /// cut or split silently).
    @Test func aMissingCwdAndABadEnvSayWhat() async throws {
        let r = try await runLua("""
            local ok, e = pcall(tasker.exec, {"pwd", cwd = "/nonexistent-tasker-dir"})
            print(ok, e.kind, e.message)
            for _, env in ipairs{{N = "a\\0b"}, {["A=B"] = "x"}, {["N\\0"] = "x"}, {[""] = "x"}} do
              local ok2, e2 = pcall(tasker.exec, {"true", env = env})
              print(ok2, e2.kind, e2.message:match("bad option 'env' to 'tasker.exec'") ~= nil)
            end
            local ok3, e3 = pcall(tasker.exec, {"pwd", cwd = "/tmp\\0/etc"})
            print(ok3, e3.kind, e3.message:match("bad option 'cwd' to 'tasker.exec'") ~= nil)
            """)
        #expect(r.lines.first == "false\texec\tcannot run 'pwd': cwd '/nonexistent-tasker-dir': No such file or directory", "\(r.lines)")
        #expect(Array(r.lines.dropFirst()) == Array(repeating: "false\tusage\ttrue", count: 5), "\(r.lines)")
    }

    @Test func checkRaisesKindExecWithCodeAndStderrUnlessDisabled() async throws {
        let r = try await runLua("""
            local ok, e = pcall(tasker.sh, "echo broken >&2; exit 3")
            print(ok, e.kind, e.code, e.stderr, e.message)
            print(tasker.sh("exit 4", {check = false}).code, tasker.sh("exit 4", {check = false}).ok)
            local ok2, e2 = pcall(tasker.exec, {"tasker-no-such-program"})
            print(ok2, e2.kind, e2.message:find("cannot run 'tasker-no-such-program'", 1, true) == 1)
            """)
        #expect(r.lines == ["false\texec\t3\tbroken", "\t'/bin/sh -c echo broken >&2; exit 3' exited with code 3: broken (check = false returns the code instead)",
                            "4\tfalse", "false\texec\ttrue"])
    }

    /// A program that is not there fails the same way every time: not
    /// retried, unless the task's `when` asks for it (`err.permanent`).
    @Test func aMissingProgramIsNotRetriedUnlessWhenSaysSo() async throws {
        let r = try await runLua("""
            local tries = {plain = 0, asked = 0, exit = 0}
            local plain = tasker.add{retry = {attempts = 3, delay = 0.001}, run = function()
              tries.plain = tries.plain + 1
              tasker.exec{"tasker-no-such-program"}
            end}
            local asked = tasker.add{retry = {attempts = 3, delay = 0.001, when = function(err) return err.permanent end},
              run = function() tries.asked = tries.asked + 1; tasker.exec{"tasker-no-such-program"} end}
            local exit = tasker.add{retry = {attempts = 3, delay = 0.001}, run = function()
              tries.exit = tries.exit + 1
              tasker.sh("exit 1")
            end}
            tasker.some{plain, asked, exit}
            local _, err = plain:result()
            print(tries.plain, tries.asked, tries.exit, err.permanent)
            """)
        #expect(r.lines == ["1\t3\t3\ttrue"])
    }

    @Test func aCommandLineGivenToExecPointsToSh() async throws {
        let r = try await runLua("""
            local ok, err = pcall(tasker.exec, "ls -la /tmp")
            print(ok, err.kind, err.message)
            """)
        #expect(r.lines == ["false\tusage\ttasker.exec takes the program and its arguments as a list, {\"ls\", \"-la\"}, "
            + "and runs no shell; for a shell command line use tasker.sh(\"ls -la /tmp\")"])
    }

    @Test func timeoutAndCancelTerminateTheProcessAndItsChildren() async throws {
        let r = try await runLua("""
            local function alive(pid) return tasker.exec{"kill", "-0", pid, check = false}.code == 0 end
            local dir = os.tmpname(); os.remove(dir)
            local t0 = tasker.now()
            local ok, e = pcall(tasker.sh, "echo $$ > " .. dir .. "; sleep 30", {timeout = 0.2})
            print(ok, e.kind, e.message, tasker.now() - t0 < 10)
            -- the shell wrote its pid before the timeout (on a machine so
            -- loaded that it did not, it never ran its sleep either)
            local f = io.open(dir)
            local pid = f and f:read("l")
            if f then f:close() end
            print(pid ~= nil and alive(pid))
            os.remove(dir)  -- the task's shell writes its child's pid there afresh
            local h = tasker.add(function() return tasker.sh("(sleep 30; echo never) & echo $! > " .. dir .. "; wait") end)
            local child
            repeat
              local f = io.open(dir)
              local line = f and f:read("L")
              if f then f:close() end
              child = line and line:match("^(%d+)\\n$")
              if not child then tasker.sleep(0.01) end
            until child or tasker.now() - t0 > 10
            assert(child, "the task's shell never wrote its child's pid")
            h:cancel()
            while alive(child) and tasker.now() - t0 < 10 do tasker.sleep(0.01) end
            print(h:state(), alive(child))
            os.remove(dir)
            """)
        try #require(r.lines.count == 3, "\(r.result.mainError ?? "")")
        #expect(r.lines[0].hasPrefix("false\ttimeout\t'/bin/sh -c echo $$ > "))
        #expect(r.lines[0].hasSuffix("exceeded 0.2s\ttrue"))
        #expect(r.lines[1] == "false")
        #expect(r.lines[2] == "cancelled\tfalse")
    }

    @Test func outputOfParallelProcessesIsNeverInterleaved() async throws {
        let r = try await runLua("""
            local hs = {}
            for n = 1, 8 do
              hs[n] = tasker.add(function() return tasker.sh("for i in 1 2 3 4 5; do echo " .. n .. "-$i; done").stdout end)
            end
            local bad = 0
            for n, out in ipairs(tasker.all(hs)) do
              if out ~= ("%d-1\\n%d-2\\n%d-3\\n%d-4\\n%d-5\\n"):format(n, n, n, n, n) then bad = bad + 1 end
            end
            print(bad)
            """)
        #expect(r.lines == ["0"])
    }

    @Test func badArgumentsAreUsageErrors() async throws {
        let r = try await runLua("""
            for _, f in ipairs({
              function() tasker.exec("ls") end,
              function() tasker.exec({}) end,
              function() tasker.exec({"ls", {}}) end,
              function() tasker.exec({"ls", timeout = -1}) end,
              function() tasker.exec({"ls", shell = true}) end,
              function() tasker.sh(42) end,
            }) do print(select(2, pcall(f)).message) end
            """)
        #expect(r.lines == [
            "tasker.exec takes the program and its arguments as a list, {\"ls\", \"-la\"}, and runs no shell; "
                + "for a shell command line use tasker.sh(\"ls\")",
            "tasker.exec: the command is empty (give {\"program\", \"arg\", ...})",
            "bad element #2 in 'tasker.exec' command (string expected, got table)",
            "bad option 'timeout' to 'tasker.exec' (positive number expected, got -1)",
            "unknown option 'shell' to 'tasker.exec' (known: accept_new_host_keys, check, cwd, env, host, stdin, stream, timeout)",
            "bad argument #1 to 'tasker.sh' (string expected, got number)",
        ])
    }

    @Test func streamWritesEachLinePrefixedAsItArrivesAndStillCaptures() async throws {
        let r = try await runLua("""
            local a = tasker.add{name = "build", run = function()
              local out = tasker.sh("echo one; echo two >&2; printf '%0100000d' 0 | tr 0 x; echo; printf 'no newline'", {stream = true})
              return #out.stdout, out.stderr
            end}
            local b = tasker.add{name = "lint", run = function()
              return #tasker.exec{"printf", "a\\nb\\n", stream = true}.stdout
            end}
            print(a:await())
            print(b:await())
            """)
        #expect(r.lines == ["100015\ttwo", "", "4"], "\(r.output.prefix(500))")
        let lines = r.diagnostics.split(separator: "\n").map(String.init)
        #expect(lines.contains("[build] one") && lines.contains("[build] two") && lines.contains("[build] no newline"))
        #expect(lines.contains("[lint] a") && lines.contains("[lint] b"))
        // a 100 KB line arrives whole, never cut where the pipe's chunks end
        let long = lines.filter { $0.hasPrefix("[build] xx") }.map(\.count)
        #expect(long == [100_008])
    }

    @Test func childrenGetNoDescriptorsBeyondTheStandardThreeAndFindProgramsOnPATH() async throws {
        let r = try await runLua("""
            local f = assert(io.open(os.tmpname(), "w"))  -- not close-on-exec
            local fds = tasker.exec{"ls", "/proc/self/fd"}.stdout
            local n = 0
            for _ in fds:gmatch("%d+") do n = n + 1 end
            print(n)  -- 0, 1, 2 and the directory ls itself opened
            print(tasker.exec{"sh", "-c", "echo $0"}.stdout)
            f:close()
            """)
        #expect(r.lines == ["4", "sh", ""], "\(r.output)")
    }
}
