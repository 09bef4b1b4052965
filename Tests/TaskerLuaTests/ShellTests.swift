import Foundation
import Testing

/// os.execute and io.popen keep their Lua manual results but wait on the
/// engine instead of blocking it.
@Suite struct ShellTests {
    @Test func osExecuteReportsLikeLuaAndDoesNotBlockOtherTasks() async throws {
        // The command waits (at most 20 s) for the ticker's fifth tick: it
        // never comes if the command blocks the engine.
        let marker = "/tmp/tk-ticks-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let r = try await runLua("""
            local ticks = 0
            tasker.add{name = "ticker", run = function()
              for _ = 1, 10 do tasker.sleep(0.02); ticks = ticks + 1; if ticks == 5 then fs.write("\(marker)", "") end end
            end}
            print(os.execute("i=0; while [ ! -e \(marker) ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done"))
            print(ticks >= 5)
            print(os.execute("exit 3"))
            print(os.execute("kill -TERM $$"))
            print(os.execute())
            """)
        #expect(r.lines == ["true\texit\t0", "true", "nil\texit\t3", "nil\tsignal\t15", "true"])
    }

    /// A script's strings are bytes: a command or argument that is not
    /// UTF-8 (a file name in Latin-1) reaches the program as it is, through
    /// every way of running one (each bad byte became U+FFFD, another name).
    @Test func commandsAndArgumentsReachTheProgramByteForByte() async throws {
        let dir = try makeScratchDirectory("bytes")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runLua("""
            local d = "\(dir)"
            print(tasker.exec{"printf", "%s|", "", "a\\xffb"}.stdout == "|a\\xffb|")
            print(tasker.sh("printf 'x\\xfe'").stdout == "x\\xfe")
            local p = io.popen("printf 'y\\xfd'") print(p:read("a") == "y\\xfd") p:close()
            print(os.execute("touch " .. d .. "/caf\\xe9"))
            local f = io.open(d .. "/caf\\xe9") print(f ~= nil) f:close()
            print(tasker.exec{"ls", d}.stdout == "caf\\xe9\\n")
            print(select(2, pcall(tasker.exec, {"true", cwd = d .. "/caf\\xe9"})).message)
            print(select(2, pcall(tasker.exec, {"true"}, {cwd = d})).message:match("^[^;]*"))
            print(select(2, pcall(tasker.exec, {"ls", "caf\\xe9", host = "nohost.invalid"})).message)
            print(select(2, pcall(tasker.exec, {"ls", host = "h\\xff"})).message)
            -- the program's own name, and tasker's environment, as bytes too
            assert(os.execute("printf '#!/bin/sh\\\\necho ran\\\\n' > " .. d .. "/pr\\xffog && chmod +x " .. d .. "/pr\\xffog"))
            print(tasker.exec{d .. "/pr\\xffog"}.stdout == "ran\\n")
            """)
        #expect(r.lines == ["true", "true", "true", "true\texit\t0", "true", "true",
                            "bad option 'cwd' to 'tasker.exec' (UTF-8 string without a NUL byte expected, got string)",
                            "tasker.exec takes one argument, the command with its options, and got table as argument #2",
                            "tasker.exec: a command on a host must be UTF-8 (run it here, or name the files in UTF-8)",
                            "bad option 'host' to 'tasker.exec' (a UTF-8 host name expected)", "true"],
                "\(r.output)\(r.diagnostics)")
    }

    /// A relative directory on PATH (an empty one is `.`) is the child's,
    /// under `cwd`, as a shell started there would search it; a program
    /// found before and since removed is searched for again.
    @Test func pathIsSearchedFromTheChildsDirectory() async throws {
        let dir = try makeScratchDirectory("path")
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runLua("""
            local d = "\(dir)"
            -- written by a shell: a file this process has open for writing
            -- cannot be run while another test's child is being started
            local function tool(path, says)
              assert(os.execute("printf '#!/bin/sh\\\\necho " .. says .. "\\\\n' > '" .. path .. "' && chmod 755 '" .. path .. "'"))
            end
            tool(d .. "/tool", "top")
            tool(d .. "/sub/tool", "sub")
            local env = {PATH = ":/usr/bin:/bin"}
            print(tasker.exec{"tool", cwd = d .. "/sub", env = env}.stdout)
            print(tasker.exec{"tool", cwd = d, env = env}.stdout)
            fs.remove(d .. "/sub/tool")
            print(select(2, pcall(tasker.exec, {"tool", cwd = d .. "/sub", env = env})).message:match("no such program on PATH"))
            tool(d .. "/sub/tool", "sub again")
            print(tasker.exec{"tool", cwd = d .. "/sub", env = env}.stdout)
            """)
        #expect(r.lines == ["sub", "", "top", "", "no such program on PATH", "sub again", ""], "\(r.output)\(r.diagnostics)")
    }

    @Test func popenStreamsLinesWhileOtherTasksRun() async throws {
        let marker = "/tmp/tk-ticks-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let r = try await runLua("""
            local ticks = 0
            tasker.add{name = "ticker", run = function()
              for _ = 1, 10 do tasker.sleep(0.02); ticks = ticks + 1; if ticks == 5 then fs.write("\(marker)", "") end end
            end}
            local seen = {}
            local f = io.popen("echo one; i=0; while [ ! -e \(marker) ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; echo two")
            for line in f:lines() do
              seen[#seen + 1] = line .. "@" .. ticks
            end
            print(seen[1]:match("^one@") ~= nil, seen[2]:match("^two@") ~= nil, #seen)
            print(tonumber(seen[2]:match("@(%d+)")) >= 5)
            print(f:close())
            """)
        #expect(r.lines == ["true\ttrue\t2", "true", "true\texit\t0"])
    }

    @Test func popenReadFormatsAndWriteMode() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tk-popen-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.txt").path
        let r = try await runLua("""
            local g = io.popen("printf '12 3.5 0x10 rest\\\\nline2\\\\nline3\\\\nxyz'")
            print(g:read("n", "n", "n", "l"))
            print(g:read("L"), g:read(2), g:read("a"))
            print(g:read("a"), g:read("l"))
            print(g:close())
            local w = io.popen("cat > \(out)", "w")
            print(w:write("hello ", 42, "\\n") == w)
            print(w:close())
            print(io.open("\(out)"):read("a"))
            print(pcall(io.popen, "true", "rw"))
            """)
        #expect(r.lines == [
            "12\t3.5\t16\t rest",
            "line2",
            "\tli\tne3",
            "xyz",
            "\tnil",
            "true\texit\t0",
            "true",
            "true\texit\t0",
            "hello 42",
            "",
            "false\tusage: bad argument #2 to 'io.popen' (invalid mode 'rw': \"r\" or \"w\" expected)",
        ])
    }

    @Test func cancellingATaskTerminatesItsPopenCommand() async throws {
        let r = try await runLua("""
            local pid
            local h = tasker.add{name = "tail", run = function()
              local f = io.popen("echo $$; while true; do echo tick; sleep 0.05; done")
              pid = f:read("l")
              for _ in f:lines() do end
            end}
            while not pid do tasker.sleep(0.01) end
            h:cancel()
            print(select(2, h:result()).kind)
            local gone = false
            for _ = 1, 250 do  -- up to 5 s
              if not os.execute("kill -0 " .. pid .. " 2>/dev/null") then gone = true; break end
              tasker.sleep(0.02)
            end
            print(gone)
            """)
        #expect(r.lines == ["cancelled", "true"])
    }

    @Test func whereNothingCanYieldLuasOwnFunctionsRun() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "probe", fn = function(t)
              local f = io.popen("echo from-interceptor")
              t.args.seen = f:read("l")
              f:close()
              t.args.ok = os.execute("true")
            end}
            local h = tasker.add{name = "t", run = function(ctx) return ctx.args.seen, ctx.args.ok end}
            print(h:await())
            """)
        #expect(r.lines == ["from-interceptor\ttrue"])
    }
}
