import Foundation
import Testing

@Suite struct CLITests {
    /// tasker's own environment reaches the programs it runs as bytes: a
    /// value (or a directory on PATH) that is not UTF-8 is not changed.
    @Test func theEnvironmentReachesProgramsByteForByte() async throws {
        let s = try Scratch(["p.lua": """
            print(tasker.exec{"sh", "-c", 'printf %s "$WEIRD"'}.stdout == "a\\xffb")
            print(tasker.sh('printf %s "$WEIRD"').stdout == "a\\xffb")
            print(tasker.exec{"tool"}.stdout)
            """])
        defer { s.cleanup() }
        let r = try await shell("""
            d=$(printf 'bin\\376'); mkdir "$d" && printf '#!/bin/sh\\necho tool ran\\n' > "$d/tool" && chmod +x "$d/tool"
            WEIRD=$(printf 'a\\377b') PATH="$PWD/$d:$PATH" "$TASKER" run --no-progress --no-journal p.lua
            """, in: s.dir)
        #expect(r.stdout == "true\ntrue\ntool ran\n\n", "\(r.stdout)\(r.stderr)")
    }

    /// An argument that is not UTF-8 (the pipeline's path, one of its
    /// arguments) is refused, named: it would have become U+FFFD.
    @Test func anArgumentThatIsNotUTF8IsRefusedByName() async throws {
        let s = try Scratch(["p.lua": "print(tasker.args[1])\n"])
        defer { s.cleanup() }
        let r = try await shell("""
            "$TASKER" run --no-progress --no-journal p.lua "$(printf 'x\\377y')"; echo "rc=$?"
            """, in: s.dir)
        #expect(r.stdout == "rc=2\n", "\(r.stdout)")
        #expect(r.stderr.hasPrefix("tasker: error: argument 5 ('x\\xFFy') is not UTF-8: byte 0xFF at 2;"), "\(r.stderr)")
    }

    /// Pipelines in directories whose names differ only in bytes that are
    /// not UTF-8 are two pipelines in the journal (they were one: a resume
    /// in one reused the other's results).
    @Test func pipelinesInDirectoriesNamedInOtherBytesAreKeptApart() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'one', run = function() return 1 end}\n"])
        defer { s.cleanup() }
        let r = try await shell("""
            for b in 376 377; do d=$(printf "d\\\\$b"); mkdir "$d" && cp p.lua "$d" && (cd "$d" && "$TASKER" run --no-progress p.lua); done
            cd "$(printf 'd\\376')" && "$TASKER" run --no-progress --resume p.lua; "$TASKER" runs
            """, in: s.dir)
        #expect(r.stdout.contains("d\\xFE/p.lua") && r.stdout.contains("d\\xFF/p.lua"), "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("1 reused"), "\(r.stderr)")
    }

    /// A working directory whose name is not UTF-8: a used file beside the
    /// pipeline is found (the directory's name was made U+FFFD).
    @Test func aUsedFileIsFoundFromADirectoryWhoseNameIsNotUTF8() async throws {
        let s = try Scratch(["p.lua": "tasker.use('u.lua')\n", "u.lua": "print('used')\n"])
        defer { s.cleanup() }
        let r = try await shell("""
            d=$(printf 'd\\351'); mkdir "$d" && cp p.lua u.lua "$d" && cd "$d" && "$TASKER" run --no-progress --no-journal p.lua
            """, in: s.dir)
        #expect(r.stdout == "used\n", "\(r.stdout)\(r.stderr)")
    }

    @Test func versionAndHelp() async throws {
        let v = try await tasker(["--version"])
        #expect(v.status == 0)
        #expect(v.stdout == "tasker 0.1.0 (Lua 5.4)\n")
        let h = try await tasker(["--help"])
        #expect(h.status == 0)
        #expect(h.stdout.contains("run"))
        #expect(h.stdout.contains("check"))
        #expect(h.stdout.contains("130 interrupted"))
        let rh = try await tasker(["run", "--help"])
        for option in ["--concurrency", "--watch", "--var", "--log-level", "--events", "--no-progress"] {
            #expect(rh.stdout.contains(option), "run --help lacks \(option)")
        }
        #expect(rh.stdout.contains("USAGE: tasker run [<options>] <file>"), "\(rh.stdout)")
        // `run` is parsed on its own first; its usage errors read as the tree's
        for (args, said) in [(["run", "--concurrency", "0", "x.lua"], "--concurrency must be at least 1"),
                             (["run", "--bogus", "x.lua"], "Unknown option '--bogus'"),
                             (["run"], "Missing expected argument '<file>'")] {
            let r = try await tasker(args)
            #expect(r.status == 2, "\(args)")
            #expect(r.stderr.contains(said) && r.stderr.contains("Usage: tasker run [<options>] <file>"), "\(args): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        // what the tree finds wherever it is: a completion script, not a run
        let s = try Scratch(["f.lua": "print('the pipeline ran')"])
        defer { s.cleanup() }
        let completion = try await tasker(["run", "f.lua", "--generate-completion-script", "bash"], in: s.dir)
        #expect(completion.status == 0 && completion.stdout.hasPrefix("#!/bin/bash") && !completion.stdout.contains("pipeline ran"),
                "\(completion.stdout.prefix(200)) \(completion.stderr)")
    }

    @Test func successfulRunPrintsToStdoutAndSummaryToStderr() async throws {
        let s = try Scratch(["ok.lua": """
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add(function() return i end) end
            print("sum", tasker.all(hs)[3] + tasker.args[1] + tasker.vars.bonus)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--var", "bonus=100", "ok.lua", "10"], in: s.dir)
        #expect(r.status == 0)
        #expect(r.stdout == "sum\t113\n")
        #expect(r.stderr.contains("tasker: 3 tasks: 3 succeeded, 0 failed in"))
    }

    @Test func aFailedTaskExitsOneAndIsListedWithItsError() async throws {
        let s = try Scratch(["fail.lua": """
            tasker.add{name = "deploy", run = function() error("disk full") end}
            tasker.add{name = "fine", run = function() end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "fail.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stderr.contains("2 tasks: 1 succeeded, 1 failed"))
        #expect(r.stderr.contains("failed deploy: fail.lua:1: disk full"))
    }

    @Test func scriptErrorsExitTwoWithFileLineAndTraceback() async throws {
        let s = try Scratch([
            "syntax.lua": "local x = = 1\n",
            "raise.lua": "local function f()\n  error('bad config')\nend\nf()\n",
        ])
        defer { s.cleanup() }
        let syntax = try await tasker(["run", "syntax.lua"], in: s.dir)
        #expect(syntax.status == 2)
        #expect(syntax.stderr.contains("syntax.lua:1: unexpected symbol near '='"))
        let raise = try await tasker(["run", "raise.lua"], in: s.dir)
        #expect(raise.status == 2)
        #expect(raise.stderr.contains("raise.lua:2: bad config"))
        #expect(raise.stderr.contains("stack traceback:"))
        #expect(raise.stderr.contains("raise.lua:4: in main chunk"))
        // A pipeline file that cannot be read: one line with the system's
        // reason, no summary of a run that never was, nothing recorded.
        let missing = try await tasker(["run", "nope.lua"], in: s.dir)
        #expect(missing.status == 2)
        #expect(missing.stderr == "tasker: error: cannot open 'nope.lua': No such file or directory\n", "\(missing.stderr)")
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("dir.lua"), withIntermediateDirectories: true)
        let dir = try await tasker(["run", "dir.lua"], in: s.dir)
        #expect(dir.status == 2)
        #expect(dir.stderr == "tasker: error: cannot open 'dir.lua': Is a directory\n", "\(dir.stderr)")
        let runs = try await tasker(["runs"], in: s.dir)
        #expect(!runs.stdout.contains("nope.lua") && !runs.stdout.contains("dir.lua"), "\(runs.stdout)")
    }

    @Test func usageErrorsExitTwo() async throws {
        let r = try await tasker(["run", "--concurrency", "0", "x.lua"])
        #expect(r.status == 2)
        #expect(r.stderr.contains("--concurrency must be at least 1"))
        let v = try await tasker(["run", "--var", "novalue", "x.lua"])
        #expect(v.status == 2)
    }

    @Test func checkCompilesWithoutRunning() async throws {
        let s = try Scratch(["good.lua": "print('ran')\n", "bad.lua": "\n\nfor i = 1 do end\n"])
        defer { s.cleanup() }
        let good = try await tasker(["check", "good.lua"], in: s.dir)
        #expect(good.status == 0)
        #expect(good.stdout.isEmpty)
        let bad = try await tasker(["check", "good.lua", "bad.lua"], in: s.dir)
        #expect(bad.status == 2)
        #expect(bad.stdout == "bad.lua:3: ',' expected near 'do'\n")
    }

    @Test func concurrencyOptionLimitsRunningTasks() async throws {
        let s = try Scratch(["c.lua": """
            local running, peak, hs = 0, 0, {}
            for i = 1, 12 do hs[i] = tasker.add(function()
              running = running + 1; peak = math.max(peak, running)
              tasker.sleep(0.005); running = running - 1 end) end
            tasker.all(hs)
            print(peak)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--concurrency", "3", "c.lua"], in: s.dir)
        #expect(r.stdout == "3\n")
    }

    /// Cleanup code in the main chunk after an interrupt may add a task and
    /// wait for it: the task is cancelled at once (it would never start),
    /// not failed as a deadlock.
    @Test func aTaskAddedAfterAnInterruptIsCancelledNotADeadlock() async throws {
        let s = try Scratch(["cleanup.lua": """
            local long = tasker.add{name = "long", run = function() print("ready"); io.stdout:flush(); tasker.sleep(60) end}
            print("awaited", pcall(long.await, long))
            local rollback = tasker.add{name = "rollback", run = function() print("rollback ran") end}
            local ok, e = rollback:result()
            print("rollback", ok, e.kind, rollback:state())
            -- a group and a schedule too: cancelled, members never run, the run ends
            local g = tasker.parallel{function() print("member ran") end, function() print("member ran") end}
            print("group", g:result())
            local every = tasker.every(0.05, function() print("tick ran") end)
            print("every", every:state())
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--no-progress", "--no-journal", "cleanup.lua"], in: s.dir, markers: ["ready"])
        #expect(r.status == 130, "\(r.stderr)")
        #expect(r.stdout.contains("rollback\tfalse\tcancelled\tcancelled"), "\(r.stdout)")
        #expect(!r.stdout.contains("rollback ran") && !r.stdout.contains("member ran") && !r.stdout.contains("tick ran"),
                "\(r.stdout)")
        #expect(r.stdout.contains("group\tfalse") && r.stdout.contains("every\tcancelled"), "\(r.stdout)")
        #expect(!r.stderr.contains("deadlock"), "\(r.stderr)")
        #expect(r.stderr.contains("0 failed, 5 cancelled") && r.stderr.contains("(groups and schedules: 2 cancelled)"), "\(r.stderr)")
        #expect(!r.stderr.contains(" failed:") && !r.stderr.contains("1 failed"), "\(r.stderr)")
    }

    @Test func sigintCancelsEverythingRunsCancelPathsAndExits130() async throws {
        let s = try Scratch(["long.lua": """
            local sleeper = tasker.add{name = "sleeper", run = function() tasker.sleep(60) end}
            sleeper:on("finish", function(h, state) print("finish", h.name, state); io.stdout:flush() end)
            -- holds the one Lua thread: only the hook can stop it
            local spinner = tasker.add{name = "spinner", run = function()
              print("ready"); io.stdout:flush()
              while true do end
            end}
            sleeper:await()
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--no-progress", "long.lua"], in: s.dir, markers: ["ready"])
        #expect(r.status == 130)
        #expect(r.stdout.contains("finish\tsleeper\tcancelled"))
        #expect(r.stderr.contains("(interrupted by SIGINT)"))
        #expect(r.stderr.contains("2 tasks: 0 succeeded, 0 failed, 2 cancelled"))
        #expect(r.stderr.contains("  sleeper: cancelled: interrupted"))
    }

    @Test func aSecondSignalExitsAtOnce() async throws {
        let s = try Scratch(["stuck.lua": """
            tasker.add(function()
              local guard <close> = setmetatable({}, {__close = function()
                print("closing"); io.stdout:flush()
                while true do end
              end})
              print("ready"); io.stdout:flush()
              tasker.sleep(60)
            end)
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "stuck.lua"], in: s.dir, markers: ["ready", "closing"])
        #expect(r.status == 130)
        #expect(r.stderr.contains("interrupted again"))
    }

    /// Lua runs `__gc` finalizers with hooks off, so a finalizer that loops
    /// cannot be stopped: a first signal the run does not take up within
    /// 10 s ends it as a second would (it was ignored, the run spinning on).
    @Test func aSignalTheRunCannotAnswerStillEndsIt() async throws {
        let s = try Scratch(["gc.lua": """
            tasker.add{timeout = 1, run = function()
              setmetatable({}, {__gc = function() print("spinning"); io.stdout:flush(); while true do end end})
              collectgarbage()
            end}
            """])
        defer { s.cleanup() }
        let started = Date()
        let r = try await taskerInterrupted(["run", "--no-progress", "gc.lua"], in: s.dir, markers: ["spinning"])
        #expect(r.status == 130, "\(r.stderr)")
        #expect(r.stderr.contains("the run has not taken up the signal in 10 s"), "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 90, "a generous bound: it waits 10 s for the run (34 s seen from the launch in a loaded CI)")
    }

    /// `--events` or `--report` naming the pipeline file itself would
    /// truncate it (the report at the end, the events file before it ran).
    @Test func anOutputThatIsThePipelineFileIsRefused() async throws {
        let s = try Scratch(["p.lua": "print('ran')\n"])
        defer { s.cleanup() }
        for (flag, path) in [("--events", "p.lua"), ("--report", "./p.lua")] {
            let r = try await tasker(["run", flag, path, "p.lua"], in: s.dir)
            #expect(r.status == 2 && r.stdout.isEmpty, "\(r.stdout)\(r.stderr)")
            #expect(r.stderr == "tasker: error: \(flag) '\(path)' is the pipeline file itself (it would be overwritten)\n", "\(r.stderr)")
        }
        #expect(try String(contentsOf: s.dir.appendingPathComponent("p.lua"), encoding: .utf8) == "print('ran')\n")
        // nor the journal's file (truncated, the history was gone)
        _ = try await tasker(["run", "--state", "st", "p.lua"], in: s.dir)
        let j = try await tasker(["run", "--state", "st", "--events", "st/journal.db", "p.lua"], in: s.dir)
        #expect(j.status == 2 && j.stderr.contains("is the journal's file"), "\(j.stderr)")
        let runs = try await tasker(["runs", "--state", "st"], in: s.dir)
        #expect(runs.status == 0 && runs.stdout.contains("p.lua"), "\(runs.stdout)\(runs.stderr)")
    }

    /// `debug.sethook` would remove the hook that stops runaway code: a
    /// task that called it spun past its timeout and every signal but a
    /// second. It is refused at the caller's line.
    @Test func debugSethookIsRefused() async throws {
        let s = try Scratch(["hook.lua": """
            local h = tasker.add{timeout = 1, run = function() debug.sethook(); while true do end end}
            print(h:result())
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "hook.lua"], in: s.dir)
        #expect(r.stdout.hasPrefix("false\thook.lua:1: debug.sethook is not available in tasker"), "\(r.stdout)")
        #expect(r.status == 1, "\(r.stderr)")
    }
}

@Suite struct EventsAndExamplesTests {
    @Test func eventsFileHasOneJSONObjectPerEventInOrder() async throws {
        let s = try Scratch(["ev.lua": """
            local h = tasker.add{name = "job", retry = {attempts = 2, delay = 0},
              run = function(ctx) ctx:progress(0.5, "half"); if ctx.attempt == 1 then error("once", 0) end end}
            h:await()
            """])
        defer { s.cleanup() }
        let events = s.dir.appendingPathComponent("events.jsonl").path
        let r = try await tasker(["run", "--events", events, "ev.lua"], in: s.dir)
        #expect(r.status == 0)
        let lines = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n")
        let all = try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        #expect(all.map { $0["event"] as! String } == ["run", "added", "started", "progress", "retry", "progress", "finished", "end"])
        #expect(all.first?["pipeline"] as? String == s.dir.appendingPathComponent("ev.lua").resolvingSymlinksInPath().path)
        #expect(all.last?["exit_code"] as? Int == 0)
        #expect((all.last?["counts"] as? [String: Int])?["succeeded"] == 1)
        #expect(all.allSatisfy { ($0["ts"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil })
        #expect(all[1]["after"] as? [Int] == [] && all[1]["tags"] as? [String] == [])
        let objects = Array(all.dropFirst().dropLast())
        #expect(objects.allSatisfy { $0["name"] as? String == "job" && $0["id"] as? Int == 1 && $0["t"] is Double })
        #expect(objects[3]["error"] as? String == "once")
        #expect(objects[5]["state"] as? String == "succeeded")
        // every task event has `error`: null when there is none
        #expect(objects.allSatisfy { $0.keys.contains("error") }, "\(objects)")
        #expect(objects.filter { $0["event"] as? String != "retry" }.allSatisfy { $0["error"] is NSNull }, "\(objects)")
    }

    /// `added` carries the ids it waits for; pauses, their ends and the
    /// stop are events too.
    @Test func eventsCarryDependenciesPausesAndTheStop() async throws {
        let s = try Scratch(["ev.lua": """
            local a = tasker.add{name = "a", run = function() end}
            local b = tasker.add{name = "b", run = function() end}
            local c = tasker.add{name = "c", after = {a, b}, run = function() end}
            c:pause()
            tasker.pause()
            tasker.resume()
            c:resume()
            c:await()
            tasker.exit(3)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--events", "ev.jsonl", "ev.lua"], in: s.dir)
        #expect(r.status == 3)
        let all = try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8).split(separator: "\n")
            .map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        let added = all.filter { $0["event"] as? String == "added" }
        #expect(added.map { $0["after"] as? [Int] } == [[], [], [1, 2]])
        let marks = all.filter { ["paused", "resumed", "stopped"].contains($0["event"] as? String ?? "") }
            .map { "\($0["event"]!) \($0["id"].map { "\($0)" } ?? "-") \($0["reason"] ?? "")" }
        #expect(marks == ["paused 3 ", "paused - ", "resumed - ", "resumed 3 ", "stopped - exit(3)"], "\(marks)")
    }

    @Test func secretHeaderValuesNeverReachTheEventsFileOrStderr() async throws {
        // A failing request with secret headers, logged at debug level: the
        // error lands in the events file and the summary, the headers do not.
        let s = try Scratch(["sec.lua": """
            local h = tasker.add{name = "call", run = function()
              return http.get("http://127.0.0.1:1/x", {retry = false,
                headers = {Authorization = "Bearer s3cret-token", ["X-Api-Key"] = "k3y-value", Cookie = "c00kie"}})
            end}
            h:result()
            """])
        defer { s.cleanup() }
        let events = s.dir.appendingPathComponent("sec.jsonl").path
        let r = try await tasker(["run", "--log-level", "debug", "--events", events, "sec.lua"], in: s.dir)
        #expect(r.status == 1)
        let text = try String(contentsOfFile: events, encoding: .utf8)
        #expect(text.contains("\"event\":\"finished\"") && text.contains("could not connect"))
        #expect(r.stderr.contains("authorization=***") && r.stderr.contains("x-api-key=***") && r.stderr.contains("cookie=***"))
        for secret in ["s3cret-token", "k3y-value", "c00kie"] {
            #expect(!text.contains(secret) && !r.stderr.contains(secret) && !r.stdout.contains(secret))
        }
    }

    @Test func helloExampleRuns() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let r = try await tasker(["run", "examples/hello.lua", "tasker"], in: root)
        #expect(r.status == 0)
        #expect(r.stdout == """
            retrying flaky after attempt 1: examples/hello.lua:19: not yet (attempt 1)
            retrying flaky after attempt 2: examples/hello.lua:19: not yet (attempt 2)
            hello, tasker; flaky worked on attempt 3
            squares: 1 4 9 16 25 36 49 64 81 100

            """)
        #expect(r.stderr.contains("13 tasks: 13 succeeded, 0 failed"))
    }
}

@Suite struct InterceptorEventsTests {
    @Test func heldReleasedAndReactingAppearInTheEventsFile() async throws {
        let s = try Scratch(["hr.lua": """
            tasker.intercept{name = "batch", fn = function(t, held) if held < 1 then return "hold" end end}
            tasker.react{name = "look", when = function() return true end, fn = function() end}
            tasker.all({tasker.add{name = "a", run = function() end}, tasker.add{name = "b", run = function() end}})
            """])
        defer { s.cleanup() }
        let events = s.dir.appendingPathComponent("ev.jsonl").path
        let r = try await tasker(["run", "--events", events, "hr.lua"], in: s.dir)
        #expect(r.status == 0)
        let objects = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n")
            .map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
            .filter { $0["name"] != nil }
        let kinds = objects.map { "\($0["event"]!):\($0["name"]!)" }
        #expect(kinds.contains("held:a"))
        #expect(kinds.contains("released:a"))
        #expect(kinds.contains("reacting:a"))
        #expect(kinds.firstIndex(of: "released:a")! < kinds.firstIndex(of: "started:a")!)
        #expect(kinds.firstIndex(of: "reacting:b")! < kinds.firstIndex(of: "finished:b")!)
    }
}

@Suite struct InterceptorExampleTests {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func batchingShipsEveryEventInOrder() async throws {
        let r = try await tasker(["run", "examples/batching.lua", "12"], in: root)
        #expect(r.status == 0)
        #expect(r.stdout == "shipped 12 events: " + (1...12).map { "event \($0)" }.joined(separator: ", ") + "\n")
    }

    @Test func tokenRefreshRefreshesOnceForTheWholeStorm() async throws {
        let r = try await tasker(["run", "examples/token_refresh_tasks.lua"], in: root)
        #expect(r.status == 0)
        #expect(r.stdout == "call-1 ok with fresh-2\ncall-20 ok with fresh-2\n20 calls succeeded after 1 token refresh\n")
    }

    @Test func reloadExampleAppliesItsRules() async throws {
        // 1 s for five 40 ms rounds: generous, the CI machine is busy beside it
        let r = try await tasker(["run", "--watch", "examples/reload/pipeline.lua", "1", "0.04"], in: root)
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("job-1 (size 1): allowed\n"))
        #expect(r.stdout.contains("job-5 (size 5): too big (limit 4)\n"))
    }
}

@Suite struct LogLevelTests {
    @Test func logLevelFiltersLinesOnStderr() async throws {
        let s = try Scratch(["log.lua": "log.info('hello info'); log.warn('hello warn'); log.debug('hello debug')\n"])
        defer { s.cleanup() }
        let normal = try await tasker(["run", "log.lua"], in: s.dir)
        #expect(normal.stderr.contains("INFO hello info"))
        #expect(normal.stderr.contains("WARN hello warn"))
        #expect(!normal.stderr.contains("hello debug"))
        let warn = try await tasker(["run", "--log-level", "warn", "log.lua"], in: s.dir)
        #expect(!warn.stderr.contains("hello info"))
        #expect(warn.stderr.contains("WARN hello warn"))
        let debug = try await tasker(["run", "--log-level", "debug", "log.lua"], in: s.dir)
        #expect(debug.stderr.contains("DEBUG hello debug"))
        #expect(normal.stdout.isEmpty)
    }

    @Test func logLinesParseWithARealLogfmtReader() async throws {
        let s = try Scratch(["log.lua": """
            tasker.add{name = "fetch", run = function()
              log.warn("slow response", {ms = 1200, url = "https://x/a b", ids = {1, 2}, q = 'say "hi"', empty = ""})
            end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-journal", "log.lua"], in: s.dir)
        let line = try #require(r.stderr.split(separator: "\n").first { $0.contains(" WARN ") })
        try line.write(to: s.dir.appendingPathComponent("line.txt"), atomically: true, encoding: .utf8)
        // python3's logfmt package (PyPI), installed by scripts/install-deps
        let parsed = try await shell("""
            python3 -c 'import json, logfmt, sys; print(json.dumps(next(logfmt.parse(open("line.txt")))))'
            """, in: s.dir)
        #expect(parsed.status == 0, "logfmt reader missing? \(parsed.stderr)")
        let fields = try #require(JSONSerialization.jsonObject(with: Data(parsed.stdout.utf8)) as? [String: Any])
        #expect(fields["ms"] as? String == "1200")
        #expect(fields["url"] as? String == "https://x/a b")
        #expect(fields["ids"] as? String == "[1,2]")
        #expect(fields["q"] as? String == #"say "hi""#)
        #expect(fields["empty"] as? String == "")
        #expect(fields["WARN"] as? Bool == true && fields["[fetch]"] as? Bool == true)
    }

    @Test func logFormatJSONWritesOneObjectPerLine() async throws {
        let s = try Scratch(["log.lua": """
            tasker.add{name = "fetch", run = function()
              log.warn("slow", {ms = 1200, url = "https://x/a b", ids = {1, 2}, token = "abc"})
            end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-journal", "--log-format", "json", "log.lua"], in: s.dir)
        #expect(r.status == 0)
        let line = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("{") })
        let o = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(o["level"] as? String == "warn" && o["msg"] as? String == "slow" && o["task"] as? String == "fetch")
        #expect((o["ts"] as? String)?.hasSuffix("Z") == true)
        let fields = try #require(o["fields"] as? [String: Any])
        #expect(fields["ms"] as? Int == 1200 && fields["url"] as? String == "https://x/a b")
        #expect(fields["ids"] as? [Int] == [1, 2])
        let bad = try await tasker(["run", "--log-format", "yaml", "log.lua"], in: s.dir)
        #expect(bad.status == 2 && bad.stderr.contains("--log-format must be logfmt or json"))
    }
}

/// The live status line, seen in a real pseudo-terminal (util-linux `script`).
@Suite struct StatusLineTests {
    let script = """
        local hs = {}
        for i = 1, 3 do
          hs[i] = tasker.add{name = "step-" .. i, run = function(ctx)
            for k = 1, 4 do ctx:progress(k / 4, "part " .. k); tasker.sleep(0.06) end
            return i
          end}
        end
        local total = tasker.all(hs)[3]
        log.info("all steps done")
        print("sum", total)
        """

    /// Runs tasker in a pseudo-terminal; `noColor` sets or removes NO_COLOR.
    func inTerminal(_ args: String, noColor: Bool = false) async throws -> String {
        let s = try Scratch(["prog.lua": script])
        defer { s.cleanup() }
        return try await inPseudoTerminal("\(taskerBinary().path) \(args)", in: s.dir, noColor: noColor)
    }

    @Test func showsRunningDoneAndABarPerTaskThenClearsForTheSummary() async throws {
        let screen = try await inTerminal("run prog.lua")
        #expect(screen.contains("tasker: running 3 · done 0/3 · failed 0"))
        #expect(screen.contains("step-2 ["))
        #expect(screen.contains("part "))
        #expect(screen.contains("\u{1B}[32m#"))
        #expect(screen.contains("sum\t3"))
        #expect(screen.contains("tasker: 3 tasks: 3 succeeded, 0 failed"))
        // the status line names the longest-running tasks with their time
        #expect(screen.range(of: #"· step-\d \d+\.\ds"#, options: .regularExpression) != nil)
        // the summary names the slowest tasks
        #expect(screen.range(of: #"slowest: step-\d 0\.\ds, step-\d 0\.\ds, step-\d 0\.\ds"#, options: .regularExpression) != nil)
        // erased before the summary: the last frame is followed by a clear
        let summary = screen.range(of: "tasker: 3 tasks")!.lowerBound
        #expect(screen[..<summary].hasSuffix("\u{1B}[J") || screen[..<summary].contains("\u{1B}[J"))
        // a log line erases the status line first: the clear comes right before its date
        let log = try #require(screen.range(of: "Z INFO all steps done"))
        let before = screen[..<log.lowerBound].dropLast(23)  // the date and time
        #expect(before.hasSuffix("\u{1B}[J"), "\(before.suffix(40).debugDescription)")
    }

    @Test func noProgressAndNoColorAreRespected() async throws {
        let quiet = try await inTerminal("run --no-progress prog.lua")
        #expect(!quiet.contains("running"))
        #expect(quiet.contains("sum\t3"))
        let plain = try await inTerminal("run prog.lua", noColor: true)
        #expect(plain.contains("tasker: running"))
        #expect(!plain.contains("\u{1B}[32m"))
    }

    @Test func noStatusLineWhenStderrIsNotATerminal() async throws {
        let s = try Scratch(["prog.lua": script])
        defer { s.cleanup() }
        let r = try await tasker(["run", "prog.lua"], in: s.dir)
        #expect(!r.stderr.contains("running"))
        #expect(!r.stderr.contains("\u{1B}["))
    }

    /// libpq loads at the first connection: a run without `--store` never
    /// needs it, and one with it says what is missing instead of crashing.
    @Test func aStoreWithoutAWorkingLibpqIsAClearError() async throws {
        let s = try Scratch(["p.lua": "print('ran')\n"])
        defer { s.cleanup() }
        let broken = s.dir.appendingPathComponent("broken")
        try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
        try Data().write(to: broken.appendingPathComponent("libpq.so.5"))  // not a library
        var env = ProcessInfo.processInfo.environment
        env["LD_LIBRARY_PATH"] = broken.path
        let plain = await collect(try launch(["run", "--no-progress", "p.lua"], in: s.dir, environment: env))
        #expect(plain.status == 0 && plain.stdout == "ran\n")
        let stored = await collect(try launch(["run", "--store", "postgres://127.0.0.1:1/x", "p.lua"], in: s.dir,
                                              environment: env))
        #expect(stored.status == 2)
        #expect(stored.stderr.contains("--store needs libpq (Debian: libpq5):"), "\(stored.stderr)")
        #expect(!stored.stdout.contains("ran"))
    }
}

/// The ops recipes in examples/, run for real against temp dirs and processes.
@Suite struct RecipeTests {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func sh(_ command: String, in dir: URL) throws {
        let p = try Child(URL(fileURLWithPath: "/bin/sh"), ["-c", command], in: dir)
        #expect(waitForExit(p) == (0, false), "setup failed: \(command)")
    }

    @Test func deployRunsTheStepsAndRollsBackWhenTheSmokeCheckFails() async throws {
        let s = try Scratch([:])
        defer { s.cleanup() }
        let log = s.dir.appendingPathComponent("log").path
        let ok = try await tasker(["run", "--var", "build=echo build >> \(log)", "--var", "deploy=echo deploy >> \(log)",
                                   "examples/deploy.lua"], in: root)
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("smoke    ok\nrollback not needed\n"))
        let bad = try await tasker(["run", "--var", "deploy=echo deploy >> \(log)", "--var", "smoke=exit 7",
                                    "--var", "smoke_delay=0", "--var", "rollback=echo rollback >> \(log)",
                                    "examples/deploy.lua"], in: root)
        #expect(bad.status == 1)
        #expect(bad.stdout.contains("smoke    failed: examples/deploy.lua:15: exec: '/bin/sh -c exit 7' exited with code 7"))
        #expect(bad.stdout.contains("rollback rolled back"))
        let broken = try await tasker(["run", "--var", "build=exit 2", "examples/deploy.lua"], in: root)
        #expect(broken.status == 1)
        #expect(broken.stdout.contains("deploy   skipped: dependency: task 'deploy' did not run: dependency 'test' was skipped"))
        #expect(broken.stdout.contains("rollback nothing to roll back"))
        #expect(try String(contentsOfFile: log, encoding: .utf8) == "build\ndeploy\ndeploy\nrollback\n")
    }

    @Test func mirrorReposUpdatesClonesInParallelAndReportsFailures() async throws {
        let s = try Scratch([:])
        defer { s.cleanup() }
        let git = "git -c user.name=t -c user.email=t@example -c init.defaultBranch=main"
        try sh("""
            \(git) init -q --bare upstream.git && \(git) clone -q upstream.git seed 2>/dev/null && cd seed && \
            echo 1 > f && git add f && \(git) commit -qm one && git push -q origin HEAD:main && cd .. && \
            \(git) clone -q upstream.git a && \(git) clone -q upstream.git b && mkdir notarepo && \
            cd seed && echo 2 > f && \(git) commit -qam two && git push -q origin HEAD:main
            """, in: s.dir)
        let r = try await tasker(["run", "--var", "jobs=2", root.appendingPathComponent("examples/mirror_repos.lua").path,
                                  "a", "b", "notarepo"], in: s.dir)
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map { $0.replacingOccurrences(of: #" +"#, with: " ", options: .regularExpression) }
        #expect(lines.count == 4)
        #expect(lines[0].range(of: #"^a updated [0-9a-f]{7}\.\.[0-9a-f]{7}$"#, options: .regularExpression) != nil, "\(lines)")
        #expect(lines[1].hasPrefix("b updated "))
        #expect(lines[2].hasPrefix("notarepo FAILED: "))
        #expect(lines[3] == "3 repositories, 1 failed")
        let again = try await tasker(["run", root.appendingPathComponent("examples/mirror_repos.lua").path, "a"], in: s.dir)
        #expect(again.status == 0)
        #expect(again.stdout.contains("up to date"))
    }

    @Test func watchDiskChecksOnAScheduleAndWarnsOverTheThreshold() async throws {
        let s = try Scratch(["app.log": "start\n"])
        defer { s.cleanup() }
        let logPath = s.dir.appendingPathComponent("app.log").path
        let r = try await tasker(["run", "--var", "path=\(s.dir.path)", "--var", "log=\(logPath)", "--var", "every=0.05",
                                  "--var", "checks=3", "--var", "max_percent=0", "examples/watch_disk.lua"], in: root)
        #expect(r.status == 0)
        #expect(r.stderr.components(separatedBy: "WARN [disk-check#").count - 1 == 3)
        #expect(r.stderr.contains("disk almost full path=\(s.dir.path) used="))
        let calm = try await tasker(["run", "--var", "path=\(s.dir.path)", "--var", "every=0.05", "--var", "checks=1",
                                     "--var", "max_percent=100", "examples/watch_disk.lua"], in: root)
        #expect(calm.stderr.contains("INFO [disk-check#1] disk ok"))
    }
}
