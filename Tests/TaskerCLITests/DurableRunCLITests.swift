import Foundation
import Testing

/// The journal, resume, history and the report, through the built CLI.
@Suite struct DurableRunCLITests {
    /// Each task appends an "x" to its marker file: a file's length is how
    /// many times the task ran.
    static let pipeline = """
        local dir = tasker.args[1]
        local function mark(name) local f = assert(io.open(dir .. "/" .. name, "a")); f:write("x"); f:close() end
        local fetch = tasker.add{name = "fetch", run = function() mark("fetch"); return 42, "s", {k = 1.5, n = 3} end}
        local build = tasker.add{name = "build", after = fetch, run = function()
          mark("build")
          if tasker.vars.fail then error("compiler crashed") end
          return 7
        end}
        -- pairs walks in a different order in every run: identity must not care
        for k, v in pairs({alpha = 1, beta = 2, gamma = 3, delta = 4}) do
          tasker.add{name = "item", args = {k = k, v = v}, run = function(ctx) mark("item-" .. ctx.args.k); return ctx.args.v * 2 end}
        end
        tasker.add{name = "deploy", after = build, run = function()
          mark("deploy")
          local n, s, t = fetch:await()
          print("deploy got", math.type(n), n, s, math.type(t.n), t.n, t.k)
        end}
        """

    /// A captured module is its name in a task's identity, not its
    /// content, also for a module loaded in the middle of adding tasks
    /// (the names of loaded modules are looked at again on a miss).
    @Test func aModuleLoadedBetweenAddsIsItsNameInTheIdentity() async throws {
        let script = """
            package.path = "./?.lua;" .. package.path
            local first = tasker.add{args = {n = string.len("x")}, run = function(ctx) return ctx.idempotency_key end}
            local m = require("mymod")
            local second = tasker.add(function(ctx) return m.x, ctx.idempotency_key end)
            -- a module put in package.loaded by hand, between adds, is named too
            local byHand = {x = m.x}
            package.loaded.byhand = byHand
            local third = tasker.add(function(ctx) return byHand.x, ctx.idempotency_key end)
            local x, key = second:await()
            local _, handKey = third:await()
            print("x=" .. x .. " key=" .. key .. handKey .. " first=" .. first:await())
            """
        var keys: [String] = []
        let s = try Scratch(["p.lua": script])
        defer { s.cleanup() }
        for x in [1, 2] {
            // the same pipeline (its path is part of the key), the module changed
            try "return {x = \(x)}".write(to: s.dir.appendingPathComponent("mymod.lua"), atomically: true, encoding: .utf8)
            for journal in [[], ["--no-journal"]] {
                let r = try await tasker(["run", "--no-progress"] + journal + ["p.lua"], in: s.dir)
                #expect(r.status == 0 && r.stdout.contains("x=\(x) "), "\(r.stdout)\(r.stderr)")
                keys.append(String(r.stdout.split(separator: " ").dropFirst().first ?? ""))
            }
        }
        #expect(Set(keys).count == 1 && keys.first?.hasPrefix("key=") == true, "\(keys)")
    }

    /// The commonest finishes (no name, no values or one integer) reach
    /// the journal as the engine's quick finishes, in batches past the
    /// writer's 4,096: their identities, values, output and times are
    /// recorded as any task's, a retried task's attempts are, and a resume
    /// reuses every one with its values.
    @Test func quickFinishesAreRecordedAndResumedAsAnyTask() async throws {
        let s = try Scratch(["p.lua": """
            local hs = {}
            hs[1] = tasker.add(function() tasker.sh("echo out-one"); tasker.exec{"printf", "x%s\\n", "two\\nlines"}; tasker.exec{"echo", "typed\\\\n"} end)
            hs[2] = tasker.add(function() return 42 end)
            local n = 0
            hs[3] = tasker.add{run = function() n = n + 1; if n < 2 then error("again") end end, retry = {attempts = 2, delay = 0}}
            for i = 1, 5000 do hs[#hs + 1] = tasker.add(function() return i end) end
            hs[#hs + 1] = tasker.add(function() end)
            -- retried, and the last to finish: recorded in full, on the loop
            local m = 0
            hs[#hs + 1] = tasker.add{run = function() m = m + 1; if m < 2 then error("again") end end,
                                     retry = {attempts = 2, delay = 0.05}}
            tasker.all(hs)
            print("values", hs[2]:await(), hs[4]:await(), hs[5003]:await(), hs[5004]:await())
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(first.status == 0 && first.stdout.contains("values\t42\t1\t5000"), "\(first.stdout)\(first.stderr)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let run = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        let tasks = try #require(run["tasks"] as? [[String: Any]])
        #expect(tasks.count == 5005)
        #expect(tasks.allSatisfy { $0["state"] as? String == "succeeded" && ($0["identity"] as? String)?.count == 16 })
        #expect(Set(tasks.compactMap { $0["identity"] as? String }).count == 5005)
        #expect(tasks.map { $0["attempts"] as? Int } == [1, 1, 2] + Array(repeating: 1, count: 5001) + [2])
        #expect(tasks.allSatisfy { ($0["duration"] as? Double ?? -1) >= 0 })
        let output = try await tasker(["show", "last", "--task", "task-1", "--output"], in: s.dir)
        #expect(output.stdout.contains("out-one"), "\(output.stdout)")
        // the command's line stays one line: the newlines in its arguments are escaped
        #expect(output.stdout.contains("$ printf x%s\\n two\\nlines\nxtwo\nlines"), "\(output.stdout)")
        // a typed backslash is doubled: it reads apart from an escaped newline
        #expect(output.stdout.contains("$ echo typed\\\\n\ntyped\\n"), "\(output.stdout)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "p.lua"], in: s.dir)
        #expect(resumed.stderr.contains("5005 succeeded (5005 reused)"), "\(resumed.stderr)")
        #expect(resumed.stdout.contains("values\t42\t1\t5000"), "\(resumed.stdout)")
    }

    func runs(_ s: Scratch, _ name: String) -> Int {
        (try? String(contentsOf: s.dir.appendingPathComponent("out/\(name)"), encoding: .utf8))?.count ?? 0
    }

    @Test func aFailedRunResumedRunsOnlyTheFailedAndSkippedTasks() async throws {
        let s = try Scratch(["p.lua": Self.pipeline])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua", "out"], in: s.dir)
        #expect(first.status == 1)
        #expect(runs(s, "deploy") == 0)

        let plan = try await tasker(["run", "--resume", "--plan", "p.lua", "out"], in: s.dir)
        #expect(plan.status == 0)
        #expect(plan.stdout.contains("reuse  fetch"))
        #expect(plan.stdout.contains("run    build  (failed)"))
        #expect(plan.stdout.contains("run    deploy  (skipped)"))
        #expect(plan.stdout.contains("plan: 5 to reuse, 2 to run again"))

        let second = try await tasker(["run", "--no-progress", "--resume", "p.lua", "out"], in: s.dir)
        #expect(second.status == 0, "\(second.stderr)")
        // fetch and the four items ran once; build twice; deploy once
        #expect(runs(s, "fetch") == 1)
        for k in ["alpha", "beta", "gamma", "delta"] { #expect(runs(s, "item-\(k)") == 1) }
        #expect(runs(s, "build") == 2)
        #expect(runs(s, "deploy") == 1)
        // stored values come back as they were: integers stay integers
        #expect(second.stdout == "deploy got\tinteger\t42\ts\tinteger\t3\t1.5\n")
        #expect(second.stderr.contains("7 succeeded (5 reused)"))

        // A third resume reuses everything (reused tasks were recorded again).
        let third = try await tasker(["run", "--no-progress", "--resume", "p.lua", "out"], in: s.dir)
        #expect(third.status == 0)
        #expect(runs(s, "build") == 2 && runs(s, "deploy") == 1)
        #expect(third.stderr.contains("7 succeeded (7 reused)"))

        // Resuming the first run by its id: what failed or was skipped there runs again.
        let list = try await tasker(["runs", "p.lua", "--json"], in: s.dir)
        let ids = (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])?.compactMap { $0["id"] as? String }
        let firstRun = try #require(ids?.last)
        #expect(ids?.count == 3)
        let fourth = try await tasker(["run", "--no-progress", "--resume", firstRun, "p.lua", "out"], in: s.dir)
        #expect(fourth.status == 0, "\(fourth.stderr)")
        #expect(runs(s, "fetch") == 1 && runs(s, "build") == 3 && runs(s, "deploy") == 2)
        let other = try await tasker(["runs", "other.lua"], in: s.dir)
        #expect(other.stdout.hasPrefix("no runs recorded of other.lua"), "\(other.stdout)")
    }

    /// Runs that stopped early (a mistyped parameter or target, a resume
    /// killed as it began) are gone past by the default `--resume`, which
    /// says so: the latest of them hid the progress before it, and
    /// everything ran again. A resume that stopped early adds what it
    /// resumed from; a run stopped by a usage error with nothing to reuse
    /// is passed over.
    @Test func runsThatStoppedEarlyAreGonePastByTheDefaultResume() async throws {
        let s = try Scratch(["t.lua": """
            local fail = tasker.param{name = "fail", type = "boolean", default = true}
            tasker.param{name = "n", type = "integer", default = 1}
            tasker.add{name = "fetch", run = function() return 1 end}
            tasker.target("build", function() return "b" end)
            tasker.target("test", {after = {"build"}}, function() if fail then error("test failed") end end)
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "t.lua", "test"], in: s.dir)
        #expect(first.status == 1, "\(first.stderr)")
        let typo = try await tasker(["run", "--no-progress", "--resume", "t.lua", "test", "--n", "abc"], in: s.dir)
        #expect(typo.status == 2, "\(typo.stderr)")
        let unknown = try await tasker(["run", "--no-progress", "t.lua", "tset"], in: s.dir)
        #expect(unknown.status == 2, "\(unknown.stderr)")
        let list = try await tasker(["runs", "t.lua", "--json"], in: s.dir)
        let ids = (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])?.compactMap { $0["id"] as? String }
        #expect(ids?.count == 3)
        let plan = try await tasker(["run", "--resume", "--plan", "t.lua", "test"], in: s.dir)
        #expect(plan.stdout.contains("plan: 2 to reuse, 1 to run again"), "\(plan.stdout)")
        #expect(plan.stdout.contains("resume run \(ids?.last ?? "?")"), "\(plan.stdout)")
        #expect(plan.stderr.contains("resuming run \(ids?.last ?? "?"), with what succeeded in the later runs \(ids?[0] ?? "?") (exit 2), "
                                     + "\(ids?[1] ?? "?") (exit 2), which stopped before their end"), "\(plan.stderr)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "t.lua", "test", "--no-fail"], in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("3 succeeded (2 reused)"), "\(resumed.stderr)")
        // A resume named explicitly is taken as it is.
        let named = try await tasker(["run", "--resume", "--plan", ids?.first ?? "?", "t.lua", "test"], in: s.dir)
        #expect(named.stdout.contains("plan: 0 to reuse"), "\(named.stdout)")
    }

    /// A run still going is counted from its tasks as recorded so far (its
    /// counts are written at its end: `runs` said "no tasks").
    @Test func aRunStillGoingIsCountedFromItsTasksSoFar() async throws {
        let s = try Scratch(["live.lua": """
            tasker.add(function() return 1 end):await()
            tasker.add{name = "waits", run = function() while not fs.exists("go") do tasker.sleep(0.02) end end}
            """])
        defer { s.cleanup() }
        let run = try Background(["run", "--no-progress", "--log-level", "debug", "live.lua"], in: s.dir)
        var seen = ""
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            seen = try await tasker(["runs"], in: s.dir).stdout
            if seen.contains("1 running, 1 succeeded") { break }
            try await Task.sleep(for: .milliseconds(200))  // a look now and then: not a process every few ms
        }
        let shown = try await tasker(["show", "last"], in: s.dir).stdout
        #expect(seen.contains("1 running, 1 succeeded"), "\(seen)\n\(shown)")
        // and show's header too (it said "no tasks" above the tasks it listed)
        #expect(shown.contains("exit running  1 running, 1 succeeded"), "\(shown)")
        try Data("x".utf8).write(to: s.dir.appendingPathComponent("go"))
        let done = await run.finish()
        #expect(done.status == 0, "\(done.stderr)")
        if !seen.contains("1 running, 1 succeeded") { print("the live run said:\n\(done.stderr)") }
        let after = try await tasker(["runs"], in: s.dir).stdout
        #expect(after.contains("2 succeeded") && !after.contains("running"), "\(after)")
    }

    /// A resume that stopped before its end (its main chunk raised) is
    /// merged over the run it resumed: the plan and the resume reuse what
    /// either did. A fresh run whose tasks ran and failed before it stopped
    /// is taken as it is: its failures are the latest word on those tasks.
    @Test func aStoppedResumeIsMergedOverItsRunAndAFreshRunIsTakenAsItIs() async throws {
        let s = try Scratch(["m.lua": """
            -- read in the bodies, not captured: the identities stay the same
            local a = tasker.add{name = "a", run = function() if (tasker.vars.mode or ""):find("faila") then error("a failed") end return 1 end}
            local b = tasker.add{name = "b", run = function() if (tasker.vars.mode or ""):find("failb") then error("b failed") end return 2 end}
            a:result(); b:result()
            if (tasker.vars.mode or ""):find("late") then error("raised late") end
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "--var", "mode=failb", "m.lua"], in: s.dir)
        #expect(first.status == 1, "\(first.stderr)")
        let late = try await tasker(["run", "--no-progress", "--resume", "--var", "mode=late", "m.lua"], in: s.dir)
        #expect(late.status == 2, "\(late.stderr)")
        let plan = try await tasker(["run", "--resume", "--plan", "m.lua"], in: s.dir)
        #expect(plan.stdout.contains("plan: 2 to reuse, 0 to run again"), "\(plan.stdout)")
        #expect(plan.stderr.contains("(exit 2), which stopped before its end"), "\(plan.stderr)")

        let fresh = try await tasker(["run", "--no-progress", "--var", "mode=faila,failb,late", "m.lua"], in: s.dir)
        #expect(fresh.status == 2, "\(fresh.stderr)")
        let again = try await tasker(["run", "--resume", "--plan", "m.lua"], in: s.dir)
        #expect(again.stdout.contains("run    a  (failed)") && again.stdout.contains("plan: 0 to reuse, 2 to run again"),
                "\(again.stdout)")
        #expect(!again.stderr.contains("resuming run"), "\(again.stderr)")
    }

    /// Closures of one function expression share a prototype (its bytecode
    /// is hashed once): what they capture still tells them apart. Code made
    /// with `load` (a prototype each, more than are cached) is told apart
    /// by its bytecode and captures too.
    /// A rolling restart that stopped on a failure, resumed: the hosts done
    /// are not done again, the batches are made of the others; a group's
    /// members likewise.
    @Test func aResumedRollingRunAndGroupRedoOnlyWhatDidNotSucceed() async throws {
        let s = try Scratch(["p.lua": """
            local dir = tasker.args[1]
            local function mark(name) local f = assert(io.open(dir .. "/" .. name, "a")); f:write("x"); f:close() end
            local roll = tasker.rolling{name = "restart", hosts = {"a", "b", "c", "d", "e"}, batch = 2, max_failures = 0,
              run = function(ctx, host)
                mark(host)
                if host == "c" and tasker.vars.fail then error("c did not come back") end
                return host .. "-ok"
              end}
            local group = tasker.parallel({
              {name = "g1", run = function() mark("g1"); return 1 end},
              {name = "g2", run = function() mark("g2"); if tasker.vars.fail then error("g2 failed") end; return 2 end},
              {name = "g3", run = function() mark("g3"); return 3 end},
            }, {fail_fast = false})
            -- fails with the rolling in the first run: runs again on resume
            tasker.add{name = "report", run = function()
              roll:await()
              print("rolling", "ok")
            end}
            -- a task awaiting a group that succeeded is reused with it
            local fine = tasker.serial({{name = "s1", run = function() mark("s1"); return 10 end}})
            tasker.add{name = "after", run = function() mark("after"); return fine:await()[1] + 1 end}
            """])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua", "out"], in: s.dir)
        #expect(first.status == 1)
        // batch 1 (a, b), batch 2 (c fails, d runs): e is never started
        #expect(["a", "b", "c", "d", "e"].map { runs(s, $0) } == [1, 1, 1, 1, 0], "\(first.stderr)")
        #expect(first.stderr.contains("rolling: too many failures (1 > 0)"), "\(first.stderr)")

        let plan = try await tasker(["run", "--resume", "--plan", "p.lua", "out"], in: s.dir)
        #expect(plan.stdout.contains("reuse  a"), "\(plan.stdout)")
        #expect(plan.stdout.contains("run    c  (failed)"), "\(plan.stdout)")
        #expect(plan.stdout.contains("reuse  g1"), "\(plan.stdout)")
        #expect(plan.stdout.contains("reuse  after"), "\(plan.stdout)")

        let second = try await tasker(["run", "--no-progress", "--resume", "p.lua", "out"], in: s.dir)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(["a", "b", "c", "d", "e"].map { runs(s, $0) } == [1, 1, 2, 1, 1], "\(second.stderr)")
        #expect(["g1", "g2", "g3"].map { runs(s, $0) } == [1, 2, 1], "\(second.stderr)")
        #expect(second.stdout.contains("rolling\tok"), "\(second.stdout)")
        // a, b, d, g1, g3, s1 and after reused
        #expect(second.stderr.contains("(7 reused)"), "\(second.stderr)")
        #expect(["s1", "after"].map { runs(s, $0) } == [1, 1], "\(second.stderr)")

        // everything done: a third resume runs no host again
        let third = try await tasker(["run", "--no-progress", "--resume", "p.lua", "out"], in: s.dir)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(["a", "b", "c", "d", "e", "g1", "g2", "g3"].map { runs(s, $0) } == [1, 1, 2, 1, 1, 1, 2, 1])
    }

    /// An empty group has an identity too (its kind alone).
    @Test func emptyGroupsAreIdentified() async throws {
        let s = try Scratch(["p.lua": """
            local p, q = tasker.parallel({}), tasker.serial({})
            tasker.add{name = "after", run = function() return #p:await() + #q:await() end}
            print(#p:await(), #q:await())
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "0\t0\n")
        let plan = try await tasker(["run", "--resume", "--plan", "p.lua"], in: s.dir)
        #expect(plan.stdout.contains("reuse  after"), "\(plan.stdout)")
    }

    @Test func closuresOfOnePrototypeAreToldApartByWhatTheyCapture() async throws {
        let s = try Scratch(["p.lua": """
            local dir = tasker.args[1]
            local function mark(name) local f = assert(io.open(dir .. "/" .. name, "a")); f:write("x"); f:close() end
            for i = 1, 5 do
              tasker.add(function() mark("c" .. i); if tasker.vars.fail and i == 3 then error("no") end; return i end)
            end
            for i = 1, 5000 do
              local f = load("local i = ...; return function() if tasker.vars.fail and i == 4999 then error('no') end return i end")(i)
              tasker.add(f)
            end
            local g = load("return function() mark('g') end", "g", "t", {mark = mark})()
            tasker.add(g)
            """])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua", "out"], in: s.dir)
        #expect(first.status == 1)
        let second = try await tasker(["run", "--no-progress", "--resume", "p.lua", "out"], in: s.dir)
        #expect(second.status == 0, "\(second.stderr)")
        // only the two that failed ran again
        #expect(second.stderr.contains("5006 succeeded (5004 reused)"), "\(second.stderr)")
        for i in 1...5 { #expect(runs(s, "c\(i)") == (i == 3 ? 2 : 1)) }
        #expect(runs(s, "g") == 1)
    }

    /// A closure capturing only numbers, strings, booleans and nil is
    /// hashed by a fast path in C once its prototype is known; the first
    /// one of the prototype takes the full walk. Each resume starts the
    /// loop at another value, so every value is hashed both ways across the
    /// runs: all must be reused.
    @Test func theFastPathAndTheWalkGiveEveryCaptureOneIdentity() async throws {
        let s = try Scratch(["p.lua": """
            DIR = tasker.args[1]
            function MARK(name) local f = assert(io.open(DIR .. "/" .. name, "a")); f:write("x"); f:close() end
            local values = {1, "a", 2.5, true, false, -7, "", "bytes\\0z", 1e300}
            local n, first = #values, tonumber(tasker.vars.first) or 1
            for k = 0, n - 1 do
              local idx = (first - 1 + k) % n + 1
              local v, none = values[idx], nil
              tasker.add(function() MARK("v" .. idx); return v, none end)
            end
            tasker.add(function() if tasker.vars.fail then error("late") end end)
            """])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua", "out"], in: s.dir)
        #expect(first.status == 1, "\(first.stderr)")
        for start in 1...9 {
            let again = try await tasker(["run", "--no-progress", "--resume", "--var", "first=\(start)", "p.lua", "out"],
                                         in: s.dir)
            #expect(again.status == 0, "\(again.stderr)")
            let reused = start == 1 ? 9 : 10
            #expect(again.stderr.contains("10 succeeded (\(reused) reused)"), "start \(start): \(again.stderr)")
        }
        for i in 1...9 { #expect(runs(s, "v\(i)") == 1, "v\(i)") }
    }

    /// A value with a metatable of its own cannot come back as it was: it
    /// is named at record time and the task runs again on resume. An error
    /// table (tasker's own metatable) comes back with it, tostring and all.
    @Test func aValueWithAMetatableIsNamedNotStrippedAndAnErrorTableComesBack() async throws {
        let s = try Scratch(["p.lua": """
            local obj = tasker.add{id = "obj", run = function()
              print("ran obj")
              return setmetatable({a = 1}, {__index = {b = 2}})
            end}
            local err = tasker.add{id = "err", run = function()
              print("ran err")
              local ok, e = pcall(tasker.exec, {"tasker-no-such-program"})
              return e
            end}
            local o, e = obj:await(), err:await()
            print("obj", o.a, o.b, "err", e.kind, tostring(e):sub(1, 16))
            tasker.add{run = function() if not tasker.vars.fixed then error("later") end end}
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(first.status == 1)
        #expect(first.stderr.contains("(id 'obj'): its values cannot be stored: a table with a metatable"), "\(first.stderr)")
        #expect(first.stdout.contains("obj\t1\t2\terr\texec\texec: cannot run"), "\(first.stdout)")
        let again = try await tasker(["run", "--no-progress", "--resume", "--var", "fixed=1", "p.lua"], in: s.dir)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("ran obj") && !again.stdout.contains("ran err"), "\(again.stdout)")
        #expect(again.stdout.contains("obj\t1\t2\terr\texec\texec: cannot run"), "\(again.stdout)")
    }

    /// A reused task's `reused` event says the state its handle has at
    /// once: succeeded, with its name and id, then `finished`.
    @Test func theReusedEventSaysSucceeded() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "fetch", run = function() return 1 end}
            tasker.add{name = "flaky", run = function() if not tasker.vars.fixed then error("no") end end}
            """])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let again = try await tasker(["run", "--no-progress", "--resume", "--var", "fixed=1", "--events", "ev.jsonl", "p.lua"], in: s.dir)
        #expect(again.status == 0, "\(again.stderr)")
        let lines = try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8).split(separator: "\n")
        let reused = lines.filter { $0.contains(#""event":"reused""#) }
        #expect(reused.count == 1 && reused[0].contains(#""name":"fetch""#) && reused[0].contains(#""state":"succeeded""#),
                "\(lines)")
    }

    /// Occurrences count tasks with one identity in add order, however
    /// the repeats are spread (the counts cache the last identity).
    @Test func occurrencesCountRepeatsWhereverTheyAre() async throws {
        let s = try Scratch(["p.lua": """
            for _, v in ipairs{1, 2, 1, 3, 1, 1, 2, 3, 3, 1} do tasker.add(function() return v end) end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(run.status == 0, "\(run.stderr)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        let tasks = try #require(json["tasks"] as? [[String: Any]])
        let identities = tasks.sorted { ($0["id"] as? Int ?? 0) < ($1["id"] as? Int ?? 0) }.compactMap { $0["identity"] as? String }
        #expect(identities.count == 10)
        let suffixes = identities.map { $0.split(separator: "#").dropFirst().first.map(String.init) ?? "1" }
        #expect(suffixes == ["1", "1", "2", "1", "3", "4", "2", "2", "3", "5"], "\(identities)")
        // one hash per value
        let bases = identities.map { $0.split(separator: "#")[0] }
        #expect(Set(bases).count == 3 && bases[0] == bases[2] && bases[1] == bases[6] && bases[3] == bases[7])
    }

    /// The journal's thread counts occurrences from the identities handed to
    /// it in add order; the run's thread counts them only once something
    /// asks for one (here an idempotency key, mid-run). Named, failing and
    /// plain tasks before and after that switch all get the occurrence the
    /// run's thread would have given them: a resume reuses every task that
    /// succeeded.
    @Test func occurrencesCountedOffTheRunsThreadMatchItsOwnCount() async throws {
        let s = try Scratch(["p.lua": """
            for _, v in ipairs{1, 2, 1, 3, 1} do
              tasker.add{name = "n", run = function() if v == 3 and not tasker.vars.fixed then error("x") end return v end}
            end
            for _, v in ipairs{1, 2, 1} do tasker.add(function() return v end) end
            print(tasker.add{name = "key", run = function(ctx) return #ctx.idempotency_key end}:await())
            for _, v in ipairs{1, 2, 1} do tasker.add(function() return v end) end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stdout == "16\n")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        let tasks = try #require(json["tasks"] as? [[String: Any]])
        let identities = tasks.sorted { ($0["id"] as? Int ?? 0) < ($1["id"] as? Int ?? 0) }.compactMap { $0["identity"] as? String }
        #expect(identities.count == 12)
        let suffixes = identities.map { $0.split(separator: "#").dropFirst().first.map(String.init) ?? "1" }
        #expect(suffixes == ["1", "1", "2", "1", "3", "1", "1", "2", "1", "3", "2", "4"], "\(identities)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "--var", "fixed=1", "p.lua"], in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("12 succeeded (11 reused)"), "\(resumed.stderr)")
    }

    /// A lone integer result is kept in the task's outcome and written to
    /// the journal digit by digit: every width and sign comes back exact.
    @Test func loneIntegerResultsComeBackExactOnResume() async throws {
        let s = try Scratch(["p.lua": """
            local values = {0, 7, 9, 10, 99, 100, -1, -9, -10, 123456789, math.maxinteger, math.mininteger}
            local hs = {}
            for i, v in ipairs(values) do
              hs[i] = tasker.add(function()
                print("ran " .. i)
                return v
              end)
            end
            tasker.add{after = hs, run = function()
              if tasker.vars.fail then error("late") end
              local out = {}
              for i, h in ipairs(hs) do
                local v = h:await()
                out[i] = math.type(v) .. ":" .. tostring(v)
                assert(v == values[i], "value " .. i)
              end
              print(table.concat(out, " "))
            end}
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua"], in: s.dir)
        #expect(first.status == 1, "\(first.stderr)")
        let second = try await tasker(["run", "--no-progress", "--resume", "p.lua"], in: s.dir)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("ran "), "\(second.stdout)")
        #expect(second.stderr.contains("13 succeeded (12 reused)"), "\(second.stderr)")
        #expect(second.stdout.contains(
            "integer:0 integer:7 integer:9 integer:10 integer:99 integer:100 integer:-1 integer:-9 integer:-10 "
            + "integer:123456789 integer:9223372036854775807 integer:-9223372036854775808"), "\(second.stdout)")
    }

    @Test func historyListsRunsAndShowsTasksAsJSON() async throws {
        let s = try Scratch(["p.lua": Self.pipeline])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        _ = try await tasker(["run", "--no-progress", "--var", "fail=1", "--var", "api_token=hunter2", "p.lua", "out"], in: s.dir)
        _ = try await tasker(["run", "--no-progress", "p.lua", "out"], in: s.dir)

        let list = try await tasker(["runs", "--json"], in: s.dir)
        #expect(list.status == 0)
        let runs = try #require(JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(runs.count == 2)
        #expect(runs.map { $0["exit_code"] as? Int } == [0, 1])  // newest first
        #expect((runs[1]["counts"] as? [String: Int])?["failed"] == 1)
        #expect((runs[0]["pipeline"] as? String)?.hasSuffix("/p.lua") == true)
        for key in ["id", "pipeline", "started", "duration", "exit_code", "counts"] { #expect(runs[0][key] != nil, "runs lacks \(key)") }

        let show = try await tasker(["show", runs[1]["id"] as! String, "--json"], in: s.dir)
        let run = try #require(JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        let tasks = try #require(run["tasks"] as? [[String: Any]])
        #expect(tasks.map { $0["name"] as? String } == ["fetch", "build", "item", "item", "item", "item", "deploy"])
        let build = tasks[1]
        #expect(build["state"] as? String == "failed")
        #expect((build["error"] as? String)?.contains("compiler crashed") == true)
        #expect(build["attempts"] as? Int == 1)
        #expect(tasks[6]["state"] as? String == "skipped")
        #expect(Set(tasks.compactMap { $0["identity"] as? String }).count == 7)

        let text = try await tasker(["show", "last"], in: s.dir)
        #expect(text.stdout.contains("succeeded") && text.stdout.contains("deploy"))
        // secrets given with --var are not stored
        let journal = try Data(contentsOf: s.dir.appendingPathComponent(".tasker-state/journal.db"))
        #expect(journal.range(of: Data("hunter2".utf8)) == nil)

        // --keep alone did nothing, silently
        let keepAlone = try await tasker(["runs", "--keep", "1"], in: s.dir)
        #expect(keepAlone.status == 2 && keepAlone.stderr.contains("--keep goes with --prune"), "\(keepAlone.stderr)")
        let pruned = try await tasker(["runs", "--prune", "--keep", "1"], in: s.dir)
        #expect(pruned.stdout == "pruned 1 run\n")
        let after = try await tasker(["runs", "--json"], in: s.dir)
        #expect((try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [Any])?.count == 1)
    }

    @Test func aRunKilledWithSIGKILLResumesWithoutRedoingFinishedTasks() async throws {
        let s = try Scratch(["k.lua": """
            local dir = tasker.args[1]
            local function mark(name) local f = assert(io.open(dir .. "/" .. name, "a")); f:write("x"); f:close() end
            local quick = {}
            for i = 1, 5 do quick[i] = tasker.add{name = "quick" .. i, run = function() mark("quick" .. i); return i end} end
            local slow = tasker.add{name = "slow", run = function() mark("slow"); tasker.sleep(tonumber(tasker.vars.sleep or "60")) end}
            tasker.all(quick)
            tasker.sleep(1.2)  -- past the journal's 100 ms promise, and two of its 0.5 s beats
            io.write("ready\\n"); io.stdout:flush()
            slow:await()
            """])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let killed = try await taskerInterrupted(["run", "--no-progress", "k.lua", "out"], in: s.dir, markers: ["ready"], signal: SIGKILL)
        #expect(killed.status == SIGKILL)

        // The journal opens cleanly; the run died; the slow task was lost.
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        #expect(show.status == 0, "\(show.stderr)")
        let run = try #require(JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        let tasks = try #require(run["tasks"] as? [[String: Any]])
        let slow = try #require(tasks.first { $0["name"] as? String == "slow" })
        #expect(slow["state"] as? String == "failed")
        #expect(slow["error_kind"] as? String == "lost")
        #expect(tasks.filter { $0["state"] as? String == "succeeded" }.count == 5)
        // how long it and the run really lasted (to within a beat), not 0:
        // a beat 0.5 s after the recorder's start finds the task started a
        // moment after it (a loaded clean-clone suite read 0.499865 s)
        #expect((slow["duration"] as? Double ?? 0) >= 0.45, "\(slow)")
        #expect((run["duration"] as? Double ?? 0) >= 0.45, "\(run["duration"] ?? "none")")

        let resumed = try await tasker(["run", "--no-progress", "--var", "sleep=0", "--resume", "k.lua", "out"], in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        for i in 1...5 { #expect(runs(s, "quick\(i)") == 1, "quick\(i) ran again") }
        #expect(runs(s, "slow") == 2)
    }

    @Test func theJournalIsPrivateAndNoJournalWritesNothing() async throws {
        let s = try Scratch(["p.lua": "tasker.add(function() return 1 end)"])
        defer { s.cleanup() }
        let off = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        #expect(off.status == 0)
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent(".tasker-state").path))

        let on = try await tasker(["run", "--no-progress", "--state", "st", "p.lua"], in: s.dir)
        #expect(on.status == 0)
        let attributes = try FileManager.default.attributesOfItem(atPath: s.dir.appendingPathComponent("st/journal.db").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let dir = try FileManager.default.attributesOfItem(atPath: s.dir.appendingPathComponent("st").path)
        #expect((dir[.posixPermissions] as? Int) == 0o700)

        let bad = try await tasker(["run", "--no-journal", "--resume", "p.lua"], in: s.dir)
        #expect(bad.status == 2)
        let nothing = try await tasker(["run", "--resume", "p.lua"], in: s.dir)
        #expect(nothing.status == 2)
        #expect(nothing.stderr.contains("cannot resume"))
    }

    @Test func twoRunsAtOnceShareTheJournal() async throws {
        let s = try Scratch(["many.lua": """
            local hs = {}
            for i = 1, 3000 do hs[i] = tasker.add{name = "t" .. i, run = function() return i end} end
            tasker.all(hs)
            """])
        defer { s.cleanup() }
        async let first = tasker(["run", "--no-progress", "many.lua"], in: s.dir)
        async let second = tasker(["run", "--no-progress", "many.lua"], in: s.dir)
        async let third = tasker(["run", "--no-progress", "many.lua"], in: s.dir)
        for r in try await [first, second, third] {
            #expect(r.status == 0)
            #expect(!r.stderr.contains("warning"), "\(r.stderr)")
        }
        let r = try await tasker(["runs", "--json"], in: s.dir)
        let runs = try #require(JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]], "\(r.stderr)")
        #expect(runs.count == 3)
        for run in runs {
            #expect(run["exit_code"] as? Int == 0)
            #expect((run["counts"] as? [String: Int])?["succeeded"] == 3000)
            let show = try await tasker(["show", run["id"] as! String, "--json"], in: s.dir)
            let tasks = (try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])?["tasks"] as? [Any]
            #expect(tasks?.count == 3000)
        }
    }

    @Test func explicitIdsNameTasksAndADuplicateIsAUsageError() async throws {
        let s = try Scratch([
            "ids.lua": """
                local n = 0
                tasker.add{id = "step-one", run = function() n = n + 1; return n end}
                print(tasker.add{id = "step-one", run = function() end})
                """,
            "key.lua": """
                local h = tasker.add{id = "k", run = function(ctx) return ctx.idempotency_key end}
                print(h:await())
                """,
        ])
        defer { s.cleanup() }
        let dup = try await tasker(["run", "--no-progress", "ids.lua"], in: s.dir)
        #expect(dup.status == 2)
        #expect(dup.stderr.contains("ids.lua:3:") && dup.stderr.contains("id 'step-one' is already used"))
        let a = try await tasker(["run", "--no-progress", "key.lua"], in: s.dir)
        let b = try await tasker(["run", "--no-progress", "--no-journal", "key.lua"], in: s.dir)
        #expect(a.stdout.count == 17 && a.stdout == b.stdout)  // same key across runs, journal or not
        // and from another directory, by another path to the same file
        let c = try await tasker(["run", "--no-progress", "--no-journal", s.dir.path + "/./key.lua"],
                                 in: URL(fileURLWithPath: "/"))
        #expect(c.stdout == a.stdout)
    }

    @Test func definedTasksAreResumedByTheirArgs() async throws {
        let s = try Scratch(["d.lua": """
            local dir = tasker.args[1]
            local step = tasker.define("step", function(ctx, args)
              local f = assert(io.open(dir .. "/" .. args.host, "a")); f:write("x"); f:close()
              if tasker.vars.fail == args.host then error("deploy to " .. args.host .. " failed") end
              return {host = args.host, ok = true}
            end)
            for _, host in ipairs({"a", "b", "c"}) do step{args = {host = host}} end
            """])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let first = try await tasker(["run", "--no-progress", "--var", "fail=b", "d.lua", "out"], in: s.dir)
        #expect(first.status == 1)
        let again = try await tasker(["run", "--no-progress", "--resume", "d.lua", "out"], in: s.dir)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(runs(s, "a") == 1 && runs(s, "b") == 2 && runs(s, "c") == 1)
        #expect(again.stderr.contains("3 succeeded (2 reused)"))
    }
}

/// `--resume --plan` evaluates the file as it is now (and this command's
/// `--var`s), as the resume would: an edited body is planned to run again,
/// and where the main chunk would wait for a task that must run, the plan
/// says it cannot see further.
@Suite struct ResumePlanCLITests {
    /// Replaces `from` with `to` in the scratch's p.lua (a body edited
    /// between the run and its plan).
    func edit(_ s: Scratch, _ from: String, _ to: String) throws {
        let file = s.dir.appendingPathComponent("p.lua")
        try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: from, with: to)
            .write(to: file, atomically: true, encoding: .utf8)
    }

    /// The plan of resuming p.lua's last run, line by line after its first.
    func planLines(_ s: Scratch) async throws -> [String] {
        let plan = try await tasker(["run", "--resume", "--plan", "p.lua"], in: s.dir)
        #expect(plan.status == 0, "\(plan.stderr)")
        return Array(plan.stdout.split(separator: "\n").map(String.init).dropFirst())
    }

    @Test func thePlanIsWhatTheResumeDoes() async throws {
        let s = try Scratch(["p.lua": """
            local fetch = tasker.add{name = "fetch", run = function() return 42 end}
            for i = 1, 3 do tasker.add{name = "item", run = function() return i * 2 end} end
            local build = tasker.add{name = "build", after = fetch, run = function()
              if tasker.vars.fail then error("compiler crashed") end
            end}
            tasker.add{name = "deploy", after = build, run = function() print("deployed") end}
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "--var", "fail=1", "p.lua"], in: s.dir)
        #expect(first.status == 1)
        // edit two bodies' code: those tasks run again
        try edit(s, "return i * 2", "return i * 3")
        let lines = try await planLines(s)
        #expect(lines == [
            "reuse  fetch",
            "run    item  (new, or changed since then)",
            "run    item  (new, or changed since then)",
            "run    item  (new, or changed since then)",
            "run    build  (failed)",
            "run    deploy  (skipped)",
            "plan: 1 to reuse, 5 to run again",
        ], "\(lines)")
        #expect(!lines.contains { $0.contains("deployed") }, "a body ran")
        // and the resume does what the plan said
        let resumed = try await tasker(["run", "--no-progress", "--resume", "p.lua"], in: s.dir)
        #expect(resumed.status == 0)
        #expect(resumed.stderr.contains("6 succeeded (1 reused)"), "\(resumed.stderr)")
    }

    /// A main chunk that never ends is stopped by SIGTERM.
    @Test func aPlanStopsOnASignal() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "a", run = function() return 1 end}
            if tasker.vars.mode == "loop" then io.stdout:write("looping\\n"); io.stdout:flush(); while true do end end
            """])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let looped = try await taskerInterrupted(["run", "--resume", "--plan", "--var", "mode=loop", "p.lua"], in: s.dir,
                                                 markers: ["looping"], signal: SIGTERM)
        #expect(looped.status == 143, "\(looped.stderr)")
    }

    /// A main chunk that fails makes the plan exit 2, as the resume would.
    @Test func aPlanFailsWithItsMainChunk() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "a", run = function() return 1 end}
            if tasker.vars.mode == "fail" then error("broken main chunk") end
            """])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let failed = try await tasker(["run", "--resume", "--plan", "--var", "mode=fail", "p.lua"], in: s.dir)
        #expect(failed.status == 2)
        #expect(failed.stdout.contains("plan: the main chunk failed: p.lua:2: broken main chunk"), "\(failed.stdout)")
    }

    @Test func aPlanStopsWhereTheMainChunkWaitsForATaskThatMustRun() async throws {
        let s = try Scratch(["p.lua": """
            local fetch = tasker.add{name = "fetch", run = function() return 42 end}
            print("fetched", fetch:await())
            local build = tasker.add{name = "build", run = function() error("broken") end}
            build:await()
            tasker.add{name = "after-the-wait", run = function() end}
            """])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let plan = try await tasker(["run", "--resume", "--plan", "p.lua"], in: s.dir)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("\nreuse  fetch\nrun    build  (failed)\n"), "\(plan.stdout)")
        #expect(plan.stdout.contains("plan: incomplete: p.lua:4: the main chunk waits there for 'build', which would run"),
                "\(plan.stdout)")
        #expect(!plan.stdout.contains("after-the-wait") && !plan.stdout.contains("fetched"))
    }

    /// Where the evaluation stops, the earlier run's tasks it did not come
    /// to are listed as that run left them: each task of the run is in the
    /// plan.
    @Test func theEarlierRunsTasksPastTheStopAreListedFromItsRecord() async throws {
        let s = try Scratch(["p.lua": """
            local a = tasker.add{name = "a", run = function() error("a fails") end}
            local ok = a:result()
            tasker.add{name = "b", run = function() return 2 end}
            local b2 = tasker.add{name = "b2", after = a, run = function() return 3 end}
            local co = coroutine.create(function() end)
            tasker.add{name = "c", run = function() return coroutine.status(co) end}
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(first.status == 1)
        let lines = try await planLines(s)
        #expect(lines == [
            "run    a  (failed)",
            "plan: incomplete: p.lua:2: the main chunk waits there for 'a', which would run; the tasks it adds after that are not known until it runs",
            "plan: the earlier run's other tasks, as it left them:",
            "reuse  b",
            "run    b2  (skipped)",
            "run    c  (not resumable: its body captures a coroutine)",
            "plan: 1 to reuse, 3 to run again",
        ], "\(lines)")
        // a's body edited: the plan's 'a' stands for the earlier one (not listed twice)
        try edit(s, "error(\"a fails\")", "error(\"a fails again\")")
        let again = try await planLines(s)
        #expect(again.filter { $0.hasSuffix("  a") || $0.contains("  a  (") } == ["run    a  (new, or changed since then)"], "\(again)")
        #expect(again.last == "plan: 1 to reuse, 3 to run again", "\(again)")
    }

    /// A plan runs nothing: where the main chunk itself would change a
    /// file, start a process or sleep, its evaluation stops there and the
    /// plan says so; nothing happened.
    @Test func aPlanStopsWhereTheMainChunkWouldActItself() async throws {
        for (n, line) in [(1, "fs.write('touched-1', 'x')"), (2, "tasker.exec{'touch', 'touched-2'}"),
                          (3, "os.execute('touch touched-3')"), (4, "io.popen('touch touched-4'):close()"),
                          (5, "tasker.sh('touch touched-5')"), (6, "tasker.sleep(600)"),
                          // a stop caught by pcall stops again at the next call; a coroutine is stopped too
                          (7, "pcall(fs.remove, 'nothing'); fs.write('touched-7', 'x')"),
                          (8, "coroutine.wrap(function() fs.write('touched-8', 'x') end)()"),
                          (9, "io.open('touched-9', 'w'):close()"), (10, "os.rename('p.lua', 'touched-10')"),
                          (11, "pcall(os.remove, 'p.lua'); os.execute('touch touched-11')"),
                          // a reused task's finish handler runs at once, in the main chunk
                          (12, "fetch:on('finish', function() io.open('touched-12', 'w'):close() end)")] {
            let s = try Scratch(["p.lua": """
                local fetch = tasker.add{name = "fetch", run = function() return 42 end}
                if tasker.vars.act then \(line) end
                tasker.add{name = "later", run = function() end}
                """])
            defer { s.cleanup() }
            _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
            let started = Date()
            let plan = try await tasker(["run", "--resume", "--plan", "--var", "act=1", "p.lua"], in: s.dir)
            #expect(plan.status == 0, "\(line): \(plan.stderr)")
            #expect(plan.stdout.contains("reuse  fetch"), "\(line): \(plan.stdout)")
            let who = n == 12 ? "the 'finish' handler of task 'fetch'" : "the main chunk"
            #expect(plan.stdout.contains("plan: incomplete: p.lua:2: \(who) calls "), "\(line): \(plan.stdout)")
            #expect(!plan.stderr.contains("error in"), "\(line): \(plan.stderr)")
            // the evaluation did not come to 'later': it is listed from the earlier run's record
            #expect(plan.stdout.hasSuffix("plan: the earlier run's other tasks, as it left them:\nreuse  later\nplan: 2 to reuse, 0 to run again\n"),
                    "\(line): \(plan.stdout)")
            #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("touched-\(n)").path), "\(line) ran")
            #expect(FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("p.lua").path), "\(line) removed p.lua")
            #expect(Date().timeIntervalSince(started) < 300, "\(line): the plan waited")
        }
    }
}
