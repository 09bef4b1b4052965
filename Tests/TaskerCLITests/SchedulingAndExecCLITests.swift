import Foundation
import Testing

/// Through the built CLI: the order ready tasks start in, and how `exec`
/// failures are retried and explained.
@Suite struct SchedulingAndExecCLITests {
    /// At concurrency 1 an extract -> transform -> load pipeline finishes
    /// one chain before it starts the next (it once ran every extract
    /// first).
    @Test func chainsFinishOneByOneAtConcurrencyOne() async throws {
        let s = try Scratch(["etl.lua": """
            local function step(name) return function() io.write(name, " "); io.stdout:flush() end end
            for i = 1, 3 do
              local e = tasker.add{name = "e" .. i, run = step("e" .. i)}
              local t = tasker.add{name = "t" .. i, after = e, run = step("t" .. i)}
              tasker.add{name = "l" .. i, after = t, run = step("l" .. i)}
            end
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "--concurrency", "1", "etl.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "e1 t1 l1 e2 t2 l2 e3 t3 l3 ")
    }

    /// A timeout or Ctrl-C with a child running ends when the child is
    /// gone (SIGTERM is enough for `sleep`), not after the 2 s SIGKILL grace.
    @Test func aStoppedChildDoesNotHoldTheRunForItsGrace() async throws {
        let s = try Scratch(["t.lua": """
            tasker.add{timeout = 0.3, run = function() tasker.exec{"sleep", "5"} end}
            """, "c.lua": """
            tasker.add{run = function() print("child started"); io.stdout:flush(); tasker.exec{"sleep", "5"} end}
            """])
        defer { s.cleanup() }
        // the run's own clock (its summary): the 2 s grace showed as 2.3 s
        func seconds(_ stderr: String) -> Double? {
            stderr.range(of: " in ").flatMap { r in Double(stderr[r.upperBound...].prefix { $0.isNumber || $0 == "." }) }
        }
        let timedOut = try await tasker(["run", "--no-progress", "--no-journal", "t.lua"], in: s.dir)
        #expect(timedOut.status == 1)
        #expect(seconds(timedOut.stderr).map { $0 < 1.8 } == true, "\(timedOut.stderr)")
        let interrupted = try await taskerInterrupted(["run", "--no-progress", "--no-journal", "c.lua"], in: s.dir,
                                                      markers: ["child started"])
        #expect(interrupted.status == 130)
        #expect(seconds(interrupted.stderr).map { $0 < 1.8 } == true, "\(interrupted.stderr)")
    }

    /// A command that leaves something running in the background (`cmd &`)
    /// holding its output pipes returns soon after it exits, with what it
    /// wrote, as its code says; the background process lives on and is
    /// stopped with the run's leftover process groups at the end.
    @Test func aBackgroundChildHoldingTheOutputDoesNotHoldTheTask() async throws {
        let s = try Scratch(["bg.lua": """
            tasker.add{name = "bg", run = function()
              local r = tasker.sh("echo before; sleep 40 & echo $! > bg.pid; echo after; exit 3", {check = false})
              io.write(r.code, " ", r.stdout); io.stdout:flush()
              local alive = tasker.sh("kill -0 $(cat bg.pid) && echo alive", {check = false})
              io.write(alive.stdout); io.stdout:flush()
            end}
            tasker.add{name = "streamed", run = function()
              local r = tasker.sh("echo line1; (sleep 40; echo late) & echo line2", {stream = true})
              io.write(r.code, " ", r.stdout); io.stdout:flush()
            end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "bg.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("3 before\nafter\n") && r.stdout.contains("alive\n"), "\(r.stdout)")
        #expect(r.stdout.contains("0 line1\nline2\n"), "\(r.stdout)")
        #expect(r.stderr.contains("[streamed] line1\n") && r.stderr.contains("[streamed] line2\n"), "\(r.stderr)")
        // generous: it used to take the 40 s of the background sleep
        let took = r.stderr.range(of: " in ").flatMap { m in Double(r.stderr[m.upperBound...].prefix { $0.isNumber || $0 == "." }) }
        #expect(took.map { $0 < 20 } == true, "\(r.stderr)")
        let pid = try String(contentsOf: s.dir.appendingPathComponent("bg.pid"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // gone with the run (SIGTERM to the leftover group, reaped by init)
        var gone = false
        for _ in 0..<200 where !gone {
            gone = kill(pid_t(pid) ?? 0, 0) != 0 || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))
                .map { $0.contains(") Z ") } == true
            if !gone { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        #expect(gone, "background sleep \(pid) outlived the run")
    }

    /// A command that ended in time does not fail for what it left running
    /// when its timeout (or its task's) is shorter than the grace; and
    /// however many commands leave something running, tasker's descriptors
    /// stay bounded (their pipes are given up past a number).
    @Test func backgroundChildrenNeitherTimeOutAFinishedCommandNorUseUpDescriptors() async throws {
        let s = try Scratch(["p.lua": """
            print(tasker.sh("sleep 5 & echo hi", {timeout = 0.8}).stdout)
            print(tasker.add{timeout = 0.9, run = function() return tasker.sh("sleep 5 & echo started").stdout end}:await())
            local hs = {}
            for i = 1, 100 do hs[i] = tasker.add(function() return tasker.sh("sleep 3 & echo " .. i).code end) end
            local ok = 0
            for _, h in ipairs(hs) do if h:await() == 0 then ok = ok + 1 end end
            print(ok)
            """])
        defer { s.cleanup() }
        let script = "ulimit -n 256; exec \"$TASKER\" run --no-progress --no-journal --concurrency 40 p.lua"
        var env = ProcessInfo.processInfo.environment
        env["TASKER"] = taskerBinary().path
        let r = await collect(try launch(["-c", script], in: s.dir, executable: URL(fileURLWithPath: "/bin/sh"), environment: env))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "hi\n\nstarted\n\n100\n", "\(r.stdout)\(r.stderr)")
    }

    /// A timeout of centuries is no timeout (the loop's wait for a timer
    /// between 2^63 and 2^64 ns away trapped, killing the run).
    @Test func aTimeoutOfCenturiesIsNoTimeout() async throws {
        let s = try Scratch(["big.lua": """
            print(tasker.sh("true", {timeout = 9.3e9}).code)
            print(tasker.add{timeout = 1e10, run = function() return tasker.sh("true", {timeout = 1.5e10}).code end}:await())
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "big.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "0\n0\n")
    }

    @Test func aMissingProgramIsTriedOnceAndExecErrorsSayWhatToDo() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "deploy", retry = {attempts = 5, delay = 0.01}, run = function()
              io.write("try\\n"); io.stdout:flush()
              tasker.exec{"tasker-no-such-deploy-tool", "--prod"}
            end}
            tasker.add{name = "check", run = function() tasker.exec{"sh", "-c", "echo bad >&2; exit 2"} end}
            tasker.add{name = "list", run = function() tasker.exec("ls -la") end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stdout == "try\n", "retried: \(r.stdout)")
        #expect(r.stderr.contains("failed deploy: p.lua:3: exec: cannot run 'tasker-no-such-deploy-tool --prod': no such program on PATH"), "\(r.stderr)")
        #expect(r.stderr.contains("exited with code 2: bad (check = false returns the code instead)"), "\(r.stderr)")
        #expect(r.stderr.contains("for a shell command line use tasker.sh(\"ls -la\")"), "\(r.stderr)")
    }
}

/// Paths: `tasker.script_dir` is the pipeline's directory, absolute, from
/// wherever tasker is run; `tasker.use` resolves from it, `io.open` from
/// the current directory.
@Suite struct ScriptDirCLITests {
    @Test func scriptDirIsThePipelinesDirectoryFromAnywhere() async throws {
        let s = try Scratch(["sub/p.lua": """
            print(tasker.script_dir)
            tasker.use("rules.lua")
            local f = io.open(tasker.script_dir .. "/data.txt"); print(f:read("a")); f:close()
            print(io.open("data.txt") == nil)
            """, "sub/rules.lua": "print('rules loaded')\n", "sub/data.txt": "beside the script"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "sub/p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let dir = s.dir.appendingPathComponent("sub").standardizedFileURL.path
        #expect(r.stdout == "\(dir)\nrules loaded\nbeside the script\ntrue\n", "\(r.stdout)")
    }
}
