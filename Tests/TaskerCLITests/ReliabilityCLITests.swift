import Foundation
import Testing

/// Whether `pid` is still a live process 2 s from now (a SIGKILL sent just
/// before takes a moment to land; a zombie waiting to be reaped is gone).
func processAlive(_ pid: Int32) -> Bool {
    let end = Date().addingTimeInterval(2)
    while Date() < end {
        if !processAliveNow(pid) { return false }
        usleep(20_000)
    }
    return processAliveNow(pid)
}

func processAliveNow(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}

@Suite struct EventsOutputTests {
    @Test func eventsGoToASymlinkTargetAndTheLinkStays() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'x', run = function() end}\n"])
        defer { s.cleanup() }
        let target = s.dir.appendingPathComponent("real.jsonl").path
        let link = s.dir.appendingPathComponent("link.jsonl").path
        try "old".write(toFile: target, atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let r = try await tasker(["run", "--events", link, "p.lua"], in: s.dir)
        #expect(r.status == 0)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
        let text = try String(contentsOfFile: target, encoding: .utf8)
        #expect(text.hasPrefix("{") && text.contains("\"event\":\"finished\"") && !text.contains("old"))
    }

    @Test func eventsGoIntoAFIFOInPlace() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'x', run = function() end}\n"])
        defer { s.cleanup() }
        let fifo = s.dir.appendingPathComponent("events.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // A reader drains the FIFO while tasker writes it.
        let r = try await shell("cat events.fifo > got.jsonl & \"$TASKER\" run --events events.fifo p.lua; wait", in: s.dir)
        #expect(r.status == 0)
        var st = stat()
        #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO)
        let got = try String(contentsOfFile: s.dir.appendingPathComponent("got.jsonl").path, encoding: .utf8)
        #expect(got.contains("\"event\":\"run\"") && got.contains("\"event\":\"end\""))
    }

    @Test func eventsToStdoutWithDash() async throws {
        let s = try Scratch(["p.lua": "print('hello')\ntasker.add{name = 'x', run = function() end}\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--events", "-", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.contains("hello"))
        #expect(lines.first?.contains("\"event\":\"run\"") == true)
        #expect(lines.last?.contains("\"event\":\"end\"") == true)
    }

    @Test func anEventsPathThatCannotBeOpenedIsAClearErrorWithoutUsageText() async throws {
        let s = try Scratch(["p.lua": "print('ran')\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--events", s.dir.path, "p.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("Is a directory"))
        #expect(!r.stderr.contains("USAGE"))
        #expect(r.stdout.isEmpty)
    }

    @Test func stdoutWriteErrorsAreReportedAndExitTwo() async throws {
        let s = try Scratch(["p.lua": "for i = 1, 10000 do print('line', i) end\ntasker.add(function() end)\n"])
        defer { s.cleanup() }
        let full = try await shell("\"$TASKER\" run p.lua > /dev/full", in: s.dir)
        #expect(full.status == 2)
        #expect(full.stderr.contains("cannot write to stdout"))
        #expect(full.stderr.contains("1 task: 1 succeeded"))
        let closed = try await shell("\"$TASKER\" run p.lua >&-", in: s.dir)
        #expect(closed.status == 2)
        #expect(closed.stderr.contains("cannot write to stdout"))
    }

    @Test func anEventsFileThatFailsIsReported() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'x', run = function() end}\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--events", "/dev/full", "p.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("cannot write to '/dev/full'"))
        #expect(r.stderr.contains("1 task: 1 succeeded"))
    }

    @Test func requestEventsShowEachAttemptWithSecretsRedacted() async throws {
        let s = try Scratch(["p.lua": """
            local h = tasker.add{name = "call", run = function()
              return http.get("http://alice:PW@127.0.0.1:1/x?token=T0K&page=2", {retry = {attempts = 2, delay = 0.01}})
            end}
            h:result()
            """])
        defer { s.cleanup() }
        let events = s.dir.appendingPathComponent("ev.jsonl").path
        let r = try await tasker(["run", "--events", events, "p.lua"], in: s.dir)
        #expect(r.status == 1)
        let text = try String(contentsOfFile: events, encoding: .utf8)
        let requests = try text.split(separator: "\n")
            .map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
            .filter { $0["event"] as? String == "request" }
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0["url"] as? String == "http://***@127.0.0.1:1/x?token=***&page=2" && $0["method"] as? String == "GET" })
        #expect(requests.map { $0["code"] as? String } == ["connect", "connect"])
        #expect(requests.map { $0["attempt"] as? Int } == [1, 2])
        #expect(requests[0]["retry_in"] as? Double == 0.01 && requests[1]["retry_in"] == nil)
        for secret in ["PW", "T0K"] { #expect(!text.contains(secret) && !r.stderr.contains(secret)) }
    }

    @Test func hugeErrorMessagesAreCutInTheSummary() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'big', run = function() error(string.rep('x', 5 << 20), 0) end}\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stderr.utf8.count < 10_000)
        #expect(r.stderr.contains("more bytes)"))
    }

    @Test func aReaderThatGoesAwayWhileTheStatusLineIsShownDoesNotKillTheRun() async throws {
        // On a terminal (script(1)) print goes through the status line's
        // writer; a closed pipe on stdout is still a reported write error.
        let s = try Scratch(["p.lua": """
            for i = 1, 100000 do print("line", i) end
            tasker.add(function() io.open("AFTER", "w"):close() end)
            """])
        defer { s.cleanup() }
        let r = try await shell("script -qec '\"$TASKER\" run p.lua | head -1; echo rc=${PIPESTATUS:-$?}' /dev/null > out.txt 2>&1; cat out.txt", in: s.dir)
        #expect(r.stdout.contains("line\t1"))
        #expect(r.stdout.contains("cannot write to stdout"))
        #expect(FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("AFTER").path))
    }

    @Test func aReaderThatGoesAwayDoesNotKillTheRun() async throws {
        // `| head -1`: the rest of the output has nowhere to go, but the
        // dependent task and the finish handler still run.
        let s = try Scratch(["p.lua": """
            local a = tasker.add{name = "talk", run = function() for i = 1, 200000 do print("line", i) end end}
            local b = tasker.add{name = "after", after = a, run = function() io.open("AFTER", "w"):close() end}
            b:on("finish", function() io.open("FINISHED", "w"):close() end)
            """])
        defer { s.cleanup() }
        let r = try await shell("\"$TASKER\" run p.lua | head -1", in: s.dir)
        #expect(r.stdout.hasPrefix("line\t1\n"))
        #expect(FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("AFTER").path))
        #expect(FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("FINISHED").path))
        #expect(r.stderr.contains("2 tasks: 2 succeeded"))
        #expect(r.stderr.contains("cannot write to stdout"))
    }
}

@Suite struct ProcessAndSignalCLITests {
    @Test func childrenThatDoNotReadStdinDoNotKillTasker() async throws {
        let s = try Scratch(["p.lua": """
            local big = string.rep("x", 1 << 20)
            print(tasker.exec{"true", stdin = big}.code)
            print(#tasker.sh("head -c 10", {stdin = big}).stdout)
            print(tasker.exec{"true", timeout = 1e11}.code, tasker.exec{"true", timeout = 1e300}.code)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        #expect(r.stdout == "0\n10\n0\t0\n")
    }

    @Test func sigtermAndSighupEndTheRunWithASummary() async throws {
        for (sig, code, name) in [(SIGTERM, Int32(143), "SIGTERM"), (SIGHUP, Int32(129), "SIGHUP")] {
            let s = try Scratch(["p.lua": """
                local h = tasker.add{name = "waiter", run = function() print(tasker.sh("echo $$").stdout:sub(1, -2)); print("ready"); io.stdout:flush(); tasker.sleep(60) end}
                h:on("finish", function(_, state) print("finish", state); io.stdout:flush() end)
                """])
            defer { s.cleanup() }
            let r = try await taskerInterrupted(["run", "--no-progress", "p.lua"], in: s.dir, markers: ["ready"], signal: sig)
            #expect(r.status == code, "\(name)")
            #expect(r.stdout.contains("finish\tcancelled"), "\(name)")
            #expect(r.stderr.contains("(interrupted by \(name))"), "\(name)")
        }
    }

    @Test func backgroundChildrenAreKilledAtTheEndOfTheRun() async throws {
        let s = try Scratch(["p.lua": """
            print(tasker.sh("sleep 30 > /dev/null 2>&1 & echo $!").stdout)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        let pid = Int32(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(pid > 0)
        #expect(!processAlive(pid))
    }

    @Test func aSecondSignalKillsChildrenThatIgnoreSIGTERM() async throws {
        let s = try Scratch(["p.lua": """
            local stubborn = tasker.add(function()
              tasker.sh("trap '' TERM; echo $$ > CHILD; sleep 30")
            end)
            stubborn:on("finish", function() print("cancelled now"); io.stdout:flush() end)
            tasker.add(function()
              while not io.open("CHILD") do tasker.sleep(0.01) end
              print("ready"); io.stdout:flush()
            end)
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "p.lua"], in: s.dir, markers: ["ready", "cancelled now"], signal: SIGINT)
        #expect(r.status == 130)
        let pid = Int32((try String(contentsOfFile: s.dir.appendingPathComponent("CHILD").path, encoding: .utf8))
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(pid > 0)
        #expect(!processAlive(pid))
    }

    @Test func theFirstSignalStopsALoopThatCatchesEveryError() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "stubborn", run = function()
              print("ready"); io.stdout:flush()
              while true do pcall(function() while true do end end) end
            end}
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "p.lua"], in: s.dir, markers: ["ready"], signal: SIGTERM)
        #expect(r.status == 143)
        #expect(!r.stderr.contains("interrupted again"))
        #expect(r.stderr.contains("1 task: 0 succeeded, 0 failed, 1 cancelled"))
    }

    @Test func anInterruptEndsARunWhoseTasksAreHeld() async throws {
        let s = try Scratch(["p.lua": """
            -- busy starts before the interceptor exists (a task passing it would release the others)
            tasker.add{name = "busy", run = function() tasker.sleep(60) end}
            tasker.sleep(0)
            tasker.intercept{name = "hold-all", max_hold = 100, fn = function(t) return "hold" end}
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add{name = "held" .. i, run = function() end} end
            while hs[3]:state() ~= "held" do tasker.sleep(0.01) end
            print("ready"); io.stdout:flush()
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "p.lua"], in: s.dir, markers: ["ready"])
        #expect(r.status == 130)
        #expect(!r.stderr.contains("interrupted again"))
        #expect(r.stderr.contains("4 tasks: 0 succeeded, 0 failed, 4 cancelled"))
    }

    @Test func nothingStartsAfterAnInterrupt() async throws {
        // One slot: a spinner holds it; the task behind it must never run
        // once SIGINT has arrived, however the interrupt races the spinner.
        let s = try Scratch(["p.lua": """
            tasker.add{name = "spin", run = function() print("ready"); io.stdout:flush(); while true do end end}
            tasker.add{name = "deploy", run = function() tasker.sh("echo deployed > SIDE_EFFECT") end}
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--concurrency", "1", "p.lua"], in: s.dir, markers: ["ready"])
        #expect(r.status == 130)
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("SIDE_EFFECT").path))
        #expect(r.stderr.contains("2 tasks: 0 succeeded, 0 failed, 2 cancelled"))
    }

    @Test func aMainChunkRaisingATaskErrorExitsOne() async throws {
        let s = try Scratch(["p.lua": """
            local build = tasker.add{name = "build", run = function() error("compiler crashed") end}
            local ship = tasker.add{name = "ship", after = build, run = function() end}
            tasker.all({build})
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stderr.contains("tasker: error (from task 'build')"))
        #expect(r.stderr.contains("  ship: skipped: dependency 'build' failed"))
    }

    @Test func osExitEndsTheRunLikeTaskerExit() async throws {
        let s = try Scratch(["p.lua": """
            local h = tasker.add{name = "long", run = function() tasker.sleep(60) end}
            h:on("finish", function(_, state) print("finish", state) end)
            tasker.sleep(0.05)
            os.exit(3)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua"], in: s.dir)
        #expect(r.status == 3)
        #expect(r.stdout == "finish\tcancelled\n")
        #expect(r.stderr.contains("1 task: 0 succeeded, 0 failed, 1 cancelled"))
    }

    @Test func bareTaskerAndBadVarsAreUsageErrorsThatDoNotEchoSecrets() async throws {
        let bare = try await tasker([])
        #expect(bare.status == 2)
        #expect(bare.stderr.contains("USAGE"))
        let secret = try await tasker(["run", "--var", "hunter2-password", "x.lua"])
        #expect(secret.status == 2)
        #expect(!secret.stderr.contains("hunter2"))
        let empty = try await tasker(["run", "--var", "=x", "x.lua"])
        #expect(empty.status == 2)
        #expect(empty.stderr.contains("the key is empty"))
    }
}

@Suite struct ScheduleMemoryTests {
    @Test func finishedEveryInstancesDoNotAccumulate() async throws {
        // 40,000 instances of 100 schedules, in a process of its own: memory
        // after the first 20,000 must not grow with the rest (the engine's
        // records and Lua parts grew ~420 B per instance). Without the
        // journal: its writer lags the loop by a backlog whose peak malloc
        // keeps, and on a loaded machine that lag alone passed 4 MiB.
        let s = try Scratch(["every.lua": """
            local function rss()
              local f = io.open("/proc/self/status"); local s = f:read("a"); f:close()
              return tonumber(s:match("VmRSS:%s*(%d+)"))
            end
            local n, early, hs = 0, nil, {}
            for i = 1, 100 do
              hs[i] = tasker.every(0.001, {name = "e" .. i, run = function()
                n = n + 1
                if n == 20000 then collectgarbage(); early = rss() end
                if n == 40000 then
                  collectgarbage()
                  print((rss() - early) < 4096)
                  for _, h in ipairs(hs) do h:cancel() end
                end
              end})
            end
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-journal", "every.lua"], in: s.dir)
        #expect(r.status == 0)
        #expect(r.stdout == "true\n")
        #expect(r.stderr.contains("(groups and schedules: 100 cancelled)"))
    }
}

@Suite struct PauseSignalTests {
    /// SIGUSR1 pauses a real run half-way (the running task finishes, no new
    /// one starts); SIGUSR2 lets it go on.
    @Test func usr1PausesStartsAndUsr2ResumesThem() async throws {
        // host-1 runs until the test creates `go`, which it does once the
        // pause is acknowledged; when host-1 has ended, host-2 would start
        // at once were starts not paused.
        let s = try Scratch(["roll.lua": """
            local function exists(path)
              local f = io.open(path)
              if f then f:close() end
              return f ~= nil
            end
            for i = 1, 4 do
              tasker.add{name = "host-" .. i, run = function()
                io.write("start ", i, "\\n"); io.stdout:flush()
                local t0 = tasker.now()
                while i == 1 and not exists("go") do
                  if tasker.now() - t0 > 300 then error("never told to go") end
                  tasker.sleep(0.01)
                end
                io.write("end ", i, "\\n"); io.stdout:flush()
              end}
            end
            """])
        defer { s.cleanup() }
        let p = try Background(["run", "--no-progress", "--no-journal", "--concurrency", "1", "roll.lua"], in: s.dir)
        #expect(await p.waitFor("start 1\n"))
        p.signal(SIGUSR1)
        #expect(await p.waitFor("INFO paused: nothing new starts until SIGUSR2", onStderr: true))
        try "".write(to: s.dir.appendingPathComponent("go"), atomically: true, encoding: .utf8)
        #expect(await p.waitFor("end 1\n"))
        // A bound, not a wait for something: host-2 starting within 0.8 s
        // of host-1's end fails the test.
        let startedWhilePaused = await p.waitFor("start 2", seconds: 0.8)
        #expect(!startedWhilePaused, "\(p.output)")
        #expect(p.output == "start 1\nend 1\n")
        p.signal(SIGUSR2)
        let r = await p.finish(within: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "start 1\nend 1\nstart 2\nend 2\nstart 3\nend 3\nstart 4\nend 4\n")
        #expect(r.stderr.contains("INFO resumed"))
    }
}
